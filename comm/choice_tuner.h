// The choice measured in the job (TESSERA_AUTOTUNE=1). For each collective and size it
// meets, the executor runs the contenders (collectives/algorithms.h: Contenders) in
// turn, kRounds calls each, timing each call on every rank; then the ranks agree on
// the slowest rank's time of every call (a max-allreduce of the table) and each takes,
// from the same table, the contender of the smallest median. Every rank so runs the
// same algorithm in every call: the sequence of calls, and so each size's count of
// calls, is the same on every rank. Horovod's HOROVOD_AUTOTUNE measures its fusion
// settings in the job the same way; here it is the schedule, where the cost model's
// formulas cannot tell schedules apart (docs/algorithms.md#measured-in-the-job).
#ifndef TESSERA_COMM_CHOICE_TUNER_H_
#define TESSERA_COMM_CHOICE_TUNER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/algorithms.h"
#include "collectives/collective.h"

namespace tessera {

class ChoiceTuner {
 public:
  static constexpr int kRounds = 5;       // calls per contender; the median is taken
  static constexpr size_t kMaxSizes = 64;  // sizes measured; later ones keep the model's choice

  // What one call runs: a contender (`size` >= 0: its time is recorded), the size's
  // winner (`size` -1), or the model's choice (`algorithm` null: not measured).
  struct Pick {
    const AlgorithmInfo* algorithm = nullptr;
    int size = -1;
  };

  // What this call of `c` on `bytes` (PredictedBytes) runs.
  Pick Next(Collective c, size_t bytes, const CostModel& m, const Shape& s);
  // The winner for `c` on `bytes`, or null while undecided or not measured.
  const AlgorithmInfo* Winner(Collective c, size_t bytes) const;
  // Records this rank's time for the call Next returned `pick` for; after the size's
  // last call, agrees with every rank over `ctx` and decides. `decided` (may be null)
  // gets the decision's text when it was made in this call.
  Status Record(const Pick& pick, double seconds, const CollectiveContext& ctx, std::string* decided);

 private:
  struct Size {
    Collective collective;
    size_t bytes;
    std::vector<const AlgorithmInfo*> contenders;
    std::vector<double> seconds;  // call i ran contender i % contenders.size()
    const AlgorithmInfo* winner = nullptr;
  };
  Status Decide(Size* size, const CollectiveContext& ctx, std::string* decided);

  std::vector<Size> sizes_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_CHOICE_TUNER_H_
