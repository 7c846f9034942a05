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

TEST(RecursiveDoublingPattern, HalvingOrderVisitsTheNearestPartnersFirst) {
  // Hosts unknown: the classic order, largest distance first.
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(0, 8), nullptr), (std::vector<int>{2, 1, 0}));
  // 4 hosts x 2 ranks, block placement: the partner at distance 1 shares the host, then
  // the next host, then the host two away.
  const std::vector<int> block = {0, 0, 1, 1, 2, 2, 3, 3};
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(5, 8), &block), (std::vector<int>{0, 1, 2}));
  // 16 hosts of one rank: nearest first, so the halves of 1/2 and 1/4 of the buffer
  // stay among neighbouring hosts (inside a rack of them).
  std::vector<int> sixteen(16);
  for (int r = 0; r < 16; ++r) sixteen[r] = r;
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(3, 16), &sixteen), (std::vector<int>{0, 1, 2, 3}));
  // Round-robin placement: the partner at distance 4 shares the host; then the
  // neighbouring host (distance 1), then the host two away.
  const std::vector<int> round_robin = {0, 1, 2, 3, 0, 1, 2, 3};
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(5, 8), &round_robin), (std::vector<int>{2, 0, 1}));
  // 2 hosts x 4 ranks: two bits inside hosts, kept in the classic order among themselves.
  const std::vector<int> two_hosts = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(0, 8), &two_hosts), (std::vector<int>{1, 0, 2}));
  // 3 hosts x 2 ranks: ranks 0 and 2 fold into 1 and 3; participants are real ranks
  // 1, 3, 4, 5, and only the pair (4, 5) along bit 0 shares a host.
  const std::vector<int> six = {0, 0, 1, 1, 2, 2};
  EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(4, 6), &six), (std::vector<int>{0, 1}));
  // Every rank computes the same order.
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(HalvingOrder(PlanRecursiveDoubling(r, 8), &block), (std::vector<int>{0, 1, 2}));
  }
}

}  // namespace
}  // namespace tessera
