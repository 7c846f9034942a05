#include "mpi/requests.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi/errors.h"

namespace tessera_mpi {
namespace {

// What a generalized request reports when waited on; the request owns it.
struct Outcome {
  int error = MPI_SUCCESS;
};

// A posted call, until its request completes.
struct Pending {
  std::unique_ptr<RoutedCall> call;
  tesseraComm_t async;
  MPI_Request request;
  Outcome* outcome;
};

std::mutex g_mutex;  // guards everything below
std::condition_variable g_changed;
std::vector<Pending*> g_pending;
std::thread g_watcher;
bool g_stopping = false;

// How long the watcher sleeps while calls are in flight and none has completed.
constexpr std::chrono::microseconds kPollInterval(20);

int Query(void* extra, MPI_Status* status) {
  const int error = static_cast<Outcome*>(extra)->error;
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  status->MPI_ERROR = error;
  return error;
}

int Free(void* extra) {
  delete static_cast<Outcome*>(extra);
  return MPI_SUCCESS;
}

int Cancel(void*, int) { return MPI_SUCCESS; }  // a collective cannot be cancelled: it completes

// Finishes a call whose communicator is idle (state: its async error) and completes its
// request, the last thing touched: MPI_Wait may free the outcome at once.
void Complete(Pending* pending, tesseraResult_t state) {
  RoutedCall* call = pending->call.get();
  pending->outcome->error =
      state == tesseraSuccess ? Finish(call) : TesseraErrorCode(call->collective, *call->mirror, state);
  const MPI_Request request = pending->request;
  delete pending;
  MPI_Request completed = request;
  PMPI_Grequest_complete(completed);
}

// The watcher: completes the calls of every communicator that has none in progress.
void Watch() {
  std::unique_lock<std::mutex> lock(g_mutex);
  for (;;) {
    g_changed.wait(lock, [] { return g_stopping || !g_pending.empty(); });
    if (g_pending.empty()) return;  // stopping, nothing left
    const std::vector<Pending*> posted = g_pending;  // posted before the states are read
    lock.unlock();
    std::map<tesseraComm_t, tesseraResult_t> states;
    std::vector<Pending*> done;
    for (Pending* pending : posted) {
      auto state = states.find(pending->async);
      if (state == states.end()) {
        tesseraResult_t error = tesseraInProgress;
        if (tesseraCommGetAsyncError(pending->async, &error) != tesseraSuccess) error = tesseraInternalError;
        state = states.emplace(pending->async, error).first;
      }
      if (state->second != tesseraInProgress) done.push_back(pending);
    }
    for (Pending* pending : done) {
      const tesseraResult_t state = states[pending->async];
      Complete(pending, state);
    }
    lock.lock();
    for (Pending* pending : done) g_pending.erase(std::find(g_pending.begin(), g_pending.end(), pending));
    g_changed.notify_all();  // for DrainRequests
    if (done.empty()) {
      lock.unlock();
      std::this_thread::sleep_for(kPollInterval);
      lock.lock();
    }
  }
}

}  // namespace

int StartRequest(std::unique_ptr<RoutedCall> call, tesseraComm_t async, MPI_Request* request) {
  Outcome* outcome = new Outcome;
  const int rc = PMPI_Grequest_start(Query, Free, Cancel, outcome, request);
  if (rc != MPI_SUCCESS) {
    delete outcome;
    return rc;
  }
  const tesseraResult_t posted = Issue(call.get(), async);
  Pending* pending = new Pending{std::move(call), async, *request, outcome};
  if (posted != tesseraInProgress && posted != tesseraSuccess) {
    Complete(pending, posted);  // refused at once: the request reports it
    return MPI_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pending.push_back(pending);
  if (!g_watcher.joinable()) {
    g_stopping = false;
    g_watcher = std::thread(Watch);
  }
  g_changed.notify_all();
  return MPI_SUCCESS;
}

void DrainRequests(tesseraComm_t async) {
  std::unique_lock<std::mutex> lock(g_mutex);
  g_changed.wait(lock, [async] {
    return std::none_of(g_pending.begin(), g_pending.end(), [async](const Pending* p) { return p->async == async; });
  });
}

void StopRequests() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_watcher.joinable()) return;
    g_stopping = true;
  }
  g_changed.notify_all();
  g_watcher.join();
}

}  // namespace tessera_mpi
