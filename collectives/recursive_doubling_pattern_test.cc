// Recursive doubling's rank arithmetic: for every rank count up to 33, simulating the
// schedule on sets of contributions gives every rank every contribution exactly once,
// and partners always agree that they are partners.
#include "collectives/recursive_doubling_pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

TEST(RecursiveDoublingPattern, EveryRankEndsWithEveryContributionOnce) {
  for (int p = 1; p <= 33; ++p) {
    std::vector<RecursiveDoublingPlan> plan(p);
    for (int r = 0; r < p; ++r) plan[r] = PlanRecursiveDoubling(r, p);
    // count[r][q]: how many times rank q's data is in rank r's buffer.
    std::vector<std::vector<int>> count(p, std::vector<int>(p, 0));
    for (int r = 0; r < p; ++r) count[r][r] = 1;
    for (int r = 0; r < p; ++r) {  // fold: the even rank gives to the odd one
      if (plan[r].fold_partner >= 0 && plan[r].new_rank < 0) {
        const int odd = plan[r].fold_partner;
        ASSERT_EQ(plan[odd].fold_partner, r);
        for (int q = 0; q < p; ++q) count[odd][q] += count[r][q];
      }
    }
    const int rounds = plan[p - 1].rounds;
    for (int k = 0; k < rounds; ++k) {
      auto before = count;
      for (int r = 0; r < p; ++r) {
        if (plan[r].new_rank < 0) continue;
        ASSERT_EQ(plan[r].rounds, rounds);
        const int partner = RecursiveDoublingPartner(plan[r], k);
        ASSERT_EQ(RecursiveDoublingPartner(plan[partner], k), r) << "p " << p << " round " << k;
        for (int q = 0; q < p; ++q) count[r][q] += before[partner][q];
      }
    }
    for (int r = 0; r < p; ++r) {  // unfold: the odd rank hands the result back
      if (plan[r].fold_partner >= 0 && plan[r].new_rank < 0) count[r] = count[plan[r].fold_partner];
    }
    for (int r = 0; r < p; ++r) {
      for (int q = 0; q < p; ++q) EXPECT_EQ(count[r][q], 1) << "p " << p << " rank " << r << " has rank " << q;
    }
  }
}

}  // namespace
}  // namespace tessera
