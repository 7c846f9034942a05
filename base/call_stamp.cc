#include "base/call_stamp.h"

#include <cstdio>

namespace tessera {

std::string DescribeBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(text, sizeof(text), "%llu %s", static_cast<unsigned long long>(v), kUnits[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", v, kUnits[unit]);
  }
  return text;
}

std::string DescribeCall(const CallStamp& s) {
  if (s.seq == 0 && (s.flags & kStampCreation) != 0) return "communicator creation";
  if (s.seq == 0 && s.kind < kNumOpKinds && IsPointToPoint(static_cast<OpKind>(s.kind))) {
    return "sends/receives (" + DescribeBytes(s.count) + " sent)";
  }
  if (s.seq == 0) return "no collective";
  const bool known_kind = s.kind < kNumOpKinds;
  const bool known_type = s.type < kNumDataTypes;
  std::string out = known_kind ? OpName(static_cast<OpKind>(s.kind)) : "call kind " + std::to_string(s.kind);
  if ((s.flags & kStampParts) != 0) out += " of parts";
  out += " #" + std::to_string(s.seq) + " (" + std::to_string(s.count) + " x ";
  out += known_type ? DataTypeName(static_cast<DataType>(s.type)) : "type " + std::to_string(s.type);
  if (known_type) out += " = " + DescribeBytes(s.count * SizeOf(static_cast<DataType>(s.type)));
  if (known_kind && IsReduction(static_cast<OpKind>(s.kind))) {
    out += ", ";
    out += s.op < kNumRedOps ? RedOpName(static_cast<RedOp>(s.op)) : s.op == kNumRedOps ? "premulsum" : "op ?";
  }
  const OpKind k = static_cast<OpKind>(s.kind);
  if (known_kind && IsRooted(k)) {
    out += ", root " + std::to_string(s.root);
  }
  return out + ")";
}

namespace {

std::string RankCalled(int rank, const CallStamp& stamp) {
  const std::string who = "rank " + std::to_string(rank);
  if (stamp.seq == 0) return who + " was in no collective (a send or receive)";
  return who + " called " + DescribeCall(stamp);
}

}  // namespace

Status MismatchedCalls(int rank, const CallStamp& mine, int peer, const CallStamp& theirs) {
  const bool mine_first = rank <= peer;
  return InvalidUsage("mismatched calls: " + RankCalled(mine_first ? rank : peer, mine_first ? mine : theirs) +
                      " but " + RankCalled(mine_first ? peer : rank, mine_first ? theirs : mine));
}

Status MismatchedCallDigest(int rank, const CallStamp& mine, int peer, const std::string& how) {
  return InvalidUsage("mismatched calls: " + RankCalled(rank, mine) + " but rank " + std::to_string(peer) +
                      " sent a message of another call (" + how + ")");
}

}  // namespace tessera
