#ifndef TESSERA_TRANSPORT_PROGRESS_POLICY_H_
#define TESSERA_TRANSPORT_PROGRESS_POLICY_H_

// How a rank waits for its peers inside an exchange: it polls its links for a budget of
// microseconds after the last progress, then sleeps in the kernel (futex or poll) until
// a link can move. Polling either pauses the CPU between polls, yielding the core now
// and then once a wait is 20 us old (the ranks fit their cores), or yields the core at
// each poll (the ranks on this kernel outnumber its cores: the peer it waits for may be
// queued on this very core; the communicator counts the ranks of hosts emulated on the
// same kernel too).
//
// The budget is long enough (2 ms by default, below a scheduler slice) to keep two
// ranks whose cores are shared with other work in step: a rank that sleeps while its
// peer is descheduled for part of a slice loses its own turn for milliseconds, a
// thousand times a small call's polling. Budgets that adapt to recent waits (sleeping
// at once after long waits) fall into that state and stay there; a rank blocked for a
// second burns one budget of it, 0.2%.
//
// A yield that comes back a slice late, while the kernel has more tasks runnable than
// the ranks that share it, means another process held the core; where most recent
// yields do, each poll costs a slice, so the policy stops yielding for a while. A late
// yield with no more tasks runnable than ranks handed the core to a rank that had work
// (the peer it waits for, reducing or still creating the communicator): yielding is
// right there, and stopping would leave that rank waiting a slice for the core.
//
// Not thread-safe: one per communicator, used by the thread running its collectives.

#include <cstdint>

namespace tessera {

enum class PollMode : uint8_t { kRelax, kYield };

struct ProgressSettings {
  PollMode mode = PollMode::kRelax;
  int64_t spin_us = 0;  // how long a wait polls before sleeping
  // The ranks whose processes share this kernel (0: unknown; then every late yield is
  // taken for another process's).
  int kernel_ranks = 0;
};

// How many tasks the kernel has runnable now (/proc/loadavg), or -1 where it cannot say.
int RunnableTasks();

class ProgressPolicy {
 public:
  explicit ProgressPolicy(const ProgressSettings& s) : s_(s) {}

  // How long a wait polls before sleeping.
  int64_t budget_us() const { return s_.spin_us; }
  // Whether the ranks outnumber the cores (polls yield): a rank waiting for a peer then
  // waits for it to get a core.
  bool crowded() const { return s_.mode == PollMode::kYield; }
  // Whether each poll yields the core (else it pauses the CPU, yielding now and then);
  // now_us on NowMicros' clock.
  bool Yields(int64_t now_us) const { return s_.mode == PollMode::kYield && now_us >= no_yield_until_us_; }
  // One sched_yield returned after `took_us`; a late one asks `runnable` (RunnableTasks
  // but in tests) whether more tasks than ranks want the kernel's cores.
  void YieldTook(int64_t took_us, int64_t now_us, int (*runnable)() = RunnableTasks);
  // What the yields so far said, set aside while other schedules run and taken up
  // again (comm/choice_tuner.h: each contender's calls continue their own state, as in
  // a communicator that runs that schedule alone). A pause in yielding keeps what was
  // left of it.
  struct State {
    int late_share = 0;
    int64_t no_yield_left_us = 0;
  };
  State Save(int64_t now_us) const {
    return State{late_share_, no_yield_until_us_ > now_us ? no_yield_until_us_ - now_us : 0};
  }
  void Resume(const State& state, int64_t now_us) {
    late_share_ = state.late_share;
    no_yield_until_us_ = state.no_yield_left_us > 0 ? now_us + state.no_yield_left_us : 0;
  }

  // A yield longer than this ran someone else's slice.
  static constexpr int64_t kLateYieldUs = 200;
  // Above this share of late yields (of 256), yielding stops for kNoYieldUs.
  static constexpr int kStopYieldingShare = 128;
  static constexpr int64_t kNoYieldUs = 100000;

 private:
  ProgressSettings s_;
  int late_share_ = 0;  // moving average of (yield > kLateYieldUs beside other work), 0..256
  int64_t no_yield_until_us_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_PROGRESS_POLICY_H_
