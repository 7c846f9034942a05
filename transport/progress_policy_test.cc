// The progress policy's decisions (transport/progress_policy.h), driven by the waits and
// yields an exchange reports.
#include "transport/progress_policy.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

// Four ranks share the kernel.
ProgressSettings Polling(PollMode mode) { return ProgressSettings{mode, 2000, 4}; }
int OtherWork() { return 6; }     // the four ranks and two other processes are runnable
int RanksOnly() { return 4; }     // only the ranks are
int CannotTell() { return -1; }

TEST(ProgressPolicy, OnlyYieldModeYields) {
  EXPECT_FALSE(ProgressPolicy(Polling(PollMode::kRelax)).Yields(0));
  EXPECT_TRUE(ProgressPolicy(Polling(PollMode::kYield)).Yields(0));
}

TEST(ProgressPolicy, AnOccasionalLateYieldKeepsYielding) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  for (int i = 0; i < 100; ++i, now += 10) p.YieldTook(i % 4 == 0 ? 3000 : 2, now, OtherWork);
  EXPECT_TRUE(p.Yields(now));
}

// Yields late until the policy stops yielding (true), or for 1000 yields (false).
bool StopsYielding(ProgressPolicy* p, int (*runnable)(), int64_t* now) {
  for (int i = 0; i < 1000; ++i) {
    if (!p->Yields(*now)) return true;
    *now += 3000;
    p->YieldTook(3000, *now, runnable);  // a whole slice each time
  }
  return false;
}

TEST(ProgressPolicy, MostlyLateYieldsBesideOtherWorkStopYieldingForAWhile) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  ASSERT_TRUE(StopsYielding(&p, OtherWork, &now));
  EXPECT_FALSE(p.Yields(now + ProgressPolicy::kNoYieldUs - 1));
  EXPECT_TRUE(p.Yields(now + ProgressPolicy::kNoYieldUs));
}

// The slices went to ranks with work to do: yielding to them is what they need.
TEST(ProgressPolicy, LateYieldsToTheRanksThemselvesKeepYielding) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  EXPECT_FALSE(StopsYielding(&p, RanksOnly, &now));
}

TEST(ProgressPolicy, LateYieldsStopYieldingWhereTheKernelCannotTellWhoRan) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  EXPECT_TRUE(StopsYielding(&p, CannotTell, &now));
  ProgressPolicy unknown(ProgressSettings{PollMode::kYield, 2000, 0});  // the ranks are not known
  EXPECT_TRUE(StopsYielding(&unknown, RanksOnly, &now));
}

TEST(ProgressPolicy, TheKernelSaysHowManyTasksAreRunnable) {
  EXPECT_GE(RunnableTasks(), 1);  // this test's own thread
}

}  // namespace
}  // namespace tessera
