// Rank arithmetic of recursive doubling for any number of ranks, as pure functions
// (tested alone). See recursive_doubling_allreduce.cc for the schedule.
#ifndef TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_
#define TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_

#include <algorithm>
#include <vector>

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

// The order in which recursive halving visits the rounds (bits of new_rank): nearest
// partners first, so that the large halves stay inside hosts, then inside racks, and
// only the small ones travel far. Rounds whose partners share a host come first; the
// others by the mean distance between the partners' hosts (hosts are numbered in rank
// order, and a fabric's racks are runs of consecutive hosts, topology/fabric.h), the
// nearest first; a tie keeps the classic order, the largest distance first.
// host_of_rank[real rank] names each rank's host; null (hosts unknown) keeps the classic
// order. The result depends only on (plan.pof2, plan.rem, host_of_rank), so every rank
// computes the same order. The allgather that undoes the halving runs it backwards.
inline std::vector<int> HalvingOrder(const RecursiveDoublingPlan& plan, const std::vector<int>* host_of_rank) {
  int bits = 0;
  while ((1 << bits) < plan.pof2) ++bits;
  std::vector<int> order;
  std::vector<int> same_host(bits, 0);        // pairs along each bit that share a host
  std::vector<double> host_distance(bits, 0);  // summed over the pairs along each bit
  for (int b = bits - 1; b >= 0; --b) {
    order.push_back(b);
    if (host_of_rank == nullptr) continue;
    for (int i = 0; i < plan.pof2; ++i) {
      const int j = i ^ (1 << b);
      if (i > j) continue;
      const int ri = i < plan.rem ? i * 2 + 1 : i + plan.rem;
      const int rj = j < plan.rem ? j * 2 + 1 : j + plan.rem;
      const int hi = (*host_of_rank)[ri], hj = (*host_of_rank)[rj];
      if (hi == hj) ++same_host[b];
      host_distance[b] += hi > hj ? hi - hj : hj - hi;
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (same_host[a] != same_host[b]) return same_host[a] > same_host[b];
    return host_distance[a] < host_distance[b];
  });
  return order;
}

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_PATTERN_H_
