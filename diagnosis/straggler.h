// Stragglers: the rank that the others keep waiting for while the job runs, before
// anything times out (docs/diagnosis.md#stragglers).
//
// Every rank keeps its own account (CallTiming) of each collective in which it stalled
// waiting for peers (a wait past the spin budget, from the last progress to the next)
// for kMinLagUs or more: how long, on whom. A call a rank has no account of, it stalled
// less in. The rank that arrived last finds its peers' data ready and stalls least; the
// others stall for about as long as it was late. So, for one call, from every rank's
// account:
//  - the lag is the longest stall less the shortest (durations, which ranks on
//    different hosts can compare; their clocks are never compared);
//  - the last to arrive is the rank that stalled least; where several stalled about as
//    little and all share a host, the one that began the call latest (one host's ranks
//    share a clock); where the least stalled of different hosts tie (stalls under
//    kMinLagUs leave no account, so they tie), nobody;
//  - its waiters are the ranks that stalled for at least half the lag.
// Over a sliding window of the last TESSERA_STRAGGLER_WINDOW calls, a rank that arrived
// last in kMinLateCalls or more of them is the straggler when either
//  - it arrived last in TESSERA_STRAGGLER_SHARE percent of the window's calls (late at
//    every step) and is the rank the others waited on most, or
//  - over a whole window that spans a second or more (kMinCostSpanUs: shorter ones are
//    a scheduler's hiccups), the others' waiting on it is that share of all their
//    waiting on late ranks, twice their waiting on any other rank, and at least
//    kMinCostPercent of the window's time
//    (late now and then, by much), and it stands out from chance: it arrived last in
//    three standard deviations more calls than an even split of the late calls, or its
//    waiting median (the lag at which half the waiting on it was spent) is four times
//    the other late calls' (a plain median would drown a rank stopped 200 ms every
//    second in the few-millisecond calls that busy cores make every rank late in).
//
// Pure functions and value types: the judge (straggler_judge.h) feeds them.
#ifndef TESSERA_DIAGNOSIS_STRAGGLER_H_
#define TESSERA_DIAGNOSIS_STRAGGLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace tessera {

// One rank's account of one collective it stalled in.
struct CallTiming {
  uint32_t seq = 0;         // the collective's sequence number (CallStamp::seq, from 1)
  uint8_t kind = 0;         // its OpKind
  int32_t waited_on = -1;   // the first peer it stalled on last
  uint32_t stalled_us = 0;  // time stalled on peers
  int64_t began_us = 0;     // NowMicros' clock of its host (ranks of one host compare it)
};

// A rank's accounts as the judge receives them: every call from covered_from to
// last_seq in which the rank stalled kMinLagUs or more is among `stalls` (ascending).
struct RankTimings {
  uint32_t last_seq = 0;       // the last collective done on the rank
  uint32_t covered_from = 1;
  std::vector<CallTiming> stalls;
};

// Stalls shorter than this are noise (a scheduler's hiccup), not a late rank.
constexpr int64_t kMinLagUs = 1000;

// Who arrived last in one call.
struct LastArrival {
  uint32_t seq = 0;
  int32_t rank = -1;             // -1: nobody was late by kMinLagUs
  int64_t lag_us = 0;            // how much after the first
  std::vector<int32_t> waiters;  // the ranks that waited on it
};

// Call `seq` from `timings[r]`, rank r's account of it (stalled_us 0 where it has none),
// and `host_of[r]`, its host's index.
LastArrival JudgeCall(uint32_t seq, const std::vector<CallTiming>& timings, const std::vector<int>& host_of);

// The verdict of a window.
struct StragglerVerdict {
  int32_t rank = -1;             // the straggler; -1: none
  uint32_t window_calls = 0;     // calls in the window
  uint32_t last_calls = 0;       // of which `rank` arrived last in (by kMinLagUs or more)
  int64_t median_lag_us = 0;     // over those, how much after the first
  uint32_t wait_permille = 0;    // of the waiting on late ranks, the share on it
  uint32_t cost_permille = 0;    // that waiting, over the window's time
  std::vector<int32_t> waiters;  // ranks that waited on it in at least half of its calls

  bool named() const { return rank >= 0; }
};

// "rank 5 (pid 4242, host b) arrived last in 910 of the last 1000 collectives, a median
// of 38.2 ms after the first (97% of the waiting on late ranks, 35% of the time); ranks
// 0-4, 6, 7 waited on it", or "" when none is named.
std::string StragglerText(const StragglerVerdict& v, const std::vector<int>& pids,
                          const std::vector<std::string>& hosts);
// "0-4, 6, 7"
std::string RankRanges(const std::vector<int32_t>& ranks);

// The last `window` calls and who among them is the straggler. Calls are added in
// order; those in which nobody was late are only counted (Advance).
class StragglerWindow {
 public:
  static constexpr size_t kMinVerdictCalls = 50;  // or the whole window, if smaller
  static constexpr uint32_t kMinLateCalls = 5;
  static constexpr int kMinCostPercent = 10;
  static constexpr int64_t kMinCostSpanUs = 1000000;  // a window by time spans a second
  StragglerWindow(size_t window, int share_percent, int nranks);
  // A call in which someone was late (its seq above every earlier one's).
  void Add(const LastArrival& call);
  // Calls `from` to `to` are judged (the first Advance says where the window starts),
  // at `now_us` (the judge's clock).
  void Advance(uint32_t from, uint32_t to, int64_t now_us);
  StragglerVerdict Verdict() const;
  uint32_t calls() const;

 private:
  bool StandsOut(int r, const std::vector<uint32_t>& late, const std::vector<int64_t>& lags_r,
                 const std::vector<int64_t>& lags_others) const;
  size_t window_;
  int share_percent_;
  int nranks_;
  uint32_t first_ = 0, newest_ = 0;  // the first and the last call judged
  std::deque<LastArrival> late_;     // the window's calls in which someone was late
  std::deque<std::pair<int64_t, uint32_t>> judged_at_;  // (when, seq) of each Advance
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_STRAGGLER_H_
