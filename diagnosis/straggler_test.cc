// Straggler detection's judging: who arrived last in one call, the window's verdict, and
// the court that pieces every rank's accounts together over rounds.
#include "diagnosis/straggler.h"

#include <functional>
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

LastArrival Judge(uint32_t seq, const std::vector<uint32_t>& stalls, std::vector<int64_t> began = {}) {
  return JudgeCall(seq, Call(seq, stalls, std::move(began)), kTwoByTwo);
}

TEST(JudgeCall, TheRankThatStalledLeastArrivedLast) {
  const LastArrival a = Judge(7, {38000, 37500, 37900, 0});
  EXPECT_EQ(a.seq, 7u);
  EXPECT_EQ(a.rank, 3);
  EXPECT_EQ(a.lag_us, 38000);
  EXPECT_EQ(a.waiters, (std::vector<int32_t>{0, 1, 2}));
}

TEST(JudgeCall, StallsBelowAMillisecondNameNobody) {
  EXPECT_EQ(Judge(1, {900, 0, 300, 0}).rank, -1);
  EXPECT_EQ(Judge(1, {0, 0, 0, 0}).rank, -1);
}

// Two ranks of one host stalled about as little: the one that began later (their clock
// is one) arrived last.
TEST(JudgeCall, OneHostsRanksAreOrderedByTheirClock) {
  EXPECT_EQ(Judge(1, {20000, 20000, 1200, 1100}, {0, 0, 5000, 4000}).rank, 2);
  EXPECT_EQ(Judge(1, {20000, 20000, 1100, 1200}, {0, 0, 4000, 5000}).rank, 3);
}

// Ranks of different hosts are never ordered by their clocks: the least stalled, and
// nobody where the least stalled of two hosts tie (stalls under 1 ms leave no account).
TEST(JudgeCall, RanksOfDifferentHostsAreOrderedByTheirStalls) {
  EXPECT_EQ(Judge(1, {1500, 20000, 0, 20000}, {999999, 0, 0, 0}).rank, 2);
  EXPECT_EQ(Judge(1, {0, 20000, 0, 20000}, {999999, 0, 0, 0}).rank, -1);
  EXPECT_EQ(Judge(1, {20000, 20000, 0, 0}, {0, 0, 4000, 5000}).rank, 3);
}

// Feeds `w` calls from..to, where late(seq) gives the stalls of a call someone was late
// in (empty: nobody), one Advance per `batch` calls, 10 ms of the judge's clock apart.
template <typename Late>
void Feed(StragglerWindow* w, uint32_t from, uint32_t to, Late late, uint32_t batch = 100) {
  for (uint32_t b = from; b <= to; b += batch) {
    const uint32_t end = std::min(to, b + batch - 1);
    for (uint32_t seq = b; seq <= end; ++seq) {
      const std::vector<uint32_t> stalls = late(seq);
      if (!stalls.empty()) w->Add(Judge(seq, stalls));
    }
    w->Advance(b, end, 10000 * int64_t{end});
  }
}

TEST(StragglerWindow, NamesTheRankLateAtEveryStepWithItsMedianLag) {
  StragglerWindow w(100, 50, 4);
  Feed(&w, 1, 100, [](uint32_t seq) {
    const uint32_t lag = 30000 + 1000 * (seq % 10);
    return seq % 10 == 0 ? std::vector<uint32_t>{} : std::vector<uint32_t>{lag, lag, lag, 0};
  }, 10);
  const StragglerVerdict v = w.Verdict();
  ASSERT_TRUE(v.named());
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.window_calls, 100u);
  EXPECT_EQ(v.last_calls, 90u);
  EXPECT_EQ(v.median_lag_us, 35000);
  EXPECT_EQ(v.wait_permille, 1000u);
  EXPECT_EQ(v.waiters, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(StragglerText(v, {10, 11, 12, 13}, {"a", "a", "b", "b"}),
            "rank 3 (pid 13, host b) arrived last in 90 of the last 100 collectives, a median of 35.0 ms after the "
            "first (100% of the waiting on late ranks, " + std::to_string(v.cost_permille / 10) +
            "% of the time); ranks 0-2 waited on it");
}

// Late now and then, by much (a rank stopped 200 ms every second): few calls, most of
// the waiting and of the time.
TEST(StragglerWindow, NamesTheRankThatCostsTheMostTime) {
  StragglerWindow w(1000, 50, 4);
  Feed(&w, 1, 1000, [](uint32_t seq) {
    if (seq % 100 == 0) return std::vector<uint32_t>{200000, 200000, 200000, 0};
    if (seq % 37 == 0) return std::vector<uint32_t>{0, 3000, 3000, 3000};  // rank 0 now and then, a little
    return std::vector<uint32_t>{};
  });
  const StragglerVerdict v = w.Verdict();
  ASSERT_TRUE(v.named());
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.last_calls, 10u);
  EXPECT_GT(v.wait_permille, 900u);
  EXPECT_GE(v.cost_permille, 150u);  // 2 s of 10 s
}

// The same on busy cores (the straggler suite's sigstop case beside two busy loops):
// every rank, the stopped one too, is also last by a few milliseconds in 2 or 3 calls of
// a hundred, so the stopped rank's late calls are mostly small ones and no more than an
// even split's. Half of the waiting on it is still spent in its 200 ms calls.
TEST(StragglerWindow, NamesTheStoppedRankAmongEveryRanksSmallLateCalls) {
  StragglerWindow w(1000, 50, 4);
  Feed(&w, 1, 1000, [](uint32_t seq) {
    if (seq % 100 == 0) return std::vector<uint32_t>{200000, 200000, 200000, 0};
    if (seq % 100 % 40 == 0 || seq % 100 == 13) return std::vector<uint32_t>{3000, 3000, 3000, 0};
    for (uint32_t r = 0; r < 3; ++r) {
      if (seq % 100 == 21 + 20 * r || seq % 100 == 27 + 20 * r || seq % 100 == 33 + 20 * r) {
        std::vector<uint32_t> stalls(4, 2000 + 500 * r);
        stalls[r] = 0;
        return stalls;
      }
    }
    return std::vector<uint32_t>{};
  });
  const StragglerVerdict v = w.Verdict();
  ASSERT_TRUE(v.named());
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.last_calls, 40u);  // 10 stops and 30 calls late by 3 ms
  EXPECT_GT(v.wait_permille, 900u);
}

// Every rank held up now and then (descheduled on shared cores): the others wait on it.
TEST(StragglerWindow, ABalancedJobNamesNobody) {
  for (uint32_t every : {500, 50, 5}) {
    StragglerWindow w(1000, 50, 4);
    std::mt19937 random(56);
    int64_t now = 0;
    for (uint32_t seq = 1; seq <= 10000; ++seq) {
      now += 100;  // a call
      if (random() % every == 0) {
        const uint32_t lag = 1000 + random() % 4000;
        std::vector<uint32_t> stalls(4, lag);
        stalls[random() % 4] = 0;
        w.Add(Judge(seq, stalls));
        now += lag;
      }
      w.Advance(seq, seq, now);
      ASSERT_FALSE(w.Verdict().named()) << "one late call in " << every << ", call " << seq << ": rank "
                                        << w.Verdict().rank;
    }
  }
}

// Last in most calls by a little, while others keep everyone waiting longer now and then
// (as in a test suite whose calls are uneven): not a straggler, and neither are they
// (no rank holds most of the waiting).
TEST(StragglerWindow, LastInMostCallsByALittleIsNotNamedWhenOthersCostMore) {
  StragglerWindow w(100, 50, 4);
  Feed(&w, 1, 100, [](uint32_t seq) {
    if (seq % 10 == 0) return seq % 20 == 0 ? std::vector<uint32_t>{0, 40000, 40000, 40000}
                                            : std::vector<uint32_t>{40000, 0, 40000, 40000};
    return std::vector<uint32_t>{1500, 1500, 0, 1500};  // rank 2, a little late
  }, 10);
  const StragglerVerdict v = w.Verdict();
  EXPECT_FALSE(v.named()) << "rank " << v.rank << " named, last in " << v.last_calls << " calls";
}

TEST(StragglerWindow, TooFewCallsNameNobodyAndARecoveredRankIsDropped) {
  StragglerWindow w(100, 50, 2);
  auto late = [](uint32_t) { return std::vector<uint32_t>{5000, 0}; };
  Feed(&w, 1, StragglerWindow::kMinVerdictCalls - 1, late, 1);
  EXPECT_FALSE(w.Verdict().named());
  Feed(&w, StragglerWindow::kMinVerdictCalls, StragglerWindow::kMinVerdictCalls, late, 1);
  EXPECT_EQ(w.Verdict().rank, 1);
  Feed(&w, 51, 150, [](uint32_t) { return std::vector<uint32_t>{}; });
  EXPECT_FALSE(w.Verdict().named());
  EXPECT_EQ(w.calls(), 100u);
}

TEST(RankRanges, RunsOfRanks) {
  EXPECT_EQ(RankRanges({0, 1, 2, 3, 4, 6, 7}), "0-4, 6-7");
  EXPECT_EQ(RankRanges({2}), "2");
  EXPECT_EQ(RankRanges({}), "");
}

// Rank r's accounts of calls 1..last in which it stalled, as `stalls(seq)` says.
RankTimings Accounts(int r, uint32_t last, const std::function<std::vector<uint32_t>(uint32_t)>& stalls) {
  RankTimings t;
  t.last_seq = last;
  for (uint32_t seq = 1; seq <= last; ++seq) {
    const std::vector<uint32_t> s = stalls(seq);
    if (!s.empty() && s[r] >= kMinLagUs) t.stalls.push_back(CallTiming{seq, 0, 0, s[r], 0});
  }
  return t;
}

// Accounts that arrive over several rounds (a rank that did not answer in time) still
// make whole calls, and a call judged once is not judged again when the rings repeat it.
TEST(StragglerCourt, PiecesCallsTogetherOverRounds) {
  StragglerOptions options;
  options.window = 100;
  StragglerCourt court({"a", "a", "b", "b"}, options);
  auto late2 = [](uint32_t) { return std::vector<uint32_t>{9000, 9000, 0, 9000}; };
  std::vector<RankTimings> accounts;
  for (int r = 0; r < 4; ++r) accounts.push_back(Accounts(r, 60, late2));
  court.Hear(accounts, {true, true, false, true}, 1000000);  // rank 2 is silent
  EXPECT_EQ(court.judged(), 0u);
  court.Hear(accounts, {true, true, true, true}, 2000000);
  EXPECT_EQ(court.judged(), 60u);
  court.Hear(accounts, {true, true, true, true}, 3000000);  // the same rings again
  const StragglerVerdict v = court.Verdict();
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.last_calls, 60u);
  EXPECT_EQ(v.window_calls, 60u);
}

// Calls up to the lowest rank's last one are judged; a call outside a rank's ring when it
// answered (a gap) counts as one nobody was late in.
TEST(StragglerCourt, JudgesUpToTheSlowestRankAndSkipsGaps) {
  StragglerOptions options;
  options.window = 1000;
  StragglerCourt court({"a", "b"}, options);
  auto late1 = [](uint32_t) { return std::vector<uint32_t>{5000, 0}; };
  std::vector<RankTimings> accounts = {Accounts(0, 80, late1), Accounts(1, 70, late1)};
  court.Hear(accounts, {true, true}, 1000000);
  EXPECT_EQ(court.judged(), 70u);
  EXPECT_EQ(court.Verdict().last_calls, 70u);
  accounts = {Accounts(0, 200, late1), Accounts(1, 200, late1)};
  accounts[0].covered_from = 150;  // rank 0's ring lost calls 81..149
  accounts[0].stalls.erase(accounts[0].stalls.begin(), accounts[0].stalls.begin() + 149);
  court.Hear(accounts, {true, true}, 2000000);
  EXPECT_EQ(court.judged(), 200u);
  const StragglerVerdict v = court.Verdict();
  EXPECT_EQ(v.window_calls, 200u);
  EXPECT_EQ(v.last_calls, 80u + 51u);  // 1..80 (rank 0's first answer had them), then 150..200
}

}  // namespace
}  // namespace tessera
