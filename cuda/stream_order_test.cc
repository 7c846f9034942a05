// The stream-order bookkeeping of staged device operations, without a GPU: sequence
// numbers and their cyclic comparison, the completion order, the choice of staging slot,
// and a model of several streams waiting on the published word.
#include "cuda/stream_order.h"

#include <deque>
#include <random>

#include "gtest/gtest.h"

namespace tessera {
namespace cuda {
namespace {

TEST(SequenceReached, ComparesCyclicallyLikeTheGpu) {
  EXPECT_TRUE(SequenceReached(5, 5));
  EXPECT_TRUE(SequenceReached(6, 5));
  EXPECT_FALSE(SequenceReached(4, 5));
  // Across the wrap of 2^32: 2 comes after 0xfffffffe.
  EXPECT_TRUE(SequenceReached(2, 0xfffffffeu));
  EXPECT_FALSE(SequenceReached(0xfffffffeu, 2));
  EXPECT_TRUE(SequenceReached(0, 0xffffffffu));
}

TEST(CompletionOrder, FinishesInIssueOrderAcrossTheWrap) {
  CompletionOrder order(0xfffffff0u);
  std::vector<uint32_t> issued;
  for (int i = 0; i < 40; ++i) {
    issued.push_back(order.NextToIssue());
    order.CommitIssue();
  }
  EXPECT_EQ(order.outstanding(), 40u);
  EXPECT_EQ(issued.front(), 0xfffffff1u);
  for (uint32_t seq : issued) {
    uint32_t publish = 0;
    ASSERT_TRUE(order.Finish(seq, &publish).ok()) << seq;
    EXPECT_EQ(publish, seq);
    EXPECT_TRUE(SequenceReached(publish, seq));
  }
  EXPECT_EQ(order.outstanding(), 0u);
  EXPECT_EQ(order.published(), 0xfffffff0u + 40);  // wrapped to 24
}

TEST(CompletionOrder, RefusesOutOfOrderAndUnissuedFinishes) {
  CompletionOrder order;
  const uint32_t a = order.NextToIssue();
  order.CommitIssue();
  const uint32_t b = order.NextToIssue();
  order.CommitIssue();
  uint32_t publish = 0;
  Status s = order.Finish(b, &publish);  // a is older
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_NE(s.message().find("out of order"), std::string::npos) << s.message();
  EXPECT_EQ(publish, 0u);  // nothing released
  EXPECT_EQ(order.Finish(b + 1, &publish).code(), Code::kInternalError);  // never issued
  ASSERT_TRUE(order.Finish(a, &publish).ok());
  ASSERT_TRUE(order.Finish(b, &publish).ok());
  EXPECT_EQ(publish, b);
}

TEST(CompletionOrder, ReleaseAllLetsEveryStreamGoAndLateFinishesNeverLowerTheWord) {
  CompletionOrder order;
  std::vector<uint32_t> issued;
  for (int i = 0; i < 3; ++i) {
    issued.push_back(order.NextToIssue());
    order.CommitIssue();
  }
  const uint32_t word = order.ReleaseAll();
  for (uint32_t seq : issued) EXPECT_TRUE(SequenceReached(word, seq));
  uint32_t publish = 0;
  ASSERT_TRUE(order.Finish(issued[0], &publish).ok());  // the proxy finishing late
  EXPECT_EQ(publish, word);
  // Work issued after the release waits again.
  const uint32_t next = order.NextToIssue();
  order.CommitIssue();
  EXPECT_FALSE(SequenceReached(order.published(), next));
  ASSERT_TRUE(order.Finish(next, &publish).ok());
  EXPECT_EQ(publish, next);
}

TEST(SlotBytes, RoundsUpToPowersOfTwoFrom64KiB) {
  EXPECT_EQ(SlotBytes(0), 64u << 10);
  EXPECT_EQ(SlotBytes(1), 64u << 10);
  EXPECT_EQ(SlotBytes(64 << 10), 64u << 10);
  EXPECT_EQ(SlotBytes((64 << 10) + 1), 128u << 10);
  EXPECT_EQ(SlotBytes(100u << 20), 128u << 20);
  const size_t huge = (SIZE_MAX >> 1) + 2;
  EXPECT_GE(SlotBytes(huge), huge);
}

TEST(ChooseSlot, ReusesTheSmallestFreeSlotThatFits) {
  std::vector<SlotState> slots = {{1 << 20, false, 1}, {128 << 10, false, 2}, {256 << 10, true, 3}, {64 << 10, false, 4}};
  SlotChoice c = ChooseSlot(slots, 100 << 10, 16, 5);
  EXPECT_EQ(c.action, SlotAction::kReuse);
  EXPECT_EQ(c.index, 1u);  // 128 KiB: the smallest free one that fits (256 KiB is busy)
  c = ChooseSlot(slots, 0, 16, 5);
  EXPECT_EQ(c.action, SlotAction::kReuse);
  EXPECT_EQ(c.index, 3u);
}

TEST(ChooseSlot, AllocatesWhenNothingFreeFitsThenGrowsAtTheLimit) {
  std::vector<SlotState> slots;
  SlotChoice c = ChooseSlot(slots, 10, 2, 1);
  EXPECT_EQ(c.action, SlotAction::kAllocate);
  EXPECT_EQ(c.index, 0u);
  EXPECT_EQ(c.bytes, 64u << 10);
  slots = {{64 << 10, false, 1}};
  c = ChooseSlot(slots, 1 << 20, 2, 2);
  EXPECT_EQ(c.action, SlotAction::kAllocate);
  EXPECT_EQ(c.index, 1u);
  EXPECT_EQ(c.bytes, 1u << 20);
  slots = {{64 << 10, false, 1}, {128 << 10, false, 2}};  // at the limit of 2
  c = ChooseSlot(slots, 1 << 20, 2, 3);
  EXPECT_EQ(c.action, SlotAction::kGrow);
  EXPECT_EQ(c.index, 1u);  // the largest free one
  EXPECT_EQ(c.bytes, 1u << 20);
}

TEST(ChooseSlot, WaitsForTheOldestWhenAllAreBusy) {
  // Numbers around the wrap: 0xfffffffe is older than 3 when now is 5.
  std::vector<SlotState> slots = {{1 << 20, true, 3}, {1 << 20, true, 0xfffffffeu}, {1 << 20, true, 4}};
  const SlotChoice c = ChooseSlot(slots, 10, 3, 5);
  EXPECT_EQ(c.action, SlotAction::kWaitFor);
  EXPECT_EQ(c.index, 1u);
}

// A model of the design: streams hold queues of staged operations, each waiting on the
// word for its number; a "GPU" step runs the head of a random stream if the word allows
// it; the proxy finishes operations in issue order at random times. Every stream must
// run its operations in its own issue order, each only after the proxy finished it.
TEST(StreamOrderModel, StreamsRunEachOperationOnlyAfterItsHostPartInIssueOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    CompletionOrder order(static_cast<uint32_t>(rng()));  // any start, wrap included
    const int streams = 1 + static_cast<int>(rng() % 4);
    std::vector<std::deque<uint32_t>> queue(streams);
    std::vector<std::vector<uint32_t>> ran(streams);
    std::deque<uint32_t> proxy;  // issued, not yet finished
    uint32_t word = order.published();
    int to_issue = 30;
    while (to_issue > 0 || !proxy.empty() || [&] {
      for (auto& q : queue) if (!q.empty()) return true;
      return false;
    }()) {
      const int what = static_cast<int>(rng() % 3);
      if (what == 0 && to_issue > 0) {  // the caller stages an operation on some stream
        const uint32_t seq = order.NextToIssue();
        order.CommitIssue();
        queue[rng() % streams].push_back(seq);
        proxy.push_back(seq);
        --to_issue;
      } else if (what == 1 && !proxy.empty()) {  // the proxy finishes the oldest
        uint32_t publish = 0;
        ASSERT_TRUE(order.Finish(proxy.front(), &publish).ok());
        proxy.pop_front();
        word = publish;
      } else {  // the GPU advances one stream as far as the word allows
        auto& q = queue[rng() % streams];
        if (!q.empty() && SequenceReached(word, q.front())) {
          const uint32_t seq = q.front();
          q.pop_front();
          for (uint32_t pending : proxy) ASSERT_NE(pending, seq) << "ran before its host part finished";
          const int s = static_cast<int>(&q - &queue[0]);
          if (!ran[s].empty()) {
            ASSERT_GT(static_cast<int32_t>(seq - ran[s].back()), 0) << "out of issue order";
          }
          ran[s].push_back(seq);
        }
      }
    }
    size_t total = 0;
    for (const auto& r : ran) total += r.size();
    EXPECT_EQ(total, 30u);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace tessera
