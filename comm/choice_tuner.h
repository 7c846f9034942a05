// The choice measured in the job (TESSERA_AUTOTUNE=1). For each collective and size it
// meets, the executor runs the contenders (collectives/algorithms.h: Contenders) in
// turns of kTurnCalls calls, kRounds turns each, and every rank times the calls of a
// turn but its first kTurnUncounted; then the ranks agree on the slowest rank's time
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

namespace tessera {

// Next and Record on the thread that runs the communicator's calls; Winner on any
// (tesseraAllReduceAlgorithm may be asked from another thread).
class ChoiceTuner {
 public:
  static constexpr int kRounds = 5;  // turns of each contender
  // Calls in a turn, and how many of its first are not counted: ranks leave a schedule
  // at different times (hierarchical_leader's leaders last), and the next one's first
  // calls pay for it. A turn counts as a whole: on 2x2 emulated hosts (4 ranks on 2
  // cores), medians of single calls, one per turn, put hierarchical_leader (64 us)
  // ahead of recursive doubling (23) at 8 B.
  // Each turn also starts the waits' polling afresh (ProgressPolicy::Restart): a
  // contender that made yields run late stops the next one's yielding for 100 ms, and
  // on 4x2 emulated hosts Rabenseifner then measured 578-700 us a call at 32 KiB
  // against the 255 it takes alone.
  static constexpr int kTurnCalls = 16;
  static constexpr int kTurnUncounted = 4;
  static constexpr size_t kMaxSizes = 64;  // sizes measured; later ones keep the model's choice

  // What one call runs: a contender (`size` >= 0: its time is recorded), the size's
  // winner (`size` -1), or the model's choice (`algorithm` null: not measured).
  struct Pick {
    const AlgorithmInfo* algorithm = nullptr;
    int size = -1;
    bool turn_starts = false;  // the first call of a contender's turn
  };

  // What this call of `c` on `bytes` (PredictedBytes) runs.
  Pick Next(Collective c, size_t bytes, const CostModel& m, const Shape& s);
  // The winner for `c` on `bytes`, or null while undecided or not measured.
  const AlgorithmInfo* Winner(Collective c, size_t bytes) const;
  // Records this rank's time for the call Next returned `pick` for; after the size's
  // last call, agrees with every rank over `ctx` and decides. `decided` (may be null)
  // gets the decision's text when it was made in this call.
  Status Record(const Pick& pick, double seconds, const CollectiveContext& ctx, std::string* decided);
  // The sizes decided so far, as measured choices (TESSERA_ALGO_TABLE rows) of the
  // layout of `s` (none where hosts differ in their rank counts: rows cannot say so).
  std::vector<MeasuredChoice> Decided(const Shape& s) const;

 private:
  struct Size {
    Collective collective;
    size_t bytes;
    std::vector<const AlgorithmInfo*> contenders;
    int calls = 0;                // turn t = calls / kTurnCalls ran contender t % contenders.size()
    std::vector<double> turns;    // each turn's counted seconds (contenders x kRounds)
    const AlgorithmInfo* winner = nullptr;
  };
  Status Decide(Size* size, const CollectiveContext& ctx, std::string* decided);

  // Written only by the calls' thread, under mu_ where Winner could see it change (a
  // size added, a winner set); that thread reads without it.
  mutable std::mutex mu_;
  std::vector<Size> sizes_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_CHOICE_TUNER_H_
