// The choice measured in the job (TESSERA_AUTOTUNE=1). For each collective and size it
// meets, the executor runs the contenders (collectives/algorithms.h: Contenders) in
// turns of TESSERA_AUTOTUNE_TURN_CALLS calls, kRounds turns each, and every rank times
// the second half of each turn; then the ranks agree on the slowest rank's time
// of every turn (a max-allreduce of the table) and each takes, from the same table,
// the contender of the smallest median turn. Every rank so runs the same algorithm in
// every call: the sequence of calls, and so each size's count of calls, is the same
// on every rank. Horovod's HOROVOD_AUTOTUNE measures its fusion
// settings in the job the same way; here it is the schedule, where the cost model's
// formulas cannot tell schedules apart (docs/algorithms.md#measured-in-the-job).
#ifndef TESSERA_COMM_CHOICE_TUNER_H_
#define TESSERA_COMM_CHOICE_TUNER_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/algorithms.h"
#include "collectives/collective.h"
#include "transport/progress_policy.h"

namespace tessera {

// Next and Record on the thread that runs the communicator's calls; Winner on any
// (tesseraAllReduceAlgorithm may be asked from another thread).
class ChoiceTuner {
 public:
  explicit ChoiceTuner(int turn_calls) : turn_calls_(turn_calls) {}

  static constexpr int kRounds = 5;  // turns of each contender
  // A turn is `turn_calls` calls (TESSERA_AUTOTUNE_TURN_CALLS), its first half not
  // counted: ranks leave a schedule at different times (hierarchical_leader's leaders
  // last), and the next one's first calls pay for it; a link shaped by a token bucket
  // lets a burst through at once, and a schedule that sends more than the link's rate
  // gets a turn's first calls at the bucket's expense, so a short turn times the bucket
  // rather than the schedule. A turn counts as a whole: the median of single calls
  // favours a schedule whose calls run fast while its peers are still in the last one.
  // Each contender's calls also keep their own state of the waits' polling
  // (ProgressPolicy::State), as a communicator running it alone would: a contender
  // that made yields run late stops yielding for 100 ms, and the next one, inheriting
  // that, would be timed several times slower than it runs alone. Starting every turn
  // afresh instead would keep a contender from the state it settles in alone.
  static constexpr size_t kMaxSizes = 64;  // sizes measured; later ones keep the model's choice

  // What one call runs: a contender (`size` >= 0: its time is recorded), the size's
  // winner (`size` -1), or the model's choice (`algorithm` null: not measured).
  struct Pick {
    const AlgorithmInfo* algorithm = nullptr;
    int size = -1;
    int contender = -1;  // of the size's, when measured
  };

  // What this call of `c` on `bytes` (PredictedBytes) runs.
  Pick Next(OpKind c, size_t bytes, const CostModel& m, const Shape& s);
  // The winner for `c` on `bytes`, or null while undecided or not measured.
  const AlgorithmInfo* Winner(OpKind c, size_t bytes) const;
  // Records this rank's time for the call Next returned `pick` for; after the size's
  // last call, agrees with every rank over `ctx` and decides. `decided` (may be null)
  // gets the decision's text when it was made in this call.
  Status Record(const Pick& pick, double seconds, const CollectiveContext& ctx, std::string* decided);
  // The sizes decided so far, as measured choices (TESSERA_ALGO_TABLE rows) of the
  // layout of `s` (none where hosts differ in their rank counts: rows cannot say so).
  std::vector<MeasuredChoice> Decided(const Shape& s) const;
  // The polling state of the contender `pick` runs (a measured pick's only): taken up
  // before its call and set aside after it.
  ProgressPolicy::State* PolicyOf(const Pick& pick);

 private:
  struct Size {
    OpKind collective;
    size_t bytes;
    std::vector<const AlgorithmInfo*> contenders;
    int calls = 0;                // turn t = calls / turn_calls_ ran contender t % contenders.size()
    std::vector<double> turns;    // each turn's counted seconds (contenders x kRounds)
    std::vector<ProgressPolicy::State> policy;  // by contender
    const AlgorithmInfo* winner = nullptr;
  };
  Status Decide(Size* size, const CollectiveContext& ctx, std::string* decided);
  int uncounted() const { return turn_calls_ / 2; }  // the first calls of each turn

  const int turn_calls_;
  // Written only by the calls' thread, under mu_ where Winner could see it change (a
  // size added, a winner set); that thread reads without it.
  mutable std::mutex mu_;
  std::vector<Size> sizes_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_CHOICE_TUNER_H_
