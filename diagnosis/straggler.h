// Stragglers: the rank that the others keep waiting for while the job runs, before
// anything times out (docs/diagnosis.md#stragglers).
//
// Every rank keeps, for each collective, its own account (CallTiming): how long it
// stalled waiting for peers (a wait that lasted past the spin budget, from the last
// progress to the next) and on whom. The rank that arrived last finds its peers' data
// ready and stalls least; the others stall for about as long as it was late. So, for
// one call, from every rank's account:
//  - the lag is the longest stall less the shortest (durations, which ranks on
//    different hosts can compare; their clocks are never compared);
//  - the last to arrive is the rank that stalled least; where several stalled about as
//    little and all share a host, the one that began the call latest (one host's ranks
//    share a clock);
//  - its waiters are the ranks that stalled for at least half the lag.
// Over a sliding window of calls, a rank that arrived last in at least a share of them
// (TESSERA_STRAGGLER_WINDOW, TESSERA_STRAGGLER_SHARE) is the straggler.
//
// Pure functions and a value type: the judge (straggler_judge.h) feeds them.
#ifndef TESSERA_DIAGNOSIS_STRAGGLER_H_
#define TESSERA_DIAGNOSIS_STRAGGLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace tessera {

// One rank's account of one collective.
struct CallTiming {
  uint32_t seq = 0;         // the collective's sequence number (CallStamp::seq, from 1)
  uint8_t kind = 0;         // its OpKind
  int32_t waited_on = -1;   // the first peer it stalled on last; -1: it did not stall
  uint32_t stalled_us = 0;  // time stalled on peers
  int64_t began_us = 0;     // NowMicros' clock of its host (ranks of one host compare it)
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

// From `timings[r]`, rank r's account of one call (every rank's, of the same call), and
// `host_of[r]`, its host's index.
LastArrival JudgeCall(const std::vector<CallTiming>& timings, const std::vector<int>& host_of);

// The verdict of a window.
struct StragglerVerdict {
  int32_t rank = -1;             // the straggler; -1: none
  uint32_t window_calls = 0;     // calls judged in the window
  uint32_t last_calls = 0;       // of which `rank` arrived last in
  int64_t median_lag_us = 0;     // over those, how much after the first
  std::vector<int32_t> waiters;  // ranks that waited on it in at least half of them

  bool named() const { return rank >= 0; }
};

// "rank 5 (pid 4242, host b) arrived last in 91% of the last 1000 collectives, a median
// of 38.2 ms after the first; ranks 0-4, 6, 7 waited on it", or "" when none is named.
std::string StragglerText(const StragglerVerdict& v, const std::vector<int>& pids,
                          const std::vector<std::string>& hosts);
// "0-4, 6, 7"
std::string RankRanges(const std::vector<int32_t>& ranks);

// The last `window` judged calls, and who among them is the straggler. A verdict needs
// at least kMinVerdictCalls calls (or the whole window, if smaller).
class StragglerWindow {
 public:
  static constexpr size_t kMinVerdictCalls = 50;
  StragglerWindow(size_t window, int share_percent, int nranks);
  void Add(const LastArrival& call);
  StragglerVerdict Verdict() const;
  size_t calls() const { return calls_.size(); }

 private:
  size_t window_;
  int share_percent_;
  std::deque<LastArrival> calls_;
  std::vector<uint32_t> last_count_;  // by rank, over calls_
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_STRAGGLER_H_
