// Rank 0's blob to every rank through the launcher's PMIx server (see pmix_share.h).
#include "bootstrap/pmix_share.h"

#include <pmix.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

namespace tessera {
namespace {

// Serialises shares within the process and numbers them, so that the n-th share of every
// process uses the same key.
std::mutex share_mutex;
uint64_t share_count = 0;

// A failed PMIx call as a Status naming the call and PMIx's error.
Status PmixError(const std::string& call, pmix_status_t rc, int timeout_s) {
  if (rc == PMIX_ERR_TIMEOUT) {
    return TimeoutError(call + " timed out after " + std::to_string(timeout_s) +
                        " s: did every process of the job call PmixShareFromRankZero?");
  }
  return RemoteError(call + " failed: " + PMIx_Error_string(rc));
}

// One PMIx_Init, finalised when the object goes out of scope.
class PmixClient {
 public:
  PmixClient() = default;
  PmixClient(const PmixClient&) = delete;
  PmixClient& operator=(const PmixClient&) = delete;
  ~PmixClient() {
    if (initialized_) PMIx_Finalize(nullptr, 0);
  }

  Status Init() {
    if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) {
      return InvalidUsage(
          "this process was not started by a PMIx launcher (PMIX_NAMESPACE and PMIX_RANK are "
          "not set): run it under mpirun or srun --mpi=pmix, or name the rendezvous with "
          "TESSERA_BOOTSTRAP_ADDR or MASTER_ADDR/MASTER_PORT");
    }
    pmix_status_t rc = PMIx_Init(&self_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      // libpmix caches a failed initialisation; finalising it would tear down state that a
      // later caller could still be using, so it is left as is.
      return InvalidUsage(std::string("PMIx_Init failed: ") + PMIx_Error_string(rc) +
                          " (is the launcher's PMIx server reachable?)");
    }
    initialized_ = true;
    return Status::Ok();
  }

  const pmix_proc_t& self() const { return self_; }

 private:
  pmix_proc_t self_{};
  bool initialized_ = false;
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
  if (rc != PMIX_SUCCESS) return PmixError("PMIx_Fence", rc, timeout_s);
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
                         std::string(PMIx_Data_type_string(value->type)) +
                         ", not a byte object");
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
  const int64_t timeout_s64 = (timeout_ms + 999) / 1000;
  const int timeout_s = timeout_s64 > INT_MAX ? INT_MAX : static_cast<int>(timeout_s64);

  std::lock_guard<std::mutex> lock(share_mutex);
  const std::string key = "tessera.share." + std::to_string(share_count++);
  const std::string where = "PmixShareFromRankZero (rank " + std::to_string(rank) + ", key " +
                            key;
  PmixClient client;
  Status status = client.Init();
  if (!status.ok()) return status.Annotate(where + ")");
  status = Share(client.self(), rank, key, timeout_s, blob);
  return status.Annotate(where + ", namespace " + client.self().nspace + ")");
}

}  // namespace tessera
