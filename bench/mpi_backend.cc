// Open MPI behind the benchmark's CollectiveBackend (see mpi_backend.h).
#include "bench/mpi_backend.h"

#include <climits>
#include <cstdint>
#include <cstring>

#include "elementwise/elementwise.h"

namespace tessera_bench {

// The float16/bfloat16 conversions are the library's (elementwise/elementwise.h).
using tessera::Bfloat16ToFloat;
using tessera::FloatToBfloat16;
using tessera::FloatToHalf;
using tessera::HalfToFloat;

namespace {

std::string MpiError(const std::string& call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return call + ": MPI error " + std::to_string(code);
  }
  return call + ": " + std::string(text, static_cast<size_t>(length));
}

// The combining step of each op on floats widened from 16 bits.
struct SumOf {
  static float Apply(float a, float b) { return a + b; }
};
struct ProdOf {
  static float Apply(float a, float b) { return a * b; }
};
struct MaxOf {
  static float Apply(float a, float b) { return a > b ? a : b; }
};
struct MinOf {
  static float Apply(float a, float b) { return a < b ? a : b; }
};

// An MPI_User_function: inout[i] = Combine(in[i], inout[i]) over 16-bit floats.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), typename Combine>
void ReduceFloat16(void* in, void* inout, int* length, MPI_Datatype* /*datatype*/) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = FromFloat(Combine::Apply(ToFloat(a[i]), ToFloat(b[i])));
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Float16Functions {
  static constexpr MPI_User_function* kByOp[4] = {
      &ReduceFloat16<ToFloat, FromFloat, SumOf>, &ReduceFloat16<ToFloat, FromFloat, ProdOf>,
      &ReduceFloat16<ToFloat, FromFloat, MaxOf>, &ReduceFloat16<ToFloat, FromFloat, MinOf>};
};
using HalfFunctions = Float16Functions<HalfToFloat, FloatToHalf>;
using Bfloat16Functions = Float16Functions<Bfloat16ToFloat, FloatToBfloat16>;

template <typename T>
void DivideEach(void* buffer, size_t count, int divisor) {
  T* values = static_cast<T*>(buffer);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / divisor);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void DivideEach16(void* buffer, size_t count, int divisor) {
  uint16_t* values = static_cast<uint16_t*>(buffer);
  for (size_t i = 0; i < count; ++i) values[i] = FromFloat(ToFloat(values[i]) / divisor);
}

// Completes avg after MPI_SUM: each element divided by the number of ranks.
void DivideByRanks(void* buffer, size_t count, DataType type, int nranks) {
  switch (type) {
    case DataType::kInt8: return DivideEach<int8_t>(buffer, count, nranks);
    case DataType::kUint8: return DivideEach<uint8_t>(buffer, count, nranks);
    case DataType::kInt32: return DivideEach<int32_t>(buffer, count, nranks);
    case DataType::kUint32: return DivideEach<uint32_t>(buffer, count, nranks);
    case DataType::kInt64: return DivideEach<int64_t>(buffer, count, nranks);
    case DataType::kUint64: return DivideEach<uint64_t>(buffer, count, nranks);
    case DataType::kFloat32: return DivideEach<float>(buffer, count, nranks);
    case DataType::kFloat64: return DivideEach<double>(buffer, count, nranks);
    case DataType::kFloat16: return DivideEach16<HalfToFloat, FloatToHalf>(buffer, count, nranks);
    case DataType::kBfloat16:
      return DivideEach16<Bfloat16ToFloat, FloatToBfloat16>(buffer, count, nranks);
  }
}

}  // namespace

std::unique_ptr<MpiBackend> MpiBackend::Create(std::string* error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int rc = MPI_Init(nullptr, nullptr);
    if (rc != MPI_SUCCESS) {
      *error = MpiError("MPI_Init", rc);
      return nullptr;
    }
  }
  std::unique_ptr<MpiBackend> backend(new MpiBackend());
  // Errors come back as return codes instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &backend->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &backend->size_);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string full(version, static_cast<size_t>(length));
  backend->description_ = full.substr(0, full.find(','));  // "Open MPI v4.1.4"
  Outcome outcome = backend->CreateFloat16Ops();
  if (!outcome.ok()) {
    *error = outcome.message();
    return nullptr;
  }
  return backend;
}

MpiBackend::MpiBackend() {
  for (auto& ops : float16_ops_) {
    for (MPI_Op& op : ops) op = MPI_OP_NULL;
  }
}

MpiBackend::~MpiBackend() {
  for (auto& ops : float16_ops_) {
    for (MPI_Op& op : ops) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Outcome MpiBackend::CreateFloat16Ops() {
  for (int i = 0; i < 4; ++i) {
    int rc = MPI_Op_create(HalfFunctions::kByOp[i], /*commute=*/1, &float16_ops_[0][i]);
    if (rc == MPI_SUCCESS) {
      rc = MPI_Op_create(Bfloat16Functions::kByOp[i], /*commute=*/1, &float16_ops_[1][i]);
    }
    if (rc != MPI_SUCCESS) return Outcome::Failed(MpiError("MPI_Op_create", rc));
  }
  return Outcome::Ok();
}

Outcome MpiBackend::Translate(DataType type, ReduceOp op, MPI_Datatype* mpi_type,
                              MPI_Op* mpi_op) const {
  // avg is MPI_SUM here; AllReduce divides afterwards.
  int op_index = op == ReduceOp::kAvg ? 0 : static_cast<int>(op);
  static const MPI_Op kBuiltinOps[4] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  *mpi_op = kBuiltinOps[op_index];
  switch (type) {
    case DataType::kInt8: *mpi_type = MPI_INT8_T; return Outcome::Ok();
    case DataType::kUint8: *mpi_type = MPI_UINT8_T; return Outcome::Ok();
    case DataType::kInt32: *mpi_type = MPI_INT32_T; return Outcome::Ok();
    case DataType::kUint32: *mpi_type = MPI_UINT32_T; return Outcome::Ok();
    case DataType::kInt64: *mpi_type = MPI_INT64_T; return Outcome::Ok();
    case DataType::kUint64: *mpi_type = MPI_UINT64_T; return Outcome::Ok();
    case DataType::kFloat32: *mpi_type = MPI_FLOAT; return Outcome::Ok();
    case DataType::kFloat64: *mpi_type = MPI_DOUBLE; return Outcome::Ok();
    case DataType::kFloat16:
    case DataType::kBfloat16:
      *mpi_type = MPI_UINT16_T;
      *mpi_op = float16_ops_[type == DataType::kFloat16 ? 0 : 1][op_index];
      return Outcome::Ok();
  }
  return Outcome::Rejected("MPI backend: unknown data type " +
                           std::to_string(static_cast<int>(type)));
}

Outcome MpiBackend::AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                              ReduceOp op) {
  if (count > static_cast<size_t>(INT_MAX)) {
    return Outcome::Rejected("MPI_Allreduce: count " + std::to_string(count) +
                             " exceeds INT_MAX (MPI counts are int)");
  }
  MPI_Datatype mpi_type;
  MPI_Op mpi_op;
  Outcome outcome = Translate(type, op, &mpi_type, &mpi_op);
  if (!outcome.ok()) return outcome;
  // MPI forbids aliased buffers: in place is spelled MPI_IN_PLACE.
  const void* send = sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff;
  int rc = MPI_Allreduce(send, recvbuff, static_cast<int>(count), mpi_type, mpi_op, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Outcome::Failed(MpiError("MPI_Allreduce", rc));
  if (op == ReduceOp::kAvg) DivideByRanks(recvbuff, count, type, size_);
  return Outcome::Ok();
}

Outcome MpiBackend::Barrier() {
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? Outcome::Ok() : Outcome::Failed(MpiError("MPI_Barrier", rc));
}

Outcome MpiBackend::MaxAcrossRanks(double* values, size_t count) {
  int rc = MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_DOUBLE, MPI_MAX,
                         MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? Outcome::Ok()
                           : Outcome::Failed(MpiError("MPI_Allreduce (max of doubles)", rc));
}

Outcome MpiBackend::SumAcrossRanks(int64_t* values, size_t count) {
  int rc = MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_INT64_T, MPI_SUM,
                         MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? Outcome::Ok()
                           : Outcome::Failed(MpiError("MPI_Allreduce (sum of int64)", rc));
}

void MpiBackend::AbortJob() { MPI_Abort(MPI_COMM_WORLD, 1); }

}  // namespace tessera_bench

// --- The other collectives, with nccl.h's buffer conventions ---------------------------
// Where MPI's in-place convention differs from nccl.h's, the difference is bridged the
// way a user porting NCCL code would, inside the timed call: reduce-scatter's in-place
// result lands at the start of the buffer and is moved to this rank's block; a root's
// out-of-place broadcast first copies sendbuff to recvbuff.

namespace tessera_bench {
namespace {

Outcome CheckCount(size_t count, const char* call) {
  if (count <= static_cast<size_t>(INT_MAX)) return Outcome::Ok();
  return Outcome::Rejected(std::string(call) + ": count " + std::to_string(count) +
                           " exceeds INT_MAX (MPI counts are int)");
}

Outcome Done(int rc, const char* call) {
  return rc == MPI_SUCCESS ? Outcome::Ok() : Outcome::Failed(MpiError(call, rc));
}

}  // namespace

Outcome MpiBackend::AllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                              DataType type) {
  Outcome outcome = CheckCount(sendcount * static_cast<size_t>(size_), "MPI_Allgather");
  MPI_Datatype mpi_type;
  MPI_Op unused;
  if (outcome.ok()) outcome = Translate(type, ReduceOp::kSum, &mpi_type, &unused);
  if (!outcome.ok()) return outcome;
  const size_t offset = static_cast<size_t>(rank_) * sendcount * ElementSize(type);
  const void* send =
      sendbuff == static_cast<unsigned char*>(recvbuff) + offset ? MPI_IN_PLACE : sendbuff;
  const int n = static_cast<int>(sendcount);
  return Done(MPI_Allgather(send, n, mpi_type, recvbuff, n, mpi_type, MPI_COMM_WORLD),
              "MPI_Allgather");
}

Outcome MpiBackend::ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  DataType type, ReduceOp op) {
  Outcome outcome = CheckCount(recvcount * static_cast<size_t>(size_), "MPI_Reduce_scatter_block");
  MPI_Datatype mpi_type;
  MPI_Op mpi_op;
  if (outcome.ok()) outcome = Translate(type, op, &mpi_type, &mpi_op);
  if (!outcome.ok()) return outcome;
  const size_t block_bytes = recvcount * ElementSize(type);
  unsigned char* base = static_cast<unsigned char*>(const_cast<void*>(sendbuff));
  const bool in_place = recvbuff == base + static_cast<size_t>(rank_) * block_bytes;
  int rc = in_place ? MPI_Reduce_scatter_block(MPI_IN_PLACE, base, static_cast<int>(recvcount),
                                               mpi_type, mpi_op, MPI_COMM_WORLD)
                    : MPI_Reduce_scatter_block(sendbuff, recvbuff, static_cast<int>(recvcount),
                                               mpi_type, mpi_op, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Outcome::Failed(MpiError("MPI_Reduce_scatter_block", rc));
  if (in_place && recvbuff != base) std::memmove(recvbuff, base, block_bytes);
  if (op == ReduceOp::kAvg) DivideByRanks(recvbuff, recvcount, type, size_);
  return Outcome::Ok();
}

Outcome MpiBackend::Broadcast(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                              int root) {
  Outcome outcome = CheckCount(count, "MPI_Bcast");
  MPI_Datatype mpi_type;
  MPI_Op unused;
  if (outcome.ok()) outcome = Translate(type, ReduceOp::kSum, &mpi_type, &unused);
  if (!outcome.ok()) return outcome;
  if (root < 0 || root >= size_) {
    return Outcome::Rejected("MPI_Bcast: root " + std::to_string(root) + " out of range");
  }
  if (rank_ == root && sendbuff != recvbuff) {
    std::memcpy(recvbuff, sendbuff, count * ElementSize(type));
  }
  return Done(MPI_Bcast(recvbuff, static_cast<int>(count), mpi_type, root, MPI_COMM_WORLD),
              "MPI_Bcast");
}

Outcome MpiBackend::Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                           ReduceOp op, int root) {
  Outcome outcome = CheckCount(count, "MPI_Reduce");
  MPI_Datatype mpi_type;
  MPI_Op mpi_op;
  if (outcome.ok()) outcome = Translate(type, op, &mpi_type, &mpi_op);
  if (!outcome.ok()) return outcome;
  if (root < 0 || root >= size_) {
    return Outcome::Rejected("MPI_Reduce: root " + std::to_string(root) + " out of range");
  }
  const void* send = (rank_ == root && sendbuff == recvbuff) ? MPI_IN_PLACE : sendbuff;
  int rc = MPI_Reduce(send, recvbuff, static_cast<int>(count), mpi_type, mpi_op, root,
                      MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Outcome::Failed(MpiError("MPI_Reduce", rc));
  if (op == ReduceOp::kAvg && rank_ == root) DivideByRanks(recvbuff, count, type, size_);
  return Outcome::Ok();
}

Outcome MpiBackend::AlltoAll(const void* sendbuff, void* recvbuff, size_t count, DataType type) {
  Outcome outcome = CheckCount(count * static_cast<size_t>(size_), "MPI_Alltoall");
  MPI_Datatype mpi_type;
  MPI_Op unused;
  if (outcome.ok()) outcome = Translate(type, ReduceOp::kSum, &mpi_type, &unused);
  if (!outcome.ok()) return outcome;
  const void* send = sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff;
  const int n = static_cast<int>(count);
  return Done(MPI_Alltoall(send, n, mpi_type, recvbuff, n, mpi_type, MPI_COMM_WORLD),
              "MPI_Alltoall");
}

Outcome MpiBackend::SendRecv(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                             int send_peer, int recv_peer) {
  Outcome outcome = CheckCount(count, "MPI_Sendrecv");
  MPI_Datatype mpi_type;
  MPI_Op unused;
  if (outcome.ok()) outcome = Translate(type, ReduceOp::kSum, &mpi_type, &unused);
  if (!outcome.ok()) return outcome;
  const int n = static_cast<int>(count);
  if (sendbuff == recvbuff) {
    return Done(MPI_Sendrecv_replace(recvbuff, n, mpi_type, send_peer, 0, recv_peer, 0,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
  }
  return Done(MPI_Sendrecv(sendbuff, n, mpi_type, send_peer, 0, recvbuff, n, mpi_type, recv_peer,
                           0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
}

}  // namespace tessera_bench
