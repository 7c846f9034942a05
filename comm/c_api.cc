// The C API: a thin shim over Communicator. This file is the one place where a Status
// becomes a tesseraResult_t, where handles are validated, and where the last error
// message is kept (per communicator and per thread: no global error buffer).
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "base/log.h"
#include "base/settings.h"
#include "bootstrap/rendezvous.h"
#include "comm/communicator.h"
#include "comm/launch.h"
#include "tessera/tessera.h"

using tessera::Code;
using tessera::Communicator;
using tessera::Status;

// The handle type is the communicator plus what the shim needs to manage its life.
struct tesseraComm {
  std::unique_ptr<Communicator> impl;
  std::atomic<int> active_calls{0};
  std::mutex error_mu;
  std::string last_error;
};

namespace {

thread_local std::string t_last_error;
thread_local std::string t_returned_error;  // what tesseraGetLastError handed out

// Every live handle. Validating against this set turns use-after-destroy into an error.
std::mutex g_live_mu;
std::unordered_set<tesseraComm*>& Live() {
  static auto* live = new std::unordered_set<tesseraComm*>();
  return *live;
}

tesseraResult_t ToResult(Code c) { return static_cast<tesseraResult_t>(static_cast<int>(c)); }

tesseraResult_t Report(tesseraComm* comm, const char* function, const Status& s) {
  if (s.ok()) return tesseraSuccess;
  std::string prefix = function;
  tessera::LogLevel level = tessera::LogLevel::kWarn;
  if (comm != nullptr) {
    prefix += " (rank " + std::to_string(comm->impl->rank()) + " of " + std::to_string(comm->impl->nranks()) + ")";
    level = comm->impl->log_level();
    std::lock_guard<std::mutex> lock(comm->error_mu);
    comm->last_error = prefix + ": " + s.message();
  }
  t_last_error = prefix + ": " + s.message();
  tessera::Log(level, tessera::LogLevel::kWarn, t_last_error + " [" + tessera::CodeName(s.code()) + "]");
  return ToResult(s.code());
}

// Marks a call in progress on a live handle, so that Destroy/Abort wait for it to leave.
class CallGuard {
 public:
  explicit CallGuard(tesseraComm* comm) {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (comm != nullptr && Live().count(comm) != 0) {
      comm_ = comm;
      comm_->active_calls.fetch_add(1);
    }
  }
  ~CallGuard() {
    if (comm_ != nullptr) comm_->active_calls.fetch_sub(1);
  }
  tesseraComm* comm() const { return comm_; }

 private:
  tesseraComm* comm_ = nullptr;
};

Status CheckCommHandle(const tesseraComm* given, const tesseraComm* live) {
  if (given == nullptr) return tessera::InvalidArgument("comm is NULL");
  if (live == nullptr) return tessera::InvalidArgument("comm is not a live communicator (destroyed, aborted or never created)");
  return Status::Ok();
}

tesseraResult_t Release(tesseraComm_t comm, const char* function, bool abort) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (comm == nullptr || Live().erase(comm) == 0) {
      return Report(nullptr, function, CheckCommHandle(comm, nullptr));
    }
  }
  if (abort) comm->impl->RequestAbort();
  // Calls already inside (only possible from other threads) notice the abort flag
  // within a sleep slice; without abort they are the caller's misuse and still finish
  // within their own timeout.
  while (comm->active_calls.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  delete comm;
  return tesseraSuccess;
}

Status CreateComm(std::unique_ptr<Communicator> impl, tesseraComm_t* out) {
  auto* handle = new tesseraComm();
  handle->impl = std::move(impl);
  std::lock_guard<std::mutex> lock(g_live_mu);
  Live().insert(handle);
  *out = handle;
  return Status::Ok();
}

Status ValidateAllReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                         tesseraRedOp_t op, tesseraStream_t stream) {
  if (datatype < 0 || datatype >= tesseraNumTypes) {
    return tessera::InvalidArgument("datatype " + std::to_string(static_cast<int>(datatype)) + " is not a tesseraDataType_t");
  }
  if (op < 0 || op >= tesseraNumOps) {
    return tessera::InvalidArgument("op " + std::to_string(static_cast<int>(op)) + " is not a tesseraRedOp_t");
  }
  if (stream != nullptr) return tessera::InvalidArgument("stream must be NULL on this CPU build");
  const size_t es = tessera::SizeOf(static_cast<tessera::DataType>(datatype));
  if (count > static_cast<size_t>(PTRDIFF_MAX) / es) {
    return tessera::InvalidArgument("count " + std::to_string(count) + " times the datatype size overflows");
  }
  if (count == 0) return Status::Ok();
  if (sendbuff == nullptr) return tessera::InvalidArgument("sendbuff is NULL with count " + std::to_string(count));
  if (recvbuff == nullptr) return tessera::InvalidArgument("recvbuff is NULL with count " + std::to_string(count));
  const uintptr_t s = reinterpret_cast<uintptr_t>(sendbuff), r = reinterpret_cast<uintptr_t>(recvbuff);
  const size_t bytes = count * es;
  if (s != r && s < r + bytes && r < s + bytes) {
    return tessera::InvalidArgument("sendbuff and recvbuff overlap without being equal (in-place needs sendbuff == recvbuff)");
  }
  return Status::Ok();
}

}  // namespace

extern "C" {

tesseraResult_t tesseraGetVersion(int* version) {
  if (version == nullptr) return Report(nullptr, "tesseraGetVersion", tessera::InvalidArgument("version is NULL"));
  *version = TESSERA_VERSION_CODE;
  return tesseraSuccess;
}

tesseraResult_t tesseraGetUniqueId(tesseraUniqueId* uniqueId) {
  const char* fn = "tesseraGetUniqueId";
  if (uniqueId == nullptr) return Report(nullptr, fn, tessera::InvalidArgument("uniqueId is NULL"));
  tessera::Settings settings;
  Status s = tessera::Settings::FromEnvironment(&settings);
  tessera::UniqueIdData id;
  std::string ip;
  if (s.ok()) s = tessera::ChooseLocalAddress(settings.socket_ifname, &ip);
  if (s.ok()) {
    id.secret = tessera::RandomSecret();
    s = tessera::StartRendezvous(ip, 0, id.secret, settings.timeout_ms, &id.root);
  }
  if (!s.ok()) return Report(nullptr, fn, s);
  tessera::EncodeUniqueId(id, uniqueId->internal);
  return tesseraSuccess;
}

tesseraResult_t tesseraCommInitRank(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank) {
  const char* fn = "tesseraCommInitRank";
  if (comm == nullptr) return Report(nullptr, fn, tessera::InvalidArgument("comm is NULL"));
  *comm = nullptr;
  if (nranks <= 0) return Report(nullptr, fn, tessera::InvalidArgument("nranks " + std::to_string(nranks) + " must be > 0"));
  if (rank < 0 || rank >= nranks) {
    return Report(nullptr, fn, tessera::InvalidArgument("rank " + std::to_string(rank) + " is not in [0, nranks " +
                                                        std::to_string(nranks) + ")"));
  }
  tessera::UniqueIdData id;
  Status s = tessera::DecodeUniqueId(commId.internal, &id);
  tessera::Settings settings;
  if (s.ok()) s = tessera::Settings::FromEnvironment(&settings);
  std::unique_ptr<Communicator> impl;
  if (s.ok()) s = Communicator::Create(settings, id, nranks, rank, &impl);
  if (s.ok()) s = CreateComm(std::move(impl), comm);
  if (!s.ok()) return Report(nullptr, fn, s.Annotate("rank " + std::to_string(rank) + " of " + std::to_string(nranks)));
  return tesseraSuccess;
}

tesseraResult_t tesseraCommInitFromEnv(tesseraComm_t* comm) {
  const char* fn = "tesseraCommInitFromEnv";
  if (comm == nullptr) return Report(nullptr, fn, tessera::InvalidArgument("comm is NULL"));
  *comm = nullptr;
  tessera::Settings settings;
  Status s = tessera::Settings::FromEnvironment(&settings);
  std::unique_ptr<Communicator> impl;
  if (s.ok()) s = tessera::CreateFromLauncher(settings, &impl);
  if (s.ok()) s = CreateComm(std::move(impl), comm);
  return Report(nullptr, fn, s);
}

tesseraResult_t tesseraCommDestroy(tesseraComm_t comm) { return Release(comm, "tesseraCommDestroy", false); }

tesseraResult_t tesseraCommAbort(tesseraComm_t comm) { return Release(comm, "tesseraCommAbort", true); }

tesseraResult_t tesseraCommCount(const tesseraComm_t comm, int* count) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && count == nullptr) s = tessera::InvalidArgument("count is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommCount", s);
  *count = comm->impl->nranks();
  return tesseraSuccess;
}

tesseraResult_t tesseraCommUserRank(const tesseraComm_t comm, int* rank) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && rank == nullptr) s = tessera::InvalidArgument("rank is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommUserRank", s);
  *rank = comm->impl->rank();
  return tesseraSuccess;
}

tesseraResult_t tesseraCommGetAsyncError(tesseraComm_t comm, tesseraResult_t* asyncError) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && asyncError == nullptr) s = tessera::InvalidArgument("asyncError is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommGetAsyncError", s);
  *asyncError = ToResult(comm->impl->sticky_error().code());
  return tesseraSuccess;
}

const char* tesseraGetErrorString(tesseraResult_t result) {
  if (result < 0 || result >= tesseraNumResults) return "unknown result code";
  return tessera::CodeName(static_cast<Code>(result));
}

const char* tesseraGetLastError(tesseraComm_t comm) {
  CallGuard guard(comm);
  t_returned_error = t_last_error;
  if (guard.comm() != nullptr) {
    std::lock_guard<std::mutex> lock(comm->error_mu);
    if (!comm->last_error.empty()) t_returned_error = comm->last_error;
  }
  return t_returned_error.c_str();
}

tesseraResult_t tesseraAllReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 tesseraRedOp_t op, tesseraComm_t comm, tesseraStream_t stream) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = ValidateAllReduce(sendbuff, recvbuff, count, datatype, op, stream);
  if (s.ok()) {
    s = comm->impl->AllReduce(sendbuff, recvbuff, count, static_cast<tessera::DataType>(datatype),
                              static_cast<tessera::RedOp>(op));
  }
  return Report(guard.comm(), "tesseraAllReduce", s);
}

}  // extern "C"
