// Deadline: a point on the monotonic clock that bounds a wait. Every blocking call in
// tessera takes one, so no wait is unbounded.
#ifndef TESSERA_BASE_DEADLINE_H_
#define TESSERA_BASE_DEADLINE_H_

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace tessera {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline AfterMs(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  // `ms` after `now_us`, a NowMicros() the caller already read.
  static Deadline AfterMsFrom(int64_t now_us, int64_t ms) {
    return Deadline(Clock::time_point(std::chrono::microseconds(now_us) + std::chrono::milliseconds(ms)));
  }
  // Already passed, without reading the clock (the clock's epoch): for defaults that
  // every user replaces.
  static Deadline Past() { return Deadline(Clock::time_point()); }
  explicit Deadline(Clock::time_point when) : when_(when) {}

  bool Expired() const { return Clock::now() >= when_; }
  // Milliseconds left, clamped to [0, cap_ms]; rounds up so a poll() never spins at 0.
  int RemainingMs(int64_t cap_ms = 1 << 30) const {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(when_ - Clock::now()).count();
    if (left <= 0) return 0;
    return static_cast<int>(std::min<int64_t>((left + 999) / 1000, cap_ms));
  }
  Clock::time_point when() const { return when_; }

 private:
  Clock::time_point when_;
};

inline int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// NowMicros at the kernel's last tick (CLOCK_MONOTONIC_COARSE: the same clock, at most
// a tick, 1-4 ms, behind): 3 ns a read against 20 ns. For what every call stamps
// (its deadline, its flight record and activity), read in milliseconds.
inline int64_t CoarseNowMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace tessera

#endif  // TESSERA_BASE_DEADLINE_H_
