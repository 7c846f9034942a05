#include "comm/handle_registry.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

namespace tessera {

// A thread's slot: the handle its current call uses (null: none).
struct HazardSlot {
  std::atomic<tesseraComm*> comm{nullptr};
};

namespace {

// Every live handle, and the count of handles released: a thread that found a handle
// live keeps it as valid until the count moves.
std::mutex g_live_mu;
std::atomic<uint64_t> g_live_generation{0};
std::unordered_set<tesseraComm*>& Live() {
  static auto* live = new std::unordered_set<tesseraComm*>();
  return *live;
}

std::vector<HazardSlot*>& Slots() {  // every thread's, under g_live_mu
  static auto* slots = new std::vector<HazardSlot*>();
  return *slots;
}

void ReleaseSlot(void* slot);

// This thread's slot and the handle it last found live. Plain data, so every call reads
// it with one look-up and no initialisation guard; the slot, made at the thread's first
// call, is unregistered at its exit by a pthread key's destructor (which runs after C++
// thread-local destructors, so a call from one of those still finds it).
struct ThreadSlot {
  HazardSlot* slot;
  const tesseraComm* valid;  // the handle last found live, at generation `generation`
  uint64_t generation;
};
thread_local ThreadSlot t_slot = {nullptr, nullptr, 0};

HazardSlot* SlotOf(ThreadSlot* mine) {
  if (mine->slot != nullptr) return mine->slot;
  static pthread_key_t key;
  static const bool keyed = pthread_key_create(&key, &ReleaseSlot) == 0;  // else the slot outlives the thread
  mine->slot = new HazardSlot;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    Slots().push_back(mine->slot);
  }
  if (keyed) pthread_setspecific(key, mine->slot);
  return mine->slot;
}

void ReleaseSlot(void* slot) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    auto& all = Slots();
    all.erase(std::find(all.begin(), all.end(), slot));
  }
  t_slot.slot = nullptr;
  delete static_cast<HazardSlot*>(slot);
}

// Whether a call is in progress on `comm` in some thread; under g_live_mu.
bool InUse(tesseraComm* comm) {
  if (comm->active_calls.load() != 0) return true;
  for (const HazardSlot* slot : Slots()) {
    if (slot->comm.load(std::memory_order_seq_cst) == comm) return true;
  }
  return false;
}

}  // namespace

// The usual case costs one exchange: the handle goes into this thread's slot, then
// counts as live while no handle was released since this thread last found it live
// (Release bumps the generation before it looks at the slots, so one of the two sees the
// other). Otherwise the live set is asked under its lock. A thread's second handle at
// once (a group over several communicators) is counted in the handle's active_calls
// under the lock instead.
CallGuard::CallGuard(tesseraComm* comm) {
  if (comm == nullptr) return;
  ThreadSlot& mine = t_slot;  // one look-up of the thread's storage
  HazardSlot* slot = SlotOf(&mine);
  const bool published = slot->comm.load(std::memory_order_relaxed) == nullptr;  // else a group's second handle
  if (published) {
    slot->comm.store(comm, std::memory_order_seq_cst);
    if (mine.valid == comm && mine.generation == g_live_generation.load(std::memory_order_seq_cst)) {
      comm_ = comm;
      slot_ = slot;
      return;
    }
  }
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (Live().count(comm) == 0) {
    if (published) slot->comm.store(nullptr, std::memory_order_release);
    return;
  }
  comm_ = comm;
  if (!published) {
    comm_->active_calls.fetch_add(1);
    return;
  }
  slot_ = slot;
  mine.valid = comm;
  mine.generation = g_live_generation.load(std::memory_order_relaxed);
}

CallGuard::~CallGuard() {
  if (slot_ != nullptr) {
    slot_->comm.store(nullptr, std::memory_order_release);
  } else if (comm_ != nullptr) {
    comm_->active_calls.fetch_sub(1);
  }
}

tesseraComm* NewHandle(int rank, int nranks, const char* name, const Settings& settings) {
  auto* handle = new tesseraComm(settings);
  handle->rank = rank;
  handle->nranks = nranks;
  if (name != nullptr) handle->name = name;
  std::lock_guard<std::mutex> lock(g_live_mu);
  Live().insert(handle);
  return handle;
}

void DiscardHandle(tesseraComm* handle) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    Live().erase(handle);
    g_live_generation.fetch_add(1, std::memory_order_seq_cst);
  }
  delete handle;
}

Status ReleaseHandle(tesseraComm* comm, bool abort) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (comm == nullptr || Live().erase(comm) == 0) return CheckCommHandle(comm, nullptr);
    g_live_generation.fetch_add(1, std::memory_order_seq_cst);
  }
  if (abort) comm->Abort();
  // Calls already inside (only possible from other threads) notice the abort flag
  // within a sleep slice; without abort they are the caller's misuse and still finish
  // within their own timeout. They read comm->worker (to post to it, or to wait for
  // it), so it is destroyed only once they have left: resetting it while another
  // thread's tesseraAllReduce posts to it is a use after free.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      if (!InUse(comm)) break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  comm->worker.reset();  // finishes (or, aborted, quickly fails) what was queued
  delete comm;
  return Status::Ok();
}

}  // namespace tessera
