#include "mpi/mirror.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#include "mpi/requests.h"

namespace tessera_mpi {
namespace {

std::mutex g_mutex;                  // guards g_live and the keyval's creation
std::vector<Mirror*> g_live;         // every mirror not yet deleted
int g_keyval = MPI_KEYVAL_INVALID;
std::atomic<uint64_t> g_epoch{1};    // bumped by every deletion: invalidates the caches

// The last communicator this thread used. A communicator freed and another created at the
// same address is caught by the epoch.
struct CacheEntry {
  MPI_Comm comm = MPI_COMM_NULL;
  const Mirror* mirror = nullptr;
  uint64_t epoch = 0;
};
thread_local CacheEntry t_cache;

int DeleteMirror(MPI_Comm, int, void* value, void*) {
  Mirror* mirror = static_cast<Mirror*>(value);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (size_t i = 0; i < g_live.size(); ++i) {
      if (g_live[i] == mirror) {
        g_live.erase(g_live.begin() + static_cast<long>(i));
        break;
      }
    }
    g_epoch.fetch_add(1, std::memory_order_acq_rel);
  }
  if (mirror->async_comm != nullptr) {
    tesseraCommFinalize(mirror->async_comm);  // waits for the calls posted on it
    DrainRequests(mirror->async_comm);         // and for their requests to complete
    tesseraCommDestroy(mirror->async_comm);
  }
  if (mirror->comm != nullptr) tesseraCommDestroy(mirror->comm);
  delete mirror;
  return MPI_SUCCESS;
}

int Keyval() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_keyval == MPI_KEYVAL_INVALID) {
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteMirror, &g_keyval, nullptr);
  }
  return g_keyval;
}

std::string NameOf(MPI_Comm comm) {
  char name[MPI_MAX_OBJECT_NAME] = {0};
  int length = 0;
  if (PMPI_Comm_get_name(comm, name, &length) == MPI_SUCCESS && length > 0) {
    return std::string(name, static_cast<size_t>(length));
  }
  return "MPI communicator #" + std::to_string(PMPI_Comm_c2f(comm));  // its Fortran handle
}

// What rank 0 sends the others: the id, or that it could not make one.
struct Offer {
  tesseraUniqueId id;
  int ok;
};

// Joins the tessera communicator of comm's ranks; null (with *error) where this rank
// could not. Collective over comm.
tesseraComm_t Join(const Mirror& mirror, std::string* error) {
  Offer offer{};
  if (mirror.rank == 0) {
    offer.ok = tesseraGetUniqueId(&offer.id) == tesseraSuccess;
    if (!offer.ok) *error = tesseraGetLastError(nullptr);
  }
  if (PMPI_Bcast(&offer, sizeof(offer), MPI_BYTE, 0, mirror.mpi_comm) != MPI_SUCCESS) {
    *error = "PMPI_Bcast of the unique id failed";
    return nullptr;
  }
  if (!offer.ok) {
    if (mirror.rank != 0) *error = "rank 0 could not make a unique id";
    return nullptr;
  }
  tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
  config.commName = mirror.name.c_str();
  tesseraComm_t comm = nullptr;
  if (tesseraCommInitRankConfig(&comm, mirror.nranks, offer.id, mirror.rank, &config) != tesseraSuccess) {
    *error = tesseraGetLastError(nullptr);
    return nullptr;
  }
  return comm;
}

Mirror* Create(MPI_Comm comm) {
  Mirror* mirror = new Mirror;
  mirror->mpi_comm = comm;
  mirror->name = NameOf(comm);
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) {
    PMPI_Comm_remote_size(comm, &mirror->nranks);  // not used: the calls go to Open MPI
    mirror->why_not = Route::kCommunicator;
    return mirror;
  }
  PMPI_Comm_rank(comm, &mirror->rank);
  PMPI_Comm_size(comm, &mirror->nranks);
  if (mirror->nranks < 2) {
    mirror->why_not = Route::kCommunicator;  // Open MPI's calls on one rank are copies
    return mirror;
  }
  std::string error;
  tesseraComm_t joined = Join(*mirror, &error);
  int mine = joined != nullptr, all = 0;
  if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
  if (all) {
    mirror->comm = joined;
    return mirror;
  }
  if (joined != nullptr) tesseraCommDestroy(joined);
  mirror->why_not = Route::kUnavailable;
  if (!mine) {
    std::fprintf(stderr, "tessera_mpi: rank %d of %s: no tessera communicator (%s); its collectives stay on Open MPI\n",
                 mirror->rank, mirror->name.c_str(), error.c_str());
  } else if (mirror->rank == 0) {
    std::fprintf(stderr, "tessera_mpi: %s: a rank could not join tessera (it says why); its collectives stay on Open MPI\n",
                 mirror->name.c_str());
  }
  return mirror;
}

const Mirror* LookUpOrCreate(MPI_Comm comm) {
  const int keyval = Keyval();
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &value, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<const Mirror*>(value);
  Mirror* mirror = Create(comm);
  PMPI_Comm_set_attr(comm, keyval, mirror);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_live.push_back(mirror);
  return mirror;
}

}  // namespace

const Mirror* MirrorOf(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (t_cache.comm == comm && t_cache.epoch == epoch) return t_cache.mirror;
  const Mirror* mirror = LookUpOrCreate(comm);
  if (mirror != nullptr) t_cache = {comm, mirror, epoch};
  return mirror;
}

tesseraComm_t AsyncCommOf(const Mirror& mirror) {
  if (mirror.async_tried) return mirror.async_comm;
  mirror.async_tried = true;
  const std::string name = mirror.name + " (non-blocking)";
  tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name.c_str();
  tesseraComm_t async = nullptr;
  const tesseraResult_t result = tesseraCommSplit(mirror.comm, 0, mirror.rank, &async, &config);
  const std::string error = result == tesseraSuccess ? "" : tesseraGetLastError(mirror.comm);
  int mine = async != nullptr, all = 0;
  if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, mirror.mpi_comm) != MPI_SUCCESS) all = 0;
  if (all) {
    mirror.async_comm = async;
    return async;
  }
  if (async != nullptr) tesseraCommDestroy(async);
  if (!mine) {
    std::fprintf(stderr, "tessera_mpi: rank %d of %s: no non-blocking tessera communicator (%s); its non-blocking "
                 "collectives stay on Open MPI\n", mirror.rank, mirror.name.c_str(), error.c_str());
  }
  return nullptr;
}

void DestroyMirrors() {
  std::vector<Mirror*> live;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    live = g_live;
  }
  for (Mirror* mirror : live) PMPI_Comm_delete_attr(mirror->mpi_comm, g_keyval);  // runs DeleteMirror
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
}

}  // namespace tessera_mpi
