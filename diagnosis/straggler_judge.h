// StragglerJudge: the thread that names a communicator's straggler while the job runs
// (docs/diagnosis.md#stragglers). It runs on one rank (the communicator's rank 0).
// Every period it asks every rank's watch service for its CallTimings (watch.h,
// kTimings; its own from its Activity), handing each rank the verdict so far; judges
// each collective that every rank has accounted for (straggler.h: JudgeCall) into a
// sliding window (StragglerWindow); and logs at WARN when a straggler is first named
// and when it no longer is. A rank that does not answer in time (stopped, busy) is
// asked again next period: its ring holds its last Activity::kTimingSlots calls, and a
// call that can no longer be completed is dropped unjudged.
//
// The ranks learn the verdict one period late (with the next request); the judge at once.
#ifndef TESSERA_DIAGNOSIS_STRAGGLER_JUDGE_H_
#define TESSERA_DIAGNOSIS_STRAGGLER_JUDGE_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "diagnosis/activity.h"
#include "diagnosis/diagnose.h"
#include "diagnosis/straggler.h"

namespace tessera {

struct StragglerOptions {
  size_t window = 1000;         // TESSERA_STRAGGLER_WINDOW
  int share_percent = 50;       // TESSERA_STRAGGLER_SHARE
  int64_t period_ms = 1000;     // TESSERA_STRAGGLER_PERIOD_MS
  LogLevel log_level = LogLevel::kWarn;
};

// The judging itself, without the thread and the network (tested alone): every rank's
// accounts, round after round, into the window. A call is judged once every rank has
// answered past it; a call that a rank's ring no longer covered when it answered (it
// was silent for long) counts as one nobody was late in.
class StragglerCourt {
 public:
  StragglerCourt(const std::vector<std::string>& hosts, const StragglerOptions& options);
  // One round's answers at `now_us` (the judge's clock): accounts[r] where answered[r].
  void Hear(const std::vector<RankTimings>& accounts, const std::vector<bool>& answered, int64_t now_us);
  StragglerVerdict Verdict() const { return window_.Verdict(); }
  uint32_t judged() const { return judged_; }  // every call up to here

 private:
  std::vector<int> host_of_;
  StragglerWindow window_;
  std::vector<bool> heard_;             // by rank: answered at least once
  std::vector<uint32_t> last_seq_;      // by rank, as of its latest answer
  // By rank: the calls between these two its accounts miss (its ring had moved on by
  // the time it answered), else 0, 0.
  std::vector<uint32_t> gap_after_, gap_before_;
  std::map<uint32_t, std::vector<CallTiming>> stalls_;  // calls not judged yet, by rank
  uint32_t judged_ = 0;
};

class StragglerJudge {
 public:
  // Starts the thread. `mine` (this rank's activity) outlives the judge.
  static std::unique_ptr<StragglerJudge> Start(const Membership& who, Activity* mine, const StragglerOptions& options);
  ~StragglerJudge();  // stops and joins the thread
  StragglerJudge(const StragglerJudge&) = delete;
  StragglerJudge& operator=(const StragglerJudge&) = delete;

 private:
  StragglerJudge(const Membership& who, Activity* mine, const StragglerOptions& options);
  void Run();
  void Round();

  Membership who_;
  Activity* mine_;
  StragglerOptions options_;
  StragglerCourt court_;
  StragglerVerdict told_;  // the verdict last logged
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_STRAGGLER_JUDGE_H_
