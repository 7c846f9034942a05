// Rank arithmetic of recursive doubling for any number of ranks, as pure functions
// (tested alone). See recursive_doubling_allreduce.cc for the schedule.
#ifndef TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_
#define TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_

namespace tessera {

struct RecursiveDoublingPlan {
  int pof2 = 1;          // largest power of two <= nranks
  int rem = 0;           // nranks - pof2
  int rounds = 0;        // lg pof2, for ranks that take part; 0 for those folded away
  int new_rank = -1;     // rank among the pof2 that take part, -1 if folded away
  int fold_partner = -1; // the rank paired with before and after the rounds, or -1
};

inline RecursiveDoublingPlan PlanRecursiveDoubling(int rank, int nranks) {
  RecursiveDoublingPlan plan;
  while (plan.pof2 * 2 <= nranks) plan.pof2 *= 2;
  plan.rem = nranks - plan.pof2;
  if (rank < 2 * plan.rem) {
    plan.fold_partner = rank % 2 == 0 ? rank + 1 : rank - 1;
    plan.new_rank = rank % 2 == 0 ? -1 : rank / 2;
  } else {
    plan.new_rank = rank - plan.rem;
  }
  if (plan.new_rank >= 0) {
    for (int m = 1; m < plan.pof2; m *= 2) ++plan.rounds;
  }
  return plan;
}

// The real rank of `new_rank` (a participant's number among the pof2).
inline int RecursiveDoublingRealRank(const RecursiveDoublingPlan& plan, int new_rank) {
  return new_rank < plan.rem ? new_rank * 2 + 1 : new_rank + plan.rem;
}

inline int RecursiveDoublingPartner(const RecursiveDoublingPlan& plan, int round) {
  return RecursiveDoublingRealRank(plan, plan.new_rank ^ (1 << round));
}

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_
