// Activity: what one rank of a communicator is doing, for diagnosis. The thread that
// runs the communicator's calls writes it (as a CallObserver, and, through the exchange
// engine, Waiting and Resumed), one thread at a time (the communicator's run lock); the
// watch service (watch.h) reads snapshots of it from its own thread to answer peers,
// even while the calls' thread is blocked or outside tessera. All methods are
// thread-safe; CallBegan and CallEnded take no lock (the call's state is a seqlock,
// base/seqlock.h): they are on every call's path.
//
// For straggler detection (straggler.h) it also keeps, for each collective in which
// this rank stalled on peers for kMinLagUs or more, its account of it (a CallTiming: how
// long, on whom) in a ring of the last kTimingSlots, the time stalled on each peer so
// far, and the verdict the communicator's judge (straggler_judge.h) last handed out.
#ifndef TESSERA_DIAGNOSIS_ACTIVITY_H_
#define TESSERA_DIAGNOSIS_ACTIVITY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/call_observer.h"
#include "base/call_stamp.h"
#include "base/deadline.h"
#include "base/seqlock.h"
#include "diagnosis/straggler.h"
#include "transport/exchange.h"

namespace tessera {

// One rank's state as peers see it. Times are durations up to when the snapshot was
// taken (clocks of different hosts are never compared).
struct ActivitySnapshot {
  enum class State : uint8_t { kIdle = 0, kInCall = 1, kBroken = 2 };
  State state = State::kIdle;
  CallStamp call;               // the running call, else the last one (seq 0: none yet)
  uint32_t last_done_seq = 0;   // the last collective that completed here
  int64_t in_state_us = 0;      // in this call, or idle, or broken, for this long
  int64_t since_progress_us = -1;  // in a call that waited: since anything last moved
  std::vector<int32_t> waiting_on;  // in a call that waited: the peers it waits for
  // Once this rank has diagnosed a failure: its verdict and the ranks it blames.
  std::string verdict;
  std::vector<int32_t> culprits;
};

const char* ActivityStateName(ActivitySnapshot::State state);  // "idle", "in a call", "broken"

// CallObserver first: the executor calls it on every call (no this-adjusting thunk).
class Activity : public CallObserver, public ExchangeObserver {
 public:
  Activity();
  // CallObserver: in the call from `now_us` (the monotonic clock); out of it when it is
  // done or failed (the last done collective's sequence number moves only when done). A
  // call that breaks the communicator stays current until Break.
  void CallBegan(const CallRecord& call, int64_t now_us) override;
  void AlgorithmChosen(OpKind, const char*) override {}
  void CallEnded(CallOutcome outcome, int64_t now_us) override;
  // ExchangeObserver: the running call's exchange is about to sleep; its stall is over.
  void Waiting(const int* peers, size_t count, int64_t last_progress_us) override;
  void Resumed(int64_t now_us) override;
  // The communicator broke; a verdict given later (SetVerdict) is what peers adopt.
  void Break();
  void SetVerdict(const std::string& verdict, const std::vector<int32_t>& culprits);
  ActivitySnapshot Snapshot() const;

  // --- Straggler detection ----------------------------------------------------------
  static constexpr size_t kTimingSlots = 1024;
  // Before the first call: the communicator's size (the peers stalls are counted on),
  // and whether collectives leave a CallTiming (TESSERA_STRAGGLER_WINDOW > 0).
  void SetRanks(int nranks, bool timings);
  // The CallTimings in the ring, oldest first, and the calls they cover.
  RankTimings Timings() const;
  // Microseconds stalled on each peer so far (index: rank), and in all.
  std::vector<int64_t> PeerStalls() const;
  int64_t Stalled() const { return stalled_total_us_.load(std::memory_order_relaxed); }
  // The judge's latest verdict, as the judge or a peer's request delivered it; when it
  // names another rank than before (or none), `on_change` (set before the watch service
  // and the judge start) is told, on the thread that delivered it.
  void SetStraggler(const StragglerVerdict& verdict);
  StragglerVerdict Straggler() const;
  void OnStragglerChange(std::function<void(const StragglerVerdict&)> on_change) { on_straggler_ = std::move(on_change); }

 private:
  // The call's stall accounting: the writers' own, like running_seq_.
  void EndStall(int64_t now_us);
  void RecordTiming();
  struct TimingSlot {
    SeqLock lock;
    SeqField<uint32_t> seq, stalled_us;
    SeqField<int32_t> waited_on;
    SeqField<uint8_t> kind;
    SeqField<int64_t> began_us;
  };
  // The running call's part, written by CallBegan, CallEnded and Waiting.
  SeqLock call_lock_;
  SeqField<bool> in_call_;
  SeqField<uint64_t> call_words_[3];  // the CallStamp, as 3 words
  SeqField<uint32_t> last_done_seq_;
  SeqField<int64_t> call_since_us_;      // NowMicros when the call, or idleness, began
  SeqField<int64_t> last_progress_us_;  // from the exchange; -1: the call has not waited
  SeqField<uint64_t> calls_;            // calls begun so far: which call waiting_on_ is of
  uint32_t running_seq_ = 0;            // the call's sequence number (the writers' own)
  uint8_t running_kind_ = 0;
  int64_t running_began_us_ = 0;
  bool stalling_ = false;               // Waiting told of a stall not yet Resumed
  int64_t stall_since_us_ = 0;
  std::vector<int> stall_peers_;        // whom the stall waits on
  uint32_t call_stalled_us_ = 0;        // in the running call
  int32_t call_waited_on_ = -1;

  int nranks_ = 0;
  std::unique_ptr<std::atomic<int64_t>[]> peer_stall_us_;  // nranks_ counters (one writer)
  std::atomic<int64_t> stalled_total_us_{0};
  std::unique_ptr<TimingSlot[]> timings_;  // kTimingSlots, or null: no timings
  size_t next_timing_ = 0;
  std::atomic<uint64_t> timings_written_{0};

  mutable std::mutex mu_;  // the rest
  std::atomic<bool> broken_{false};  // for good: the call's part stays as it was
  int64_t broken_since_us_ = 0;
  std::vector<int32_t> waiting_on_;
  uint64_t waiting_call_ = 0;  // calls_ when waiting_on_ was set
  std::string verdict_;
  std::vector<int32_t> culprits_;
  StragglerVerdict straggler_;
  std::function<void(const StragglerVerdict&)> on_straggler_;
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_ACTIVITY_H_
