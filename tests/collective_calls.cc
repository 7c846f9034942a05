// collective_calls: buffers, issue and checks of one collective call. See
// collective_calls.h.
#include "tests/collective_calls.h"

#include <cmath>
#include <cstring>

namespace tessera_test {

std::vector<Collective> AllCollectives() {
  return {Collective::kAllReduce, Collective::kReduce,    Collective::kReduceScatter,
          Collective::kBroadcast, Collective::kBcast,     Collective::kAllGather,
          Collective::kAlltoAll,  Collective::kGather,    Collective::kScatter,
          Collective::kSendRecv};
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduce: return "reduce";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kBcast: return "bcast";
    case Collective::kAllGather: return "allgather";
    case Collective::kAlltoAll: return "alltoall";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "?";
}

bool Reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

bool Rooted(Collective c) {
  return c == Collective::kReduce || c == Collective::kBroadcast || c == Collective::kBcast ||
         c == Collective::kGather || c == Collective::kScatter;
}

std::vector<bool> Placements(Collective c) {
  if (c == Collective::kBcast) return {true};
  return {false, true};
}

std::vector<OpKind> OpsOf(Collective c) {
  if (Reduces(c)) return AllReductionKinds();
  return {OpKind::kCopy};
}

std::string Describe(const CallSpec& s, int rank, int nranks) {
  std::string d = std::string(CollectiveName(s.kind)) + " " + TypeName(s.type);
  if (Reduces(s.kind)) d += " " + OpKindName(s.op);
  if (s.kind == Collective::kSendRecv) {
    d += s.in_place ? " ungrouped" : " grouped";
  } else {
    d += s.in_place ? " in-place" : " out-of-place";
  }
  d += " count " + std::to_string(s.count);
  if (Rooted(s.kind)) d += " root " + std::to_string(s.root);
  return d + " on rank " + std::to_string(rank) + " of " + std::to_string(nranks);
}

bool IsFatal(tesseraResult_t r) {
  return r != tesseraSuccess && r != tesseraInvalidArgument && r != tesseraInvalidUsage;
}

double AverageTolerance(tesseraDataType_t type, double want, double largest_input, int nranks) {
  tesseraDataType_t acc = type == tesseraFloat64 ? tesseraFloat64 : tesseraFloat32;
  return UlpOf(type, want) + 2.0 * nranks * UlpOf(acc, largest_input);
}

PreparedCall::PreparedCall(const CallSpec& spec, int rank, int nranks)
    : spec_(spec), rank_(rank), nranks_(nranks), what_(Describe(spec, rank, nranks)),
      op_(BuiltinOp(spec.op)) {
  const CallSpec& s = spec_;
  const OpKind value_kind = Reduces(s.kind) ? s.op : OpKind::kCopy;
  input_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    for (int j = 0; j < kPeriod; ++j) input_[r].push_back(InputValue(value_kind, s.type, j, r));
  }
  if (Reduces(s.kind)) {
    scalar_ = PreMulScalar(s.type);
    const bool inexact = s.op == OpKind::kAvg && IsFloatType(s.type);
    for (int j = 0; j < kPeriod; ++j) {
      std::vector<double> column;
      double largest = 0;
      for (int r = 0; r < nranks; ++r) {
        column.push_back(input_[r][j]);
        largest = std::fmax(largest, std::fabs(input_[r][j]));
      }
      want_.push_back(ReduceReference(s.op, s.type, column, scalar_));
      if (inexact) tolerance_.push_back(AverageTolerance(s.type, want_.back(), largest, nranks));
    }
  }

  const size_t n = static_cast<size_t>(nranks);
  const size_t count = s.count;
  const size_t elem = TypeSize(s.type);
  const bool root = rank == s.root;
  const std::vector<double>& mine = input_[rank];
  switch (s.kind) {
    case Collective::kAllReduce:
    case Collective::kReduce:
    case Collective::kSendRecv:
      a_ = TileRow(s.type, mine, count);
      b_ = Sentinel(s.type, count);
      break;
    case Collective::kReduceScatter:
      a_ = TileRow(s.type, mine, n * count);
      b_ = Sentinel(s.type, count);
      break;
    case Collective::kBroadcast:
    case Collective::kBcast:
      // Only the root's data is read: the others' send side holds a sentinel.
      a_ = root ? TileRow(s.type, mine, count) : Sentinel(s.type, count);
      b_ = Sentinel(s.type, count);
      break;
    case Collective::kAllGather:
      a_ = TileRow(s.type, mine, count);
      b_ = Sentinel(s.type, n * count);
      if (s.in_place) memcpy(b_.data() + rank * count * elem, a_.data(), count * elem);
      break;
    case Collective::kAlltoAll:
      a_ = TileRow(s.type, mine, n * count);
      b_ = Sentinel(s.type, n * count);
      break;
    case Collective::kGather:
      a_ = TileRow(s.type, mine, count);
      b_ = Sentinel(s.type, n * count);
      if (s.in_place && root) memcpy(b_.data() + rank * count * elem, a_.data(), count * elem);
      break;
    case Collective::kScatter:
      a_ = root ? TileRow(s.type, mine, n * count) : Sentinel(s.type, n * count);
      b_ = Sentinel(s.type, count);
      break;
  }
  a_before_ = a_;
  b_before_ = b_;
}

const void* PreparedCall::SendPointer() const {
  const size_t block = spec_.count * TypeSize(spec_.type) * static_cast<size_t>(rank_);
  switch (spec_.kind) {
    case Collective::kAllGather:
      return spec_.in_place ? b_.data() + block : a_.data();
    case Collective::kGather:
      return spec_.in_place && rank_ == spec_.root ? b_.data() + block : a_.data();
    default:
      return a_.data();
  }
}

void* PreparedCall::RecvPointer() const {
  const size_t block = spec_.count * TypeSize(spec_.type) * static_cast<size_t>(rank_);
  switch (spec_.kind) {
    case Collective::kAllReduce:
    case Collective::kReduce:
    case Collective::kBroadcast:
    case Collective::kBcast:
      return spec_.in_place ? a_.data() : b_.data();
    case Collective::kReduceScatter:
      return spec_.in_place ? a_.data() + block : b_.data();
    case Collective::kScatter:
      return spec_.in_place && rank_ == spec_.root ? a_.data() + block : b_.data();
    case Collective::kAlltoAll:
      return spec_.in_place ? a_.data() : b_.data();
    default:
      return b_.data();
  }
}

tesseraResult_t PreparedCall::CreateOp(tesseraComm_t comm) {
  if (!Reduces(spec_.kind) || spec_.op != OpKind::kPreMulSum) return tesseraSuccess;
  // A Device scalar is read when each collective starts: it lives in the call.
  EncodeValue(spec_.type, scalar_, scalar_bytes_);
  const tesseraScalarResidence_t residence =
      spec_.call_index % 2 ? tesseraScalarDevice : tesseraScalarHostImmediate;
  tesseraResult_t r = tesseraRedOpCreatePreMulSum(&op_, scalar_bytes_, spec_.type, residence, comm);
  created_op_ = r == tesseraSuccess;
  return r;
}

tesseraResult_t PreparedCall::DestroyOp(tesseraComm_t comm) {
  if (!created_op_) return tesseraSuccess;
  created_op_ = false;
  return tesseraRedOpDestroy(op_, comm);
}

tesseraResult_t PreparedCall::Issue(tesseraComm_t comm, std::string* step) {
  const CallSpec& s = spec_;
  const void* send = SendPointer();
  void* recv = RecvPointer();
  *step = CollectiveName(s.kind);
  switch (s.kind) {
    case Collective::kAllReduce:
      return tesseraAllReduce(send, recv, s.count, s.type, op_, comm, nullptr);
    case Collective::kReduce:
      return tesseraReduce(send, recv, s.count, s.type, op_, s.root, comm, nullptr);
    case Collective::kReduceScatter:
      return tesseraReduceScatter(send, recv, s.count, s.type, op_, comm, nullptr);
    case Collective::kBroadcast:
      return tesseraBroadcast(send, recv, s.count, s.type, s.root, comm, nullptr);
    case Collective::kBcast:
      return tesseraBcast(recv, s.count, s.type, s.root, comm, nullptr);
    case Collective::kAllGather:
      return tesseraAllGather(send, recv, s.count, s.type, comm, nullptr);
    case Collective::kAlltoAll:
      return tesseraAlltoAll(send, recv, s.count, s.type, comm, nullptr);
    case Collective::kGather:
      return tesseraGather(send, recv, s.count, s.type, s.root, comm, nullptr);
    case Collective::kScatter:
      return tesseraScatter(send, recv, s.count, s.type, s.root, comm, nullptr);
    case Collective::kSendRecv:
      break;
  }
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  auto one = [&](bool sending) {
    *step = sending ? "tesseraSend to rank " + std::to_string(next)
                    : "tesseraRecv from rank " + std::to_string(prev);
    return sending ? tesseraSend(send, s.count, s.type, next, comm, nullptr)
                   : tesseraRecv(recv, s.count, s.type, prev, comm, nullptr);
  };
  if (!s.in_place) {
    const bool send_first = (s.call_index + rank_) % 2 == 0;
    *step = "tesseraGroupStart";
    tesseraResult_t r = tesseraGroupStart();
    if (r != tesseraSuccess) return r;
    for (int k = 0; k < 2 && r == tesseraSuccess; ++k) r = one((k == 0) == send_first);
    if (r != tesseraSuccess) {
      tesseraGroupEnd();
      return r;
    }
    *step = "tesseraGroupEnd";
    return tesseraGroupEnd();
  }
  // Blocking: even ranks send first, odd ranks receive first; the last rank of an odd
  // ring receives first too, so that the ring has a rank that receives before sending
  // on each side of every even sender.
  const bool last_of_odd_ring = rank_ == nranks_ - 1 && nranks_ % 2 == 1;
  const bool send_first = rank_ % 2 == 0 && !last_of_odd_ring;
  tesseraResult_t r = one(send_first);
  if (r == tesseraSuccess) r = one(!send_first);
  return r;
}

std::string PreparedCall::CheckReduced(const void* got, size_t count, size_t first) const {
  if (!tolerance_.empty()) {
    return CompareWithinTolerance(spec_.type, got, count, first, want_, tolerance_, what_);
  }
  std::vector<unsigned char> want = TileRow(spec_.type, want_, count, first);
  return CompareElements(spec_.type, got, want.data(), count, what_);
}

std::string PreparedCall::CheckUnchanged(const std::vector<unsigned char>& got,
                                         const std::vector<unsigned char>& before,
                                         const std::string& what) const {
  return CompareElements(spec_.type, got.data(), before.data(), got.size() / TypeSize(spec_.type),
                         what_ + ": " + what);
}

std::string PreparedCall::Check() const {
  const CallSpec& s = spec_;
  const size_t count = s.count;
  const size_t elem = TypeSize(s.type);
  const bool root = rank_ == s.root;
  const void* recv = RecvPointer();
  std::string f;
  auto add = [&f](const std::string& line) {
    if (!line.empty()) f += (f.empty() ? "" : "; ") + line;
  };
  // Block q of the receive buffer must hold rank q's values from position `first`.
  auto check_blocks = [&](size_t first, const char* label) {
    const unsigned char* blocks = static_cast<const unsigned char*>(recv);
    for (int q = 0; q < nranks_; ++q) {
      std::vector<unsigned char> want = TileRow(s.type, input_[q], count, first);
      add(CompareElements(s.type, blocks + q * count * elem, want.data(), count,
                          what_ + ": " + label + std::to_string(q)));
    }
  };
  switch (s.kind) {
    case Collective::kAllReduce:
      add(CheckReduced(recv, count, 0));
      if (!s.in_place) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kReduce:
      if (root) {
        add(CheckReduced(recv, count, 0));
      } else {
        add(CheckUnchanged(b_, b_before_, "recvbuff of a non-root rank"));
      }
      if (!s.in_place || !root) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kReduceScatter:
      add(CheckReduced(recv, count, static_cast<size_t>(rank_) * count));
      if (!s.in_place) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kBroadcast:
    case Collective::kBcast: {
      std::vector<unsigned char> want = TileRow(s.type, input_[s.root], count);
      add(CompareElements(s.type, recv, want.data(), count, what_));
      if (!s.in_place) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    }
    case Collective::kAllGather:
      check_blocks(0, "block of rank ");
      if (!s.in_place) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kAlltoAll:
      check_blocks(static_cast<size_t>(rank_) * count, "block from rank ");
      if (!s.in_place) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kGather:
      if (root) {
        check_blocks(0, "block of rank ");
      } else {
        add(CheckUnchanged(b_, b_before_, "recvbuff of a non-root rank"));
      }
      if (!(s.in_place && root)) add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    case Collective::kScatter: {
      std::vector<unsigned char> want =
          TileRow(s.type, input_[s.root], count, static_cast<size_t>(rank_) * count);
      add(CompareElements(s.type, recv, want.data(), count, what_));
      // In place, the root's block is already where it belongs: all of sendbuff is
      // only read.
      add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    }
    case Collective::kSendRecv: {
      const int prev = (rank_ + nranks_ - 1) % nranks_;
      std::vector<unsigned char> want = TileRow(s.type, input_[prev], count);
      add(CompareElements(s.type, recv, want.data(), count,
                          what_ + ": received from rank " + std::to_string(prev)));
      add(CheckUnchanged(a_, a_before_, "sendbuff"));
      break;
    }
  }
  return f;
}

}  // namespace tessera_test
