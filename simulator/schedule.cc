#include "simulator/schedule.h"

#include <algorithm>
#include <unordered_map>

#include "base/hash.h"

namespace tessera {
namespace {

// The messages of one direction of one pair, folded as they come: how many, and a hash
// of their sizes in order. Equal on both sides when the sequences are equal (with
// overwhelming likelihood); a difference is then located by FirstDifference.
struct PairSequence {
  uint64_t count = 0;
  uint64_t hash = kFnv1aBasis;
  void Add(uint32_t bytes) {
    ++count;
    hash = Fnv1a(&bytes, sizeof(bytes), hash);
  }
};

uint64_t PairKey(int from, int to) { return (static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to); }

// The sizes `rank` sends to (or receives from) `peer`, in order.
std::vector<uint32_t> Sizes(const RankSchedule& s, int peer, bool sends) {
  std::vector<uint32_t> out;
  for (const Message& m : s.messages) {
    if (m.peer == peer && (m.is_send != 0) == sends) out.push_back(m.bytes);
  }
  return out;
}

Status FirstDifference(const std::vector<RankSchedule>& ranks, int from, int to) {
  const std::vector<uint32_t> sent = Sizes(ranks[from], to, true);
  const std::vector<uint32_t> received = Sizes(ranks[to], from, false);
  size_t i = 0;
  while (i < sent.size() && i < received.size() && sent[i] == received[i]) ++i;
  const std::string what = "rank " + std::to_string(from) + " -> rank " + std::to_string(to) + ", message " +
                           std::to_string(i) + ": ";
  if (i == sent.size()) return InvalidArgument(what + "received (" + std::to_string(received[i]) + " B) but never sent");
  if (i == received.size()) return InvalidArgument(what + "sent (" + std::to_string(sent[i]) + " B) but never received");
  return InvalidArgument(what + "sent " + std::to_string(sent[i]) + " B, received " + std::to_string(received[i]) + " B");
}

Status CheckGates(const RankSchedule& s, int rank) {
  for (size_t k = 0; k < s.gate_offsets.size(); ++k) {
    const GateOffset& g = s.gate_offsets[k];
    const bool ordered = k == 0 || s.gate_offsets[k - 1].message < g.message;
    if (!ordered || g.message >= s.messages.size() || s.messages[g.message].gate < 0) {
      return InvalidArgument("rank " + std::to_string(rank) + ": a gate offset for message " +
                             std::to_string(g.message) + ", which is not a gated send (or out of order)");
    }
  }
  for (const Step& step : s.steps) {
    for (uint32_t i = 0; i < step.count; ++i) {
      const Message& m = s.messages[step.first + i];
      if (m.gate < 0) continue;
      const bool inside = static_cast<uint32_t>(m.gate) < step.count;
      if (!m.is_send || !inside || s.messages[step.first + m.gate].is_send) {
        return InvalidArgument("rank " + std::to_string(rank) + ": message " + std::to_string(step.first + i) +
                               " is gated on " + std::to_string(m.gate) + ", not a receive of its exchange");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

uint64_t RankSchedule::BytesSent() const {
  uint64_t total = 0;
  for (const Message& m : messages) total += m.is_send ? m.bytes : 0;
  return total;
}

uint32_t RankSchedule::GateOffsetOf(uint32_t index) const {
  const auto it = std::lower_bound(gate_offsets.begin(), gate_offsets.end(), index,
                                   [](const GateOffset& g, uint32_t i) { return g.message < i; });
  return it != gate_offsets.end() && it->message == index ? it->offset : 0;
}

size_t RankSchedule::MemoryBytes() const {
  return steps.capacity() * sizeof(Step) + messages.capacity() * sizeof(Message) +
         gate_offsets.capacity() * sizeof(GateOffset) + addresses.capacity() * sizeof(uintptr_t);
}

Status CheckSchedulesMatch(const std::vector<RankSchedule>& ranks) {
  const int p = static_cast<int>(ranks.size());
  std::unordered_map<uint64_t, PairSequence> sent, received;
  for (int r = 0; r < p; ++r) {
    TESSERA_RETURN_IF_ERROR(CheckGates(ranks[r], r));
    for (const Message& m : ranks[r].messages) {
      if (m.peer < 0 || m.peer >= p || m.peer == r) {
        return InvalidArgument("rank " + std::to_string(r) + " has a message with rank " + std::to_string(m.peer));
      }
      if (m.is_send) {
        sent[PairKey(r, m.peer)].Add(m.bytes);
      } else {
        received[PairKey(m.peer, r)].Add(m.bytes);
      }
    }
  }
  for (const auto& [key, seq] : sent) {
    auto it = received.find(key);
    if (it == received.end() || it->second.count != seq.count || it->second.hash != seq.hash) {
      return FirstDifference(ranks, static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu));
    }
  }
  for (const auto& [key, seq] : received) {
    if (sent.count(key) == 0) return FirstDifference(ranks, static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu));
  }
  return Status::Ok();
}

std::string DescribeSchedule(const RankSchedule& s) {
  std::string out;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    const Step& step = s.steps[k];
    out += "step " + std::to_string(k) + ": ";
    if (step.kind == Step::kCopy) {
      out += "copy " + std::to_string(step.copy_bytes) + " B\n";
      continue;
    }
    out += "exchange of " + std::to_string(step.count) + "\n";
    for (uint32_t i = 0; i < step.count; ++i) {
      const Message& m = s.messages[step.first + i];
      out += "  " + std::to_string(i) + (m.is_send ? ": send " : (m.reduces ? ": recv-reduce " : ": recv ")) +
             std::to_string(m.bytes) + " B " + (m.is_send ? "to " : "from ") + std::to_string(m.peer) +
             (m.gate >= 0 ? " after " + std::to_string(m.gate) : "") +
             (s.GateOffsetOf(step.first + i) > 0 ? " from byte " + std::to_string(s.GateOffsetOf(step.first + i)) : "") +
             "\n";
    }
  }
  return out;
}

}  // namespace tessera
