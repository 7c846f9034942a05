// Cutting messages into ring pieces (whole slots, a short last piece, gated sends that
// wait for 64 KiB and end on 64-byte boundaries) and the receiver's size checks.
#include "transport/ibverbs/message_pieces.h"

#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

constexpr size_t kSlot = 512 << 10;

// The pieces a sender writes for a message whose data is all there.
std::vector<size_t> Cut(size_t len, size_t slot) {
  std::vector<size_t> pieces;
  size_t posted = 0;
  while (size_t p = NextPieceLength(posted, len, len, slot)) {
    pieces.push_back(p);
    posted += p;
  }
  EXPECT_EQ(posted, len);
  return pieces;
}

TEST(MessagePiecesTest, WholeSlotsThenTheRest) {
  EXPECT_EQ(Cut(1, kSlot), std::vector<size_t>{1});
  EXPECT_EQ(Cut(kSlot, kSlot), std::vector<size_t>{kSlot});
  EXPECT_EQ(Cut(2 * kSlot + 10, kSlot), (std::vector<size_t>{kSlot, kSlot, 10}));
  EXPECT_EQ(Cut(4096 + 3, 4096), (std::vector<size_t>{4096, 3}));
  EXPECT_EQ(NextPieceLength(100, 100, 100, kSlot), 0u);  // nothing left
}

TEST(MessagePiecesTest, GatedSendWaitsForEnoughAlignedData) {
  const size_t len = 4 * kSlot;
  EXPECT_EQ(NextPieceLength(0, len, 0, kSlot), 0u);
  EXPECT_EQ(NextPieceLength(0, len, 1000, kSlot), 0u);                    // under 64 KiB
  EXPECT_EQ(NextPieceLength(0, len, (64 << 10) + 63, kSlot), 64u << 10);  // aligned down to 64
  EXPECT_EQ(NextPieceLength(0, len, (100 << 10) + 5, kSlot), 100u << 10);
  EXPECT_EQ(NextPieceLength(0, len, 3 * kSlot, kSlot), kSlot);      // a full slot at most
  EXPECT_EQ(NextPieceLength(kSlot, len, kSlot + 4000, kSlot), 0u);  // 4000 more: wait
  // Every gated piece ends on a 64-byte boundary.
  for (size_t avail : {65600ul, 70001ul, 123457ul, 500001ul}) {
    const size_t p = NextPieceLength(0, len, avail, kSlot);
    EXPECT_EQ(p % kPieceAlignment, 0u) << avail;
    EXPECT_LE(p, avail);
  }
}

TEST(MessagePiecesTest, TheFinalPieceGoesWhateverItsSize) {
  const size_t len = kSlot + 7;
  EXPECT_EQ(NextPieceLength(kSlot, len, len, kSlot), 7u);
  EXPECT_EQ(NextPieceLength(kSlot, len, len + 100, kSlot), 7u);  // available beyond the end
  // Small slots: a partial piece shorter than a slot but not last waits for the slot.
  EXPECT_EQ(NextPieceLength(0, 3 * 4096, 4096 + 640, 4096), 4096u);
  EXPECT_EQ(NextPieceLength(4096, 3 * 4096, 4096 + 640, 4096), 0u);
}

TEST(MessagePiecesTest, MatchingPiecesPass) {
  EXPECT_TRUE(CheckArrivingPiece(0, 100, 100, true, 3).ok());
  EXPECT_TRUE(CheckArrivingPiece(0, 2 * kSlot, kSlot, false, 3).ok());
  EXPECT_TRUE(CheckArrivingPiece(kSlot, 2 * kSlot, kSlot, true, 3).ok());
}

TEST(MessagePiecesTest, SenderShorterThanExpected) {
  Status s = CheckArrivingPiece(0, 8192, 4096, true, 3);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("rank 3 sent 4096 bytes, this rank expected 8192"), std::string::npos) << s.message();
}

TEST(MessagePiecesTest, SenderLongerThanExpected) {
  // The piece overruns the receive.
  Status s = CheckArrivingPiece(0, 4096, 8192, true, 5);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("rank 5 sent 8192 bytes, this rank expected 4096"), std::string::npos) << s.message();
  // The piece fills the receive exactly but the message goes on.
  s = CheckArrivingPiece(kSlot, 2 * kSlot, kSlot, false, 5);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("sent more than 1048576 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
