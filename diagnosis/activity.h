// Activity: what one rank of a communicator is doing, for diagnosis. The thread that
// runs the communicator's calls writes it (BeginCall, EndCall, and, through the
// exchange engine, Waiting); the watch service (watch.h) reads snapshots of it from its
// own thread to answer peers, even while the calls' thread is blocked or outside
// tessera. All methods are thread-safe; the calls' thread takes an uncontended lock
// twice per call.
#ifndef TESSERA_DIAGNOSIS_ACTIVITY_H_
#define TESSERA_DIAGNOSIS_ACTIVITY_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/call_stamp.h"
#include "base/deadline.h"
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

class Activity : public ExchangeObserver {
 public:
  Activity();
  // `now_us`: NowMicros(), passed where the caller has just read it.
  void BeginCall(const CallStamp& call, int64_t now_us = NowMicros());
  void EndCall(bool ok, int64_t now_us = NowMicros());
  // ExchangeObserver: the running call's exchange is about to sleep.
  void Waiting(const int* peers, size_t count, int64_t last_progress_us) override;
  // The communicator broke; a verdict given later (SetVerdict) is what peers adopt.
  void Break();
  void SetVerdict(const std::string& verdict, const std::vector<int32_t>& culprits);
  ActivitySnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  ActivitySnapshot::State state_ = ActivitySnapshot::State::kIdle;
  CallStamp call_;
  uint32_t last_done_seq_ = 0;
  int64_t state_since_us_ = 0;       // NowMicros when the state began
  int64_t last_progress_us_ = -1;    // from the exchange; -1: the call has not waited
  std::vector<int32_t> waiting_on_;
  std::string verdict_;
  std::vector<int32_t> culprits_;
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_ACTIVITY_H_
