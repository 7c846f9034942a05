// The progress policy's decisions (transport/progress_policy.h), driven by the waits and
// yields an exchange reports.
#include "transport/progress_policy.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

ProgressSettings Polling(PollMode mode) { return ProgressSettings{mode, 2000}; }

TEST(ProgressPolicy, OnlyYieldModeYields) {
  EXPECT_FALSE(ProgressPolicy(Polling(PollMode::kRelax)).Yields(0));
  EXPECT_TRUE(ProgressPolicy(Polling(PollMode::kYield)).Yields(0));
}

TEST(ProgressPolicy, AnOccasionalLateYieldKeepsYielding) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  for (int i = 0; i < 100; ++i, now += 10) p.YieldTook(i % 4 == 0 ? 3000 : 2, now);
  EXPECT_TRUE(p.Yields(now));
}

TEST(ProgressPolicy, MostlyLateYieldsStopYieldingForAWhile) {
  ProgressPolicy p(Polling(PollMode::kYield));
  int64_t now = 1000;
  while (p.Yields(now)) {
    now += 3000;
    p.YieldTook(3000, now);  // another process's whole slice each time
    ASSERT_LT(now, 1000000) << "never stopped yielding";
  }
  EXPECT_FALSE(p.Yields(now + ProgressPolicy::kNoYieldUs - 1));
  EXPECT_TRUE(p.Yields(now + ProgressPolicy::kNoYieldUs));
}

}  // namespace
}  // namespace tessera
