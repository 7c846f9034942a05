// Rank 0's blob to every rank through the launcher's PMIx server (see pmix_share.h).
#include "bootstrap/pmix_share.h"

#include <pmix.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

namespace tessera {
namespace {

// A failed PMIx call as a Status naming the call and PMIx's error.
Status PmixError(const std::string& call, pmix_status_t rc, int timeout_s) {
  if (rc == PMIX_ERR_TIMEOUT) {
    return TimeoutError(call + " timed out after " + std::to_string(timeout_s) +
                        " s: did every process of the job call PmixShareFromRankZero?");
  }
  return RemoteError(call + " failed: " + PMIx_Error_string(rc));
}

// This process's one reference on libpmix: taken by the first share, released at exit.
// libpmix counts PMIx_Init calls, so the reference coexists with MPI's; but once the count
// falls to zero PMIx cannot be initialised again cleanly (a later MPI_Init fails with
// "getting local rank failed"), so the reference is never dropped before exit.
class PmixProcess {
 public:
  // The process-wide instance; never destroyed, so the exit handler can still use it.
  static PmixProcess& Get() {
    static PmixProcess* process = new PmixProcess;
    return *process;
  }

  std::mutex& mutex() { return mutex_; }

  // Connects on the first call; later calls return the same client. Caller holds mutex().
  Status Connect() {
    if (connected_) {
      if (getpid() != pid_) {
        return InvalidUsage("PMIx was initialised by process " + std::to_string(pid_) +
                            "; this process is a fork of it and cannot use that connection");
      }
      return Status::Ok();
    }
    if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) {
      return InvalidUsage(
          "this process was not started by a PMIx launcher (PMIX_NAMESPACE and PMIX_RANK are "
          "not set): run it under mpirun or srun --mpi=pmix, or name the rendezvous with "
          "TESSERA_BOOTSTRAP_ADDR or MASTER_ADDR/MASTER_PORT");
    }
    pmix_status_t rc = PMIx_Init(&self_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      // libpmix remembers a failed initialisation and returns the same error to every later
      // PMIx_Init; there is nothing for us to finalise.
      return InvalidUsage(std::string("PMIx_Init failed: ") + PMIx_Error_string(rc) +
                          " (is the launcher's PMIx server reachable?)");
    }
    connected_ = true;
    pid_ = getpid();
    std::atexit(&PmixProcess::FinalizeAtExit);
    return Status::Ok();
  }

  const pmix_proc_t& self() const { return self_; }

  // The key of the next share: "tessera.share.<n>" for the n-th share of this process.
  std::string NextKey() { return "tessera.share." + std::to_string(share_count_++); }

 private:
  PmixProcess() = default;

  // Launchers treat a process that initialised PMIx and exits without finalising as
  // failed. A forked child inherits this handler but not PMIx's progress thread, so only
  // the process that connected finalises.
  static void FinalizeAtExit() {
    PmixProcess& process = Get();
    if (process.connected_ && getpid() == process.pid_) {
      process.connected_ = false;
      PMIx_Finalize(nullptr, 0);
    }
  }

  std::mutex mutex_;  // serialises shares within the process
  bool connected_ = false;
  pid_t pid_ = 0;
  pmix_proc_t self_{};
  uint64_t share_count_ = 0;
};

// The info keys of one bounded call: PMIX_TIMEOUT, plus PMIX_COLLECT_DATA when asked.
class BoundedCallInfo {
 public:
  BoundedCallInfo(int timeout_s, bool collect_data) {
    PMIX_INFO_LOAD(&info_[0], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    count_ = 1;
    if (collect_data) {
      bool yes = true;
      PMIX_INFO_LOAD(&info_[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
      count_ = 2;
    }
  }
  BoundedCallInfo(const BoundedCallInfo&) = delete;
  BoundedCallInfo& operator=(const BoundedCallInfo&) = delete;
  ~BoundedCallInfo() {
    for (size_t i = 0; i < count_; ++i) PMIX_INFO_DESTRUCT(&info_[i]);
  }
  const pmix_info_t* data() const { return info_; }
  size_t size() const { return count_; }

 private:
  pmix_info_t info_[2]{};
  size_t count_ = 0;
};

// The steps after PMIx_Init, for one process.
Status Share(const pmix_proc_t& self, int rank, const std::string& key, int timeout_s,
             std::string* blob) {
  if (self.rank != static_cast<pmix_rank_t>(rank)) {
    return InvalidArgument("rank " + std::to_string(rank) + " is not this process's PMIx rank " +
                           std::to_string(self.rank));
  }
  if (rank == 0) {
    pmix_value_t value{};
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = const_cast<char*>(blob->data());  // PMIx_Put copies it
    value.data.bo.size = blob->size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) return PmixError("PMIx_Put", rc, timeout_s);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return PmixError("PMIx_Commit", rc, timeout_s);
  }

  BoundedCallInfo fence_info(timeout_s, /*collect_data=*/true);
  pmix_status_t rc = PMIx_Fence(nullptr, 0, fence_info.data(), fence_info.size());
  if (rc != PMIX_SUCCESS) {
    Status error = PmixError("PMIx_Fence", rc, timeout_s);
    if (rc == PMIX_ERR_TIMEOUT) return error;
    return RemoteError(error.message() + " (did a process of the job exit?)");
  }
  if (rank == 0) return Status::Ok();

  pmix_proc_t root{};
  PMIX_LOAD_PROCID(&root, self.nspace, 0);
  BoundedCallInfo get_info(timeout_s, /*collect_data=*/false);
  pmix_value_t* value = nullptr;
  rc = PMIx_Get(&root, key.c_str(), get_info.data(), get_info.size(), &value);
  if (rc != PMIX_SUCCESS) return PmixError("PMIx_Get of rank 0's value", rc, timeout_s);
  Status status;
  if (value == nullptr) {
    status = RemoteError("PMIx_Get of rank 0's value returned no value");
  } else if (value->type != PMIX_BYTE_OBJECT) {
    status = RemoteError("PMIx_Get of rank 0's value returned type " +
                         std::string(PMIx_Data_type_string(value->type)) + ", not a byte object");
  } else if (value->data.bo.size == 0) {
    blob->clear();
  } else {
    blob->assign(value->data.bo.bytes, value->data.bo.size);
  }
  if (value != nullptr) PMIX_VALUE_RELEASE(value);
  return status;
}

}  // namespace

Status PmixShareFromRankZero(int rank, std::string* blob, int64_t timeout_ms) {
  if (timeout_ms <= 0) {
    return InvalidArgument("PmixShareFromRankZero: timeout_ms must be > 0, not " +
                           std::to_string(timeout_ms));
  }
  if (blob == nullptr) return InvalidArgument("PmixShareFromRankZero: blob is null");
  if (rank < 0) {
    return InvalidArgument("PmixShareFromRankZero: rank " + std::to_string(rank) + " < 0");
  }
  const int64_t timeout_s64 = timeout_ms / 1000 + (timeout_ms % 1000 != 0 ? 1 : 0);
  const int timeout_s = timeout_s64 > INT_MAX ? INT_MAX : static_cast<int>(timeout_s64);

  PmixProcess& process = PmixProcess::Get();
  std::lock_guard<std::mutex> lock(process.mutex());
  const std::string where = "PmixShareFromRankZero (rank " + std::to_string(rank);
  Status status = process.Connect();
  if (!status.ok()) return status.Annotate(where + ")");
  const std::string key = process.NextKey();
  status = Share(process.self(), rank, key, timeout_s, blob);
  return status.Annotate(where + ", namespace " + process.self().nspace + ", key " + key + ")");
}

}  // namespace tessera
