// Sleeping without missing a wake-up: futex on the rank's doorbell, poll on sockets.
#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "transport/transport.h"

namespace tessera {
namespace {

long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, timeout, nullptr, 0);
}

timespec ToTimespec(int64_t us) {
  timespec ts;
  ts.tv_sec = us / 1000000;
  ts.tv_nsec = (us % 1000000) * 1000;
  return ts;
}

// With both sockets and a doorbell to watch, poll in short slices so a ring is noticed.
constexpr int64_t kMixedSliceUs = 200;

}  // namespace

// The publisher has stored its data (head or tail) before calling Ring. The fence
// orders that store before the load of `sleepers`; the sleeper increments `sleepers`
// (a full barrier) before re-checking for data. So either the sleeper's re-check sees
// the data, or this load sees the sleeper and the bell changes under its futex wait.
// A rank that nobody waits for costs a fence and a read of a line that rarely changes,
// instead of a locked increment of a line the two processes would keep stealing.
void Doorbell::Ring() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) {
    bell.fetch_add(1, std::memory_order_seq_cst);
    Futex(&bell, FUTEX_WAKE, INT32_MAX, nullptr);
  }
}

uint32_t WaitSet::Announce() {
  if (doorbell_ == nullptr) return 0;
  doorbell_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  return doorbell_->bell.load(std::memory_order_seq_cst);
}

void WaitSet::Retire() {
  if (doorbell_ != nullptr) doorbell_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void WaitSet::Sleep(uint32_t token, int64_t max_us) {
  if (max_us <= 0) return;
  if (fds_.empty() && doorbell_ == nullptr) {
    timespec ts = ToTimespec(max_us);
    nanosleep(&ts, nullptr);
    return;
  }
  if (fds_.empty()) {
    timespec ts = ToTimespec(max_us);
    Futex(&doorbell_->bell, FUTEX_WAIT, token, &ts);  // returns at once if the bell rang
    return;
  }
  if (doorbell_ != nullptr) {
    if (doorbell_->bell.load(std::memory_order_seq_cst) != token) return;
    max_us = std::min(max_us, kMixedSliceUs);
  }
  timespec ts = ToTimespec(max_us);
  ppoll(fds_.data(), fds_.size(), &ts, nullptr);
}

}  // namespace tessera
