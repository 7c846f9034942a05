#include "comm/call_validation.h"

#include <cstdint>

#include "comm/communicator.h"

namespace tessera {
namespace {

// `bytes` of elements of `elem_size` at `buf`. Inlined: called on every call, and its
// check is a compare.
[[gnu::always_inline]] inline Status CheckBuffer(const void* buf, size_t bytes, size_t elem_size, const char* name) {
  if (bytes > 0 && buf == nullptr) {
    return InvalidArgument(std::string(name) + " is NULL with count " + std::to_string(bytes / elem_size));
  }
  return Status::Ok();
}

bool Overlap(uintptr_t a, size_t a_bytes, uintptr_t b, size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

// tesseraAllReduceParts' parts after the first (which ValidateOperation checks as the
// sendbuff): non-null, and apart from recvbuff (`recv_bytes` of it).
Status ValidateParts(const Operation& op, size_t recv_bytes) {
  const uintptr_t r = reinterpret_cast<uintptr_t>(op.recv);
  for (size_t j = 1; j < op.parts.size(); ++j) {
    const std::string name = "sendbuffs[" + std::to_string(j) + "]";
    TESSERA_RETURN_IF_ERROR(CheckBuffer(op.parts[j], op.count * SizeOf(op.type), SizeOf(op.type), name.c_str()));
    if (Overlap(reinterpret_cast<uintptr_t>(op.parts[j]), recv_bytes, r, recv_bytes)) {
      return InvalidArgument(name + " overlaps recvbuff (only sendbuffs[0] may be recvbuff)");
    }
  }
  return Status::Ok();
}

[[gnu::cold, gnu::noinline]] Status UnsupportedReductionType(DataType type) {
  return InvalidArgument(std::string("datatype ") + DataTypeName(type) + " is not supported by reductions");
}

// Reductions take every type but fp8. Inlined: its check is a compare.
[[gnu::always_inline]] inline Status CheckReductionType(DataType type) {
  if (type == DataType::kFloat8e4m3 || type == DataType::kFloat8e5m2) return UnsupportedReductionType(type);
  return Status::Ok();
}

// A reduction's operator is built in, or one created on the communicator (which a
// non-blocking communicator still being created cannot have yet).
Status CheckOperatorRange(const tesseraComm* comm, const Operation& op) {
  if (op.op < 0 || (op.op >= tesseraNumOps && comm->impl() == nullptr)) {
    return InvalidArgument("op " + std::to_string(op.op) + " is not a tesseraRedOp_t");
  }
  return Status::Ok();
}

// Once the communicator exists: a reduction's type is not fp8, and its operator is
// built in or a live PreMulSum operator created for that type.
Status CheckReduction(const tesseraComm* comm, const Operation& op) {
  const Communicator* impl = comm->impl();
  if (impl == nullptr) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(CheckReductionType(op.type));
  return impl->premulsum().Validate(op.op, op.type);
}

// root and peer are ranks of the communicator.
Status CheckRanks(const tesseraComm* comm, const Operation& op) {
  if (IsRooted(op.kind) && (op.root < 0 || op.root >= comm->nranks)) {
    return InvalidArgument("root " + std::to_string(op.root) + " is not in [0, " + std::to_string(comm->nranks) + ")");
  }
  if (IsPointToPoint(op.kind) && (op.peer < 0 || op.peer >= comm->nranks)) {
    return InvalidArgument("peer " + std::to_string(op.peer) + " is not in [0, " + std::to_string(comm->nranks) + ")");
  }
  return Status::Ok();
}

// The buffers: no size overflows, none is NULL where bytes are read or written, and
// sendbuff and recvbuff are equal or apart where an overlap would corrupt the result.
Status CheckBuffers(const tesseraComm* comm, const Operation& op) {
  const size_t es = SizeOf(op.type);
  size_t all_ranks_bytes = 0;  // multiplied, not divided: a division costs what a small call's check does
  if (__builtin_mul_overflow(op.count, es, &all_ranks_bytes) ||
      __builtin_mul_overflow(all_ranks_bytes, static_cast<size_t>(comm->nranks), &all_ranks_bytes) ||
      all_ranks_bytes > static_cast<size_t>(PTRDIFF_MAX)) {
    return InvalidArgument("count " + std::to_string(op.count) + " times the datatype size overflows");
  }
  const OperationBytes bytes = BytesOf(op, comm->rank, comm->nranks);
  TESSERA_RETURN_IF_ERROR(CheckBuffer(op.send, bytes.send, es, "sendbuff"));
  TESSERA_RETURN_IF_ERROR(CheckBuffer(op.recv, bytes.recv, es, "recvbuff"));
  if ((op.kind == OpKind::kAllReduce || op.kind == OpKind::kAlltoAll) && op.send != op.recv &&
      Overlap(reinterpret_cast<uintptr_t>(op.send), bytes.send, reinterpret_cast<uintptr_t>(op.recv), bytes.recv)) {
    return InvalidArgument("sendbuff and recvbuff overlap without being equal (in-place needs sendbuff == recvbuff)");
  }
  return ValidateParts(op, bytes.recv);
}

}  // namespace

Status ValidateOperation(const tesseraComm* comm, const Operation& op, tesseraStream_t stream) {
  TESSERA_RETURN_IF_ERROR(CheckType(static_cast<tesseraDataType_t>(op.type)));
  if (IsReduction(op.kind)) TESSERA_RETURN_IF_ERROR(CheckOperatorRange(comm, op));
  if (stream != nullptr) TESSERA_RETURN_IF_ERROR(DevicePath::CheckStream(stream));
  TESSERA_RETURN_IF_ERROR(CheckRanks(comm, op));
  TESSERA_RETURN_IF_ERROR(CheckBuffers(comm, op));
  return IsReduction(op.kind) ? CheckReduction(comm, op) : Status::Ok();
}

Status ValidatePreMulSum(const tesseraRedOp_t* op, const void* scalar, tesseraDataType_t datatype,
                         tesseraScalarResidence_t residence) {
  if (op == nullptr) return InvalidArgument("op is NULL");
  if (scalar == nullptr) return InvalidArgument("scalar is NULL");
  TESSERA_RETURN_IF_ERROR(CheckType(datatype));
  TESSERA_RETURN_IF_ERROR(CheckReductionType(static_cast<DataType>(datatype)));
  if (residence != tesseraScalarDevice && residence != tesseraScalarHostImmediate) {
    return InvalidArgument("residence " + std::to_string(static_cast<int>(residence)) + " is not a tesseraScalarResidence_t");
  }
  return Status::Ok();
}

Status ValidateRank(int nranks, int rank) {
  if (nranks <= 0) return InvalidArgument("nranks " + std::to_string(nranks) + " must be > 0");
  if (rank < 0 || rank >= nranks) {
    return InvalidArgument("rank " + std::to_string(rank) + " is not in [0, nranks " + std::to_string(nranks) + ")");
  }
  return Status::Ok();
}

Status ValidateShrink(const int* exclude_ranks, int exclude_count, int flags) {
  if (exclude_count < 0 || (exclude_count > 0 && exclude_ranks == nullptr)) {
    return InvalidArgument("excludeRanks is NULL or excludeCount " + std::to_string(exclude_count) + " is negative");
  }
  if ((flags & ~(TESSERA_SHRINK_ABORT | TESSERA_SHRINK_LOST)) != 0) {
    return InvalidArgument("unknown flags " + std::to_string(flags));
  }
  if ((flags & TESSERA_SHRINK_LOST) != 0 && exclude_count > 0) {
    return InvalidArgument("TESSERA_SHRINK_LOST with an exclude list");
  }
  return Status::Ok();
}

}  // namespace tessera
