// The ring's block and peer arithmetic, checked exhaustively for small rings: blocks
// tile the buffer, and the reduce-scatter/allgather schedule gives every rank every
// block exactly when the algorithm assumes it.
#include "collectives/ring_pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

TEST(RingPattern, BlocksTileTheBufferAndDifferByAtMostOne) {
  for (size_t count : {0ul, 1ul, 2ul, 7ul, 8ul, 13ul, 1031ul, 65537ul}) {
    for (int p = 1; p <= 9; ++p) {
      size_t next = 0, smallest = count, largest = 0;
      for (int b = 0; b < p; ++b) {
        Block blk = RingBlock(count, p, b);
        EXPECT_EQ(blk.offset, next) << "count " << count << " p " << p << " block " << b;
        next += blk.count;
        smallest = std::min(smallest, blk.count);
        largest = std::max(largest, blk.count);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

TEST(RingPattern, NeighboursCloseTheRing) {
  for (int p = 1; p <= 9; ++p) {
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(RingLeft(RingRight(r, p), p), r);
      EXPECT_GE(RingRight(r, p), 0);
      EXPECT_LT(RingRight(r, p), p);
    }
  }
}

// Simulates the schedule on sets of contributions: contributions[rank][block] is the
// set of ranks whose data is summed in that rank's copy of the block.
TEST(RingPattern, ScheduleReducesEveryBlockAndGathersIt) {
  for (int p = 2; p <= 9; ++p) {
    std::vector<std::vector<std::vector<bool>>> have(p, std::vector<std::vector<bool>>(p, std::vector<bool>(p)));
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) have[r][b][r] = true;
    }
    for (int s = 0; s < p - 1; ++s) {
      auto before = have;
      for (int r = 0; r < p; ++r) {
        const int right = RingRight(r, p);
        const int sent = RingReduceScatterSendBlock(r, p, s);
        ASSERT_EQ(sent, RingReduceScatterRecvBlock(right, p, s)) << "p " << p << " step " << s;
        for (int q = 0; q < p; ++q) {
          if (before[r][sent][q]) have[right][sent][q] = true;
        }
      }
    }
    for (int r = 0; r < p; ++r) {
      const int owned = RingOwnedBlock(r, p);
      for (int q = 0; q < p; ++q) EXPECT_TRUE(have[r][owned][q]) << "p " << p << " rank " << r;
    }
    // Allgather: track which fully reduced blocks each rank holds.
    std::vector<std::vector<bool>> full(p, std::vector<bool>(p));
    for (int r = 0; r < p; ++r) full[r][RingOwnedBlock(r, p)] = true;
    for (int s = 0; s < p - 1; ++s) {
      auto before = full;
      for (int r = 0; r < p; ++r) {
        const int right = RingRight(r, p);
        const int sent = RingAllGatherSendBlock(r, p, s);
        ASSERT_TRUE(before[r][sent]) << "rank " << r << " forwards a block it lacks";
        ASSERT_EQ(sent, RingAllGatherRecvBlock(right, p, s));
        full[right][sent] = true;
      }
    }
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) EXPECT_TRUE(full[r][b]) << "p " << p << " rank " << r << " block " << b;
    }
  }
}

// Every member is in exactly one part, the members of a part agree on it, and parts have
// 2 .. most + 1 members (one alone when the whole list is one).
TEST(RingPattern, PartsOfALongRing) {
  for (int most : {2, 3, 16}) {
    for (int n = 2; n < 70; ++n) {
      for (int pos = 0; pos < n; ++pos) {
        const RingPart part = RingPartOf(n, pos, most);
        ASSERT_LE(part.first, pos) << n << " " << pos;
        ASSERT_LT(pos, part.end) << n << " " << pos;
        ASSERT_GE(part.end - part.first, 2) << n << " " << pos;
        ASSERT_LE(part.end - part.first, most + 1) << n << " " << pos;
        for (int other = part.first; other < part.end; ++other) {
          const RingPart theirs = RingPartOf(n, other, most);
          ASSERT_EQ(theirs.first, part.first) << n << " " << pos << " " << other;
          ASSERT_EQ(theirs.end, part.end) << n << " " << pos << " " << other;
        }
      }
    }
  }
  EXPECT_EQ(RingPartOf(12500, 12499, 16).end - RingPartOf(12500, 12499, 16).first, 4);
}

}  // namespace
}  // namespace tessera
