// Straggler detection's judging: who arrived last in one call, the window's verdict, and
// the court that pieces every rank's accounts together over rounds.
#include "diagnosis/straggler.h"

#include <random>

#include "diagnosis/straggler_judge.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// One call's accounts: stalls (us) by rank, began_us by rank (default 0).
std::vector<CallTiming> Call(uint32_t seq, const std::vector<uint32_t>& stalls, std::vector<int64_t> began = {}) {
  std::vector<CallTiming> t(stalls.size());
  for (size_t r = 0; r < stalls.size(); ++r) {
    t[r].seq = seq;
    t[r].stalled_us = stalls[r];
    t[r].began_us = r < began.size() ? began[r] : 0;
    t[r].waited_on = stalls[r] > 0 ? static_cast<int32_t>((r + stalls.size() - 1) % stalls.size()) : -1;
  }
  return t;
}

const std::vector<int> kTwoByTwo = {0, 0, 1, 1};

TEST(JudgeCall, TheRankThatStalledLeastArrivedLast) {
  const LastArrival a = JudgeCall(Call(7, {38000, 37500, 37900, 0}), kTwoByTwo);
  EXPECT_EQ(a.seq, 7u);
  EXPECT_EQ(a.rank, 3);
  EXPECT_EQ(a.lag_us, 38000);
  EXPECT_EQ(a.waiters, (std::vector<int32_t>{0, 1, 2}));
}

TEST(JudgeCall, StallsBelowAMillisecondNameNobody) {
  EXPECT_EQ(JudgeCall(Call(1, {900, 0, 300, 0}), kTwoByTwo).rank, -1);
  EXPECT_EQ(JudgeCall(Call(1, {0, 0, 0, 0}), kTwoByTwo).rank, -1);
}

// Two ranks of one host stalled about as little: the one that began later (their clock
// is one) arrived last.
TEST(JudgeCall, OneHostsRanksAreOrderedByTheirClock) {
  EXPECT_EQ(JudgeCall(Call(1, {20000, 20000, 300, 0}, {0, 0, 5000, 4000}), kTwoByTwo).rank, 2);
  EXPECT_EQ(JudgeCall(Call(1, {20000, 20000, 0, 300}, {0, 0, 4000, 5000}), kTwoByTwo).rank, 3);
}

// Ranks of different hosts are never ordered by their clocks: the least stalled.
TEST(JudgeCall, RanksOfDifferentHostsAreOrderedByTheirStalls) {
  EXPECT_EQ(JudgeCall(Call(1, {200, 20000, 0, 20000}, {999999, 0, 0, 0}), kTwoByTwo).rank, 2);
}

TEST(StragglerWindow, NamesTheRankLastInTheShareAndItsMedianLag) {
  StragglerWindow w(100, 50, 4);
  for (uint32_t seq = 1; seq <= 100; ++seq) {
    if (seq % 10 == 0) {
      w.Add(JudgeCall(Call(seq, {0, 0, 0, 0}), kTwoByTwo));  // balanced
    } else {
      const uint32_t lag = 30000 + 1000 * (seq % 10);
      w.Add(JudgeCall(Call(seq, {lag, lag, lag, 0}), kTwoByTwo));
    }
  }
  const StragglerVerdict v = w.Verdict();
  ASSERT_TRUE(v.named());
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.window_calls, 100u);
  EXPECT_EQ(v.last_calls, 90u);
  EXPECT_EQ(v.median_lag_us, 35000);
  EXPECT_EQ(v.waiters, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(StragglerText(v, {10, 11, 12, 13}, {"a", "a", "b", "b"}),
            "rank 3 (pid 13, host b) arrived last in 90% of the last 100 collectives, a median of 35.0 ms after "
            "the first; ranks 0-2 waited on it");
}

TEST(StragglerWindow, ABalancedJobNamesNobody) {
  StragglerWindow w(1000, 50, 4);
  std::mt19937 random(56);
  for (uint32_t seq = 1; seq <= 10000; ++seq) {
    std::vector<uint32_t> stalls(4, 0);
    if (random() % 5 == 0) stalls[random() % 4] = 5000;  // one rank held up now and then
    w.Add(JudgeCall(Call(seq, stalls), kTwoByTwo));
    ASSERT_FALSE(w.Verdict().named()) << seq;
  }
}

TEST(StragglerWindow, TooFewCallsNameNobodyAndARecoveredRankIsDropped) {
  StragglerWindow w(100, 50, 2);
  for (uint32_t seq = 1; seq < StragglerWindow::kMinVerdictCalls; ++seq) w.Add(JudgeCall(Call(seq, {5000, 0}), {0, 0}));
  EXPECT_FALSE(w.Verdict().named());
  w.Add(JudgeCall(Call(50, {5000, 0}), {0, 0}));
  EXPECT_EQ(w.Verdict().rank, 1);
  for (uint32_t seq = 51; seq <= 150; ++seq) w.Add(JudgeCall(Call(seq, {0, 0}), {0, 0}));
  EXPECT_FALSE(w.Verdict().named());
  EXPECT_EQ(w.calls(), 100u);
}

TEST(RankRanges, RunsOfRanks) {
  EXPECT_EQ(RankRanges({0, 1, 2, 3, 4, 6, 7}), "0-4, 6-7");
  EXPECT_EQ(RankRanges({2}), "2");
  EXPECT_EQ(RankRanges({}), "");
}

// Accounts that arrive over several rounds (a rank that did not answer in time) still
// make whole calls; a call judged once is not judged again when the rings repeat it.
TEST(StragglerCourt, PiecesCallsTogetherOverRounds) {
  StragglerOptions options;
  options.window = 100;
  StragglerCourt court({"a", "a", "b", "b"}, options);
  std::vector<std::vector<CallTiming>> accounts(4);
  for (uint32_t seq = 1; seq <= 60; ++seq) {
    const std::vector<CallTiming> call = Call(seq, {9000, 9000, 0, 9000});
    for (int r = 0; r < 4; ++r) accounts[r].push_back(call[r]);
  }
  std::vector<std::vector<CallTiming>> first = accounts;
  first[2].clear();  // rank 2 is silent this round
  court.Hear(first);
  EXPECT_EQ(court.judged(), 0u);
  court.Hear(accounts);
  EXPECT_EQ(court.judged(), 60u);
  court.Hear(accounts);  // the same rings again
  EXPECT_EQ(court.judged(), 60u);
  const StragglerVerdict v = court.Verdict();
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.last_calls, 60u);
}

// A call that a rank's ring no longer holds is dropped, not kept waiting for ever.
TEST(StragglerCourt, DropsCallsThatCanNoLongerBeWhole) {
  StragglerOptions options;
  StragglerCourt court({"a", "b"}, options);
  std::vector<std::vector<CallTiming>> accounts(2);
  accounts[0].push_back(Call(1, {0, 0})[0]);  // rank 1 never accounts for call 1
  court.Hear(accounts);
  accounts[0].clear();
  for (uint32_t seq = 2; seq <= 2 + Activity::kTimingSlots; ++seq) {
    const std::vector<CallTiming> call = Call(seq, {0, 0});
    accounts[0].push_back(call[0]);
    accounts[1].push_back(call[1]);
  }
  court.Hear(accounts);
  EXPECT_EQ(court.judged(), Activity::kTimingSlots + 1);
}

}  // namespace
}  // namespace tessera
