// tessera behind the benchmark's CollectiveBackend (see tessera_backend.h).
#include "bench/tessera_backend.h"

#include <cstring>

namespace tessera_bench {
namespace {

// The harness's enums share tessera.h's numbering (both are nccl.h's): a cast maps them.
static_assert(static_cast<int>(DataType::kInt8) == tesseraInt8, "numbering");
static_assert(static_cast<int>(DataType::kUint8) == tesseraUint8, "numbering");
static_assert(static_cast<int>(DataType::kInt32) == tesseraInt32, "numbering");
static_assert(static_cast<int>(DataType::kUint32) == tesseraUint32, "numbering");
static_assert(static_cast<int>(DataType::kInt64) == tesseraInt64, "numbering");
static_assert(static_cast<int>(DataType::kUint64) == tesseraUint64, "numbering");
static_assert(static_cast<int>(DataType::kFloat16) == tesseraFloat16, "numbering");
static_assert(static_cast<int>(DataType::kFloat32) == tesseraFloat32, "numbering");
static_assert(static_cast<int>(DataType::kFloat64) == tesseraFloat64, "numbering");
static_assert(static_cast<int>(DataType::kBfloat16) == tesseraBfloat16, "numbering");
static_assert(kNumDataTypes <= tesseraNumTypes, "the benchmark types are a prefix of tessera's (fp8 left out)");
static_assert(static_cast<int>(ReduceOp::kSum) == tesseraSum, "numbering");
static_assert(static_cast<int>(ReduceOp::kProd) == tesseraProd, "numbering");
static_assert(static_cast<int>(ReduceOp::kMax) == tesseraMax, "numbering");
static_assert(static_cast<int>(ReduceOp::kMin) == tesseraMin, "numbering");
static_assert(static_cast<int>(ReduceOp::kAvg) == tesseraAvg, "numbering");
static_assert(kNumReduceOps == tesseraNumOps, "numbering");

std::string ResultMessage(tesseraResult_t result, tesseraComm_t comm) {
  const char* detail = tesseraGetLastError(comm);
  std::string message = tesseraGetErrorString(result);
  if (detail != nullptr && *detail != '\0') message += std::string(": ") + detail;
  return message;
}

}  // namespace

std::unique_ptr<TesseraBackend> TesseraBackend::Create(std::string* error) {
  tesseraComm_t comm = nullptr;
  tesseraResult_t result = tesseraCommInitFromEnv(&comm);
  if (result != tesseraSuccess) {
    *error = "tesseraCommInitFromEnv: " + ResultMessage(result, nullptr);
    return nullptr;
  }
  std::unique_ptr<TesseraBackend> backend(new TesseraBackend(comm));
  int version = 0;
  Outcome outcome =
      backend->Check(tesseraCommUserRank(comm, &backend->rank_), "tesseraCommUserRank");
  if (outcome.ok()) {
    outcome = backend->Check(tesseraCommCount(comm, &backend->size_), "tesseraCommCount");
  }
  if (outcome.ok()) outcome = backend->Check(tesseraGetVersion(&version), "tesseraGetVersion");
  if (!outcome.ok()) {
    *error = outcome.message();
    return nullptr;  // the destructor has released the communicator
  }
  // TESSERA_VERSION_CODE = MAJOR * 10000 + MINOR * 100 + PATCH.
  backend->description_ = "tessera " + std::to_string(version / 10000) + "." +
                          std::to_string(version / 100 % 100) + "." + std::to_string(version % 100);
  return backend;
}

TesseraBackend::~TesseraBackend() { tesseraCommDestroy(comm_); }

Outcome TesseraBackend::Failure(tesseraResult_t result, const std::string& call) const {
  std::string message = call + ": " + ResultMessage(result, comm_);
  return result == tesseraInvalidArgument ? Outcome::Rejected(message) : Outcome::Failed(message);
}

Outcome TesseraBackend::AllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  DataType type, ReduceOp op) {
  tesseraResult_t result =
      tesseraAllReduce(sendbuff, recvbuff, count, static_cast<tesseraDataType_t>(type),
                       static_cast<tesseraRedOp_t>(op), comm_, nullptr);
  return Check(result, [&] {
    return std::string("tesseraAllReduce (") + DataTypeName(type) + ", " + ReduceOpName(op) + ")";
  });
}

Outcome TesseraBackend::Barrier() {
  float token = 0;
  return Check(tesseraAllReduce(&token, &token, 1, tesseraFloat32, tesseraSum, comm_, nullptr),
               "tesseraAllReduce (1 float, as a barrier)");
}

Outcome TesseraBackend::MaxAcrossRanks(double* values, size_t count) {
  return Check(tesseraAllReduce(values, values, count, tesseraFloat64, tesseraMax, comm_, nullptr),
               "tesseraAllReduce (max of doubles, for timing)");
}

Outcome TesseraBackend::SumAcrossRanks(int64_t* values, size_t count) {
  return Check(tesseraAllReduce(values, values, count, tesseraInt64, tesseraSum, comm_, nullptr),
               "tesseraAllReduce (sum of int64, for counts)");
}

std::string TesseraBackend::AllReduceAlgorithm(size_t count, DataType type) const {
  const char* name = tesseraAllReduceAlgorithm(comm_, count, static_cast<tesseraDataType_t>(type));
  return name != nullptr ? name : "";
}

}  // namespace tessera_bench

// --- The other collectives (nccl.h's conventions; see collective_backend.h) ----------

namespace tessera_bench {

Outcome TesseraBackend::AllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                  DataType type) {
  return Check(tesseraAllGather(sendbuff, recvbuff, sendcount,
                                static_cast<tesseraDataType_t>(type), comm_, nullptr),
               [&] { return std::string("tesseraAllGather (") + DataTypeName(type) + ")"; });
}

Outcome TesseraBackend::ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                      DataType type, ReduceOp op) {
  return Check(tesseraReduceScatter(sendbuff, recvbuff, recvcount,
                                    static_cast<tesseraDataType_t>(type),
                                    static_cast<tesseraRedOp_t>(op), comm_, nullptr),
               [&] { return std::string("tesseraReduceScatter (") + DataTypeName(type) + ", " + ReduceOpName(op) + ")"; });
}

Outcome TesseraBackend::Broadcast(const void* sendbuff, void* recvbuff, size_t count,
                                  DataType type, int root) {
  return Check(tesseraBroadcast(sendbuff, recvbuff, count, static_cast<tesseraDataType_t>(type),
                                root, comm_, nullptr),
               [&] { return std::string("tesseraBroadcast (") + DataTypeName(type) + ", root " + std::to_string(root) + ")"; });
}

Outcome TesseraBackend::Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                               ReduceOp op, int root) {
  return Check(tesseraReduce(sendbuff, recvbuff, count, static_cast<tesseraDataType_t>(type),
                             static_cast<tesseraRedOp_t>(op), root, comm_, nullptr),
               [&] {
                 return std::string("tesseraReduce (") + DataTypeName(type) + ", " + ReduceOpName(op) + ", root " +
                        std::to_string(root) + ")";
               });
}

Outcome TesseraBackend::AlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                 DataType type) {
  return Check(tesseraAlltoAll(sendbuff, recvbuff, count, static_cast<tesseraDataType_t>(type),
                               comm_, nullptr),
               [&] { return std::string("tesseraAlltoAll (") + DataTypeName(type) + ")"; });
}

Outcome TesseraBackend::SendRecv(const void* sendbuff, void* recvbuff, size_t count,
                                 DataType type, int send_peer, int recv_peer) {
  if (sendbuff == recvbuff) {
    const size_t bytes = count * ElementSize(type);
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    std::memcpy(scratch_.data(), sendbuff, bytes);
    sendbuff = scratch_.data();
  }
  const auto t = static_cast<tesseraDataType_t>(type);
  const auto what = [&] {
    return std::string(" (") + DataTypeName(type) + ", to " + std::to_string(send_peer) + ", from " +
           std::to_string(recv_peer) + ")";
  };
  Outcome outcome = Check(tesseraGroupStart(), "tesseraGroupStart");
  if (!outcome.ok()) return outcome;
  Outcome send = Check(tesseraSend(sendbuff, count, t, send_peer, comm_, nullptr), [&] { return "tesseraSend" + what(); });
  Outcome recv = Check(tesseraRecv(recvbuff, count, t, recv_peer, comm_, nullptr), [&] { return "tesseraRecv" + what(); });
  Outcome end = Check(tesseraGroupEnd(), [&] { return "tesseraGroupEnd (send/recv" + what() + ")"; });
  if (!send.ok()) return send;
  if (!recv.ok()) return recv;
  return end;
}

}  // namespace tessera_bench
