// CreditWindow: never more in flight than slots, returns in any order, sequence numbers
// that wrap, 16-bit sequence numbers from the wire, and protocol violations refused.
#include "transport/ibverbs/credit_window.h"

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

TEST(CreditWindowTest, NeverMoreInFlightThanSlots) {
  CreditWindow w(4);
  EXPECT_EQ(w.credits(), 4u);
  for (uint32_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(w.CanAcquire());
    EXPECT_EQ(w.Acquire(), k);
  }
  EXPECT_FALSE(w.CanAcquire());
  EXPECT_EQ(w.in_flight(), 4u);
  EXPECT_EQ(w.credits(), 0u);
  ASSERT_TRUE(w.Return(0, 1).ok());
  EXPECT_TRUE(w.CanAcquire());
  EXPECT_EQ(w.Acquire(), 4u);  // slot 0 again
  EXPECT_FALSE(w.CanAcquire());
}

TEST(CreditWindowTest, OutOfOrderReturnsWaitForTheOldest) {
  CreditWindow w(4);
  for (int k = 0; k < 4; ++k) w.Acquire();
  ASSERT_TRUE(w.Return(2, 1).ok());
  ASSERT_TRUE(w.Return(1, 1).ok());
  // Slots 1 and 2 are free, but the ring is reused in order: slot 0 comes first.
  EXPECT_EQ(w.credits(), 0u);
  EXPECT_FALSE(w.CanAcquire());
  ASSERT_TRUE(w.Return(0, 1).ok());
  EXPECT_EQ(w.credits(), 3u);  // 0, 1 and 2 at once
  EXPECT_EQ(w.oldest(), 3u);
  ASSERT_TRUE(w.Return(3, 1).ok());
  EXPECT_EQ(w.credits(), 4u);
}

TEST(CreditWindowTest, BatchedReturns) {
  CreditWindow w(8);
  for (int k = 0; k < 8; ++k) w.Acquire();
  ASSERT_TRUE(w.Return(0, 5).ok());
  EXPECT_EQ(w.credits(), 5u);
  ASSERT_TRUE(w.Return(5, 3).ok());
  EXPECT_EQ(w.credits(), 8u);
}

TEST(CreditWindowTest, RefusesProtocolViolationsWithoutChangingAnything) {
  CreditWindow w(4);
  for (int k = 0; k < 3; ++k) w.Acquire();
  EXPECT_EQ(w.Return(3, 1).code(), Code::kInternalError);  // never sent
  EXPECT_EQ(w.Return(1, 3).code(), Code::kInternalError);  // runs past what was sent
  ASSERT_TRUE(w.Return(1, 1).ok());
  Status twice = w.Return(1, 1);
  EXPECT_EQ(twice.code(), Code::kInternalError);
  EXPECT_NE(twice.message().find("returned twice"), std::string::npos) << twice.message();
  EXPECT_EQ(w.in_flight(), 3u);
  ASSERT_TRUE(w.Return(0, 1).ok());
  EXPECT_EQ(w.Return(0, 1).code(), Code::kInternalError);  // already reusable
  EXPECT_EQ(w.in_flight(), 1u);
}

TEST(CreditWindowTest, SequenceNumbersWrap) {
  const uint32_t start = 0xFFFFFFFDu;
  CreditWindow w(4, start);
  std::vector<uint32_t> seqs;
  for (int k = 0; k < 4; ++k) seqs.push_back(w.Acquire());
  EXPECT_EQ(seqs, (std::vector<uint32_t>{0xFFFFFFFDu, 0xFFFFFFFEu, 0xFFFFFFFFu, 0u}));
  // Ring slots stay in order across the wrap (slots is a power of two).
  for (int k = 1; k < 4; ++k) EXPECT_EQ(seqs[k] % 4, (seqs[k - 1] + 1) % 4);
  EXPECT_FALSE(w.CanAcquire());
  ASSERT_TRUE(w.Return(0xFFFFFFFFu, 2).ok());  // a batch that crosses the wrap
  EXPECT_EQ(w.credits(), 0u);
  ASSERT_TRUE(w.Return(0xFFFFFFFDu, 2).ok());
  EXPECT_EQ(w.credits(), 4u);
  EXPECT_EQ(w.oldest(), 1u);
  EXPECT_EQ(w.Acquire(), 1u);
}

TEST(CreditWindowTest, ExpandsSixteenBitSequencesAcrossBothWraps) {
  CreditWindow w(128, 0x0001FFC0u);  // about to cross a 16-bit boundary
  for (int k = 0; k < 128; ++k) w.Acquire();
  EXPECT_EQ(w.ExpandSequence(0xFFC0), 0x0001FFC0u);
  EXPECT_EQ(w.ExpandSequence(0x0005), 0x00020005u);
  ASSERT_TRUE(w.Return(w.ExpandSequence(0xFFC0), 64).ok());
  EXPECT_EQ(w.ExpandSequence(0x0000), 0x00020000u);

  CreditWindow top(8, 0xFFFFFFFCu);  // the 32-bit wrap
  for (int k = 0; k < 8; ++k) top.Acquire();
  EXPECT_EQ(top.ExpandSequence(0xFFFE), 0xFFFFFFFEu);
  EXPECT_EQ(top.ExpandSequence(0x0002), 0x00000002u);
}

// A sender and a receiver that frees slots in a random order, for many laps of the
// ring and across the 32-bit wrap: the sender never has more than `slots` in flight,
// never writes a slot still in use, and everything sent is returned.
TEST(CreditWindowTest, RandomOutOfOrderReturnsOverManyLaps) {
  constexpr uint32_t kSlots = 8;
  CreditWindow w(kSlots, 0xFFFFFF00u);
  std::mt19937 rng(7);
  std::vector<bool> slot_busy(kSlots, false);
  std::vector<uint32_t> held;  // sequences the receiver has not freed yet
  uint64_t sent = 0;
  for (int step = 0; step < 20000; ++step) {
    if (w.CanAcquire() && (rng() % 2 == 0 || held.empty())) {
      const uint32_t seq = w.Acquire();
      ASSERT_FALSE(slot_busy[seq % kSlots]) << "slot reused while in use, seq " << seq;
      slot_busy[seq % kSlots] = true;
      held.push_back(seq);
      ++sent;
    } else if (!held.empty()) {
      const size_t pick = rng() % held.size();
      const uint32_t seq = held[pick];
      held.erase(held.begin() + pick);
      slot_busy[seq % kSlots] = false;
      ASSERT_TRUE(w.Return(seq, 1).ok());
    }
    ASSERT_LE(w.in_flight(), kSlots);
  }
  for (uint32_t seq : held) ASSERT_TRUE(w.Return(seq, 1).ok());
  EXPECT_EQ(w.in_flight(), 0u);
  EXPECT_GT(sent, 5000u);
  EXPECT_LT(w.next(), 0xFFFFFF00u);  // wrapped
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
