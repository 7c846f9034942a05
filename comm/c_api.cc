// The C API (include/tessera/tessera.h): each function checks its handle (the handle
// registry), hands the call to the C++ side and reports the result (Report, the one
// place where a Status becomes a tesseraResult_t). What the calls do lives beside:
// handle.h (the handle), handle_registry.h (which handles are live), call_validation.h
// (argument checks), group_runner.h (how calls and groups run), comm_init.h (creating
// communicators) and last_error.h.
#include "comm/call_validation.h"
#include "comm/comm_init.h"
#include "comm/group_runner.h"
#include "comm/handle.h"
#include "comm/handle_registry.h"
#include "comm/health_report.h"
#include "comm/last_error.h"
#include "tessera/tessera.h"

using tessera::CallGuard;
using tessera::CheckCommHandle;
using tessera::InvalidArgument;
using tessera::Operation;
using tessera::OpKind;
using tessera::Report;
using tessera::Status;

namespace {

Operation MakeOp(OpKind kind, const void* send, void* recv, size_t count, tesseraDataType_t datatype, int op = 0,
                 int root = 0, int peer = 0) {
  Operation o;
  o.kind = kind;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = static_cast<tessera::DataType>(datatype);
  o.op = op;
  o.root = root;
  o.peer = peer;
  return o;
}

// The status of a call on `comm` that writes `out`: the handle's check, then
// InvalidArgument naming `out` when it is NULL.
Status CheckedOut(tesseraComm_t comm, const CallGuard& guard, const void* out, const char* name) {
  TESSERA_RETURN_IF_ERROR(CheckCommHandle(comm, guard.comm()));
  return out != nullptr ? Status::Ok() : InvalidArgument(std::string(name) + " is NULL");
}

}  // namespace

extern "C" {

tesseraResult_t tesseraGetVersion(int* version) {
  if (version == nullptr) return Report(nullptr, "tesseraGetVersion", InvalidArgument("version is NULL"));
  *version = TESSERA_VERSION_CODE;
  return tesseraSuccess;
}

tesseraResult_t tesseraGetUniqueId(tesseraUniqueId* uniqueId) {
  return Report(nullptr, "tesseraGetUniqueId", tessera::NewApiUniqueId(uniqueId));
}

tesseraResult_t tesseraCommInitRankConfig(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank,
                                          tesseraConfig_t* config) {
  const char* fn = config != nullptr ? "tesseraCommInitRankConfig" : "tesseraCommInitRank";
  return Report(nullptr, fn, tessera::InitRank(fn, nranks, commId, rank, config, comm));
}

tesseraResult_t tesseraCommInitRank(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank) {
  return tesseraCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

tesseraResult_t tesseraCommInitAll(tesseraComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;  // a CPU build has no devices to bind
  return tessera::InitAll(comms, ndev);
}

tesseraResult_t tesseraCommInitFromEnv(tesseraComm_t* comm) {
  return Report(nullptr, "tesseraCommInitFromEnv", tessera::InitFromEnv(comm));
}

tesseraResult_t tesseraCommSplit(tesseraComm_t comm, int color, int key, tesseraComm_t* newcomm,
                                 tesseraConfig_t* config) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = tessera::SplitHandle(comm, color, key, config, newcomm);
  return Report(guard.comm(), "tesseraCommSplit", s);
}

tesseraResult_t tesseraCommRevoke(tesseraComm_t comm, int flags) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && flags != 0) s = InvalidArgument("flags " + std::to_string(flags) + " must be 0");
  if (s.ok() && comm->impl() == nullptr) s = tessera::InvalidUsage("the communicator is still being created");
  if (s.ok()) comm->impl()->Revoke();
  return Report(guard.comm(), "tesseraCommRevoke", s);
}

tesseraResult_t tesseraCommShrink(tesseraComm_t comm, const int* excludeRanks, int excludeCount,
                                  tesseraComm_t* newcomm, tesseraConfig_t* config, int flags) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = tessera::ShrinkHandle(comm, excludeRanks, excludeCount, config, flags, newcomm);
  return Report(guard.comm(), "tesseraCommShrink", s);
}

tesseraResult_t tesseraCommFinalize(tesseraComm_t comm) {
  CallGuard guard(comm);
  const Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) comm->WaitIdle();
  return Report(guard.comm(), "tesseraCommFinalize", s);
}

tesseraResult_t tesseraCommDestroy(tesseraComm_t comm) {
  return Report(nullptr, "tesseraCommDestroy", tessera::ReleaseHandle(comm, false));
}

tesseraResult_t tesseraCommAbort(tesseraComm_t comm) {
  return Report(nullptr, "tesseraCommAbort", tessera::ReleaseHandle(comm, true));
}

tesseraResult_t tesseraCommCuDevice(const tesseraComm_t comm, int* device) {
  CallGuard guard(comm);
  Status s = CheckedOut(comm, guard, device, "device");
  if (s.ok()) s = tessera::InvalidUsage("not supported: this is a CPU build, communicators have no CUDA device");
  return Report(guard.comm(), "tesseraCommCuDevice", s);
}

tesseraResult_t tesseraCommCount(const tesseraComm_t comm, int* count) {
  CallGuard guard(comm);
  const Status s = CheckedOut(comm, guard, count, "count");
  if (s.ok()) *count = comm->nranks;
  return Report(guard.comm(), "tesseraCommCount", s);
}

tesseraResult_t tesseraCommUserRank(const tesseraComm_t comm, int* rank) {
  CallGuard guard(comm);
  const Status s = CheckedOut(comm, guard, rank, "rank");
  if (s.ok()) *rank = comm->rank;
  return Report(guard.comm(), "tesseraCommUserRank", s);
}

tesseraResult_t tesseraCommGetAsyncError(tesseraComm_t comm, tesseraResult_t* asyncError) {
  CallGuard guard(comm);
  const Status s = CheckedOut(comm, guard, asyncError, "asyncError");
  if (s.ok()) *asyncError = tessera::ToResult(comm->AsyncError().code());
  return Report(guard.comm(), "tesseraCommGetAsyncError", s);
}

tesseraResult_t tesseraCommDumpFlightRecord(tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && comm->impl() == nullptr) s = tessera::InvalidUsage("the communicator is still being created");
  std::string path;
  if (s.ok()) s = comm->impl()->DumpFlightRecordNow("asked by tesseraCommDumpFlightRecord", &path);
  return Report(guard.comm(), "tesseraCommDumpFlightRecord", s);
}

tesseraResult_t tesseraCommGetHealth(tesseraComm_t comm, tesseraHealth_t* health, double* peerStalledSeconds,
                                     int npeers) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = tessera::CheckHealthArguments(health, npeers);
  if (s.ok() && comm->impl() == nullptr) s = tessera::InvalidUsage("the communicator is still being created");
  if (s.ok()) tessera::FillHealth(comm->impl()->Health(), health, peerStalledSeconds, npeers);
  return Report(guard.comm(), "tesseraCommGetHealth", s);
}

const char* tesseraGetErrorString(tesseraResult_t result) {
  if (result < 0 || result >= tesseraNumResults) return "unknown result code";
  return tessera::CodeName(static_cast<tessera::Code>(result));
}

const char* tesseraGetLastError(tesseraComm_t comm) {
  CallGuard guard(comm);
  return tessera::LastError(guard.comm());
}

tesseraResult_t tesseraRedOpCreatePreMulSum(tesseraRedOp_t* op, void* scalar, tesseraDataType_t datatype,
                                            tesseraScalarResidence_t residence, tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = tessera::ValidatePreMulSum(op, scalar, datatype, residence);
  int id = 0;
  const bool host_immediate = residence == tesseraScalarHostImmediate;
  if (s.ok()) s = comm->CreatePreMulSum(scalar, static_cast<tessera::DataType>(datatype), host_immediate, &id);
  if (s.ok()) *op = static_cast<tesseraRedOp_t>(id);
  return Report(guard.comm(), "tesseraRedOpCreatePreMulSum", s);
}

tesseraResult_t tesseraRedOpDestroy(tesseraRedOp_t op, tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && op < tesseraNumOps) s = InvalidArgument("op " + std::to_string(static_cast<int>(op)) + " is built in");
  if (s.ok()) s = comm->DestroyRedOp(static_cast<int>(op));
  return Report(guard.comm(), "tesseraRedOpDestroy", s);
}

tesseraResult_t tesseraAllReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 tesseraRedOp_t op, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraAllReduce", comm, MakeOp(OpKind::kAllReduce, sendbuff, recvbuff, count, datatype, op),
                         stream);
}

tesseraResult_t tesseraAllReduceParts(const void* const* sendbuffs, int nparts, void* recvbuff, size_t count,
                                      tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                      tesseraStream_t stream) {
  Operation o = MakeOp(OpKind::kAllReduce, nullptr, recvbuff, count, datatype, op);
  Status bad;
  if (sendbuffs == nullptr) {
    bad = InvalidArgument("sendbuffs is NULL");
  } else if (nparts < 1) {
    bad = InvalidArgument("nparts " + std::to_string(nparts) + " must be >= 1");
  } else {
    o.parts.assign(sendbuffs, sendbuffs + nparts);
    o.send = sendbuffs[0];
  }
  if (bad.ok() && stream != nullptr) bad = InvalidArgument("tesseraAllReduceParts takes the NULL stream only");
  return tessera::Submit("tesseraAllReduceParts", comm, o, stream, bad);
}

const char* tesseraAllReduceAlgorithm(tesseraComm_t comm, size_t count, tesseraDataType_t datatype) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = tessera::CheckType(datatype);
  const char* name = nullptr;
  if (s.ok()) s = comm->AllReduceAlgorithm(count, static_cast<tessera::DataType>(datatype), &name);
  Report(guard.comm(), "tesseraAllReduceAlgorithm", s);
  return s.ok() ? name : nullptr;
}

tesseraResult_t tesseraBroadcast(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 int root, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraBroadcast", comm,
                         MakeOp(OpKind::kBroadcast, sendbuff, recvbuff, count, datatype, 0, root), stream);
}

tesseraResult_t tesseraBcast(void* buff, size_t count, tesseraDataType_t datatype, int root, tesseraComm_t comm,
                             tesseraStream_t stream) {
  return tessera::Submit("tesseraBcast", comm, MakeOp(OpKind::kBroadcast, buff, buff, count, datatype, 0, root),
                         stream);
}

tesseraResult_t tesseraReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              tesseraRedOp_t op, int root, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraReduce", comm, MakeOp(OpKind::kReduce, sendbuff, recvbuff, count, datatype, op, root),
                         stream);
}

tesseraResult_t tesseraAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 tesseraDataType_t datatype, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraAllGather", comm, MakeOp(OpKind::kAllGather, sendbuff, recvbuff, sendcount, datatype),
                         stream);
}

tesseraResult_t tesseraReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                     tesseraStream_t stream) {
  return tessera::Submit("tesseraReduceScatter", comm,
                         MakeOp(OpKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op), stream);
}

tesseraResult_t tesseraAlltoAll(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraAlltoAll", comm, MakeOp(OpKind::kAlltoAll, sendbuff, recvbuff, count, datatype),
                         stream);
}

tesseraResult_t tesseraGather(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              int root, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraGather", comm, MakeOp(OpKind::kGather, sendbuff, recvbuff, count, datatype, 0, root),
                         stream);
}

tesseraResult_t tesseraScatter(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                               int root, tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraScatter", comm, MakeOp(OpKind::kScatter, sendbuff, recvbuff, count, datatype, 0, root),
                         stream);
}

tesseraResult_t tesseraSend(const void* sendbuff, size_t count, tesseraDataType_t datatype, int peer,
                            tesseraComm_t comm, tesseraStream_t stream) {
  return tessera::Submit("tesseraSend", comm, MakeOp(OpKind::kSend, sendbuff, nullptr, count, datatype, 0, 0, peer),
                         stream);
}

tesseraResult_t tesseraRecv(void* recvbuff, size_t count, tesseraDataType_t datatype, int peer, tesseraComm_t comm,
                            tesseraStream_t stream) {
  return tessera::Submit("tesseraRecv", comm, MakeOp(OpKind::kRecv, nullptr, recvbuff, count, datatype, 0, 0, peer),
                         stream);
}

tesseraResult_t tesseraGroupStart(void) { return tessera::GroupStart(); }

tesseraResult_t tesseraGroupEnd(void) { return tessera::GroupEnd(); }

}  // extern "C"
