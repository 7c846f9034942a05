// Sleeping without missing a wake-up: futex on a wake-up word, poll on sockets.
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

// With both sockets and a wake-up word to watch, poll in short slices so a ring is noticed.
constexpr int64_t kMixedSliceUs = 200;

}  // namespace

uint32_t WaitSet::Announce() {
  if (bell_ == nullptr) return 0;
  sleepers_->fetch_add(1, std::memory_order_seq_cst);
  return bell_->load(std::memory_order_seq_cst);
}

void WaitSet::Retire() {
  if (bell_ != nullptr) sleepers_->fetch_sub(1, std::memory_order_seq_cst);
}

void WaitSet::Sleep(uint32_t token, int64_t max_us) {
  if (max_us <= 0) return;
  if (fds_.empty() && bell_ == nullptr) {
    timespec ts = ToTimespec(max_us);
    nanosleep(&ts, nullptr);
    return;
  }
  if (fds_.empty()) {
    timespec ts = ToTimespec(max_us);
    Futex(bell_, FUTEX_WAIT, token, &ts);  // returns at once if the bell rang
    return;
  }
  if (bell_ != nullptr) {
    if (bell_->load(std::memory_order_seq_cst) != token) return;
    max_us = std::min(max_us, kMixedSliceUs);
  }
  timespec ts = ToTimespec(max_us);
  ppoll(fds_.data(), fds_.size(), &ts, nullptr);
}

}  // namespace tessera
