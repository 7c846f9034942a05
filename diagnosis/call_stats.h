// CallStats: what a communicator's calls have done so far, by kind, for the health
// snapshot and the metrics page (health.h): calls, failures, bytes, and how long they
// took as a histogram. The thread that runs the calls writes it (a CallObserver, one
// call at a time: no read-modify-write, only relaxed stores of its own counters); any
// thread reads a snapshot (each counter is itself, not one consistent instant).
//
// A call's time is read on the tick clock the executor stamps calls with
// (CoarseNowMicros: within a tick, 1-4 ms): one call's time is coarse, a sum over many
// is not biased.
#ifndef TESSERA_DIAGNOSIS_CALL_STATS_H_
#define TESSERA_DIAGNOSIS_CALL_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "base/call_observer.h"
#include "base/types.h"

namespace tessera {

// The kinds calls are counted by: the collectives (OpKind), then groups of sends and
// receives.
constexpr int kCallKinds = kNumCollectives + 1;
const char* CallKindName(int kind);  // "allreduce", ..., "scatter", "send/recv"

// The histogram's upper bounds, in microseconds (then +Inf).
constexpr std::array<int64_t, 7> kCallTimeBoundsUs = {1000, 4000, 16000, 64000, 256000, 1024000, 4096000};
constexpr size_t kCallTimeBuckets = kCallTimeBoundsUs.size() + 1;

struct CallCounts {
  uint64_t calls = 0;     // ended (done or failed)
  uint64_t failures = 0;
  uint64_t bytes = 0;     // this rank's input bytes of the calls done
  int64_t time_us = 0;    // their time, summed
  std::array<uint64_t, kCallTimeBuckets> buckets{};  // calls by time, not cumulative
};

class CallStats : public CallObserver {
 public:
  void CallBegan(const CallRecord& call, int64_t now_us) override;
  void AlgorithmChosen(OpKind, const char*) override {}
  void CallEnded(CallOutcome outcome, int64_t now_us) override;

  CallCounts Counts(int kind) const;

 private:
  struct Counters {
    std::atomic<uint64_t> calls{0}, failures{0}, bytes{0};
    std::atomic<int64_t> time_us{0};
    std::array<std::atomic<uint64_t>, kCallTimeBuckets> buckets{};
  };
  std::array<Counters, kCallKinds> kinds_;
  // The running call (the writer's own).
  int kind_ = 0;
  uint64_t bytes_ = 0;
  int64_t began_us_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_CALL_STATS_H_
