#include "base/status.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(FailureFromWire, AlwaysAFailureAndEndsAtNul) {
  const char text[] = "lost\0rest";
  EXPECT_EQ(FailureFromWire(0, text, sizeof(text)).code(), Code::kRemoteError);
  EXPECT_EQ(FailureFromWire(999, text, sizeof(text)).code(), Code::kRemoteError);
  EXPECT_EQ(FailureFromWire(static_cast<int64_t>(Code::kInvalidUsage), text, sizeof(text)).code(), Code::kInvalidUsage);
  EXPECT_EQ(FailureFromWire(1, text, sizeof(text)).message(), "lost");
  EXPECT_EQ(FailureFromWire(1, "abcdef", 3).message(), "abc");
}

TEST(PeerFailure, NamesTheRankAndKeepsTheCode) {
  const Status s = PeerFailure(3, InvalidUsage("mismatched calls"));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "rank 3 failed: mismatched calls");
}

TEST(RootCause, OwnFailureIsItsOwnRoot) {
  const Status s = TimeoutError("allreduce (ring): receiving from rank 1 (tcp) timed out");
  EXPECT_EQ(RootCause(s).message(), s.message());
  EXPECT_EQ(RootCause(s).code(), Code::kTimeout);
}

// Rank 2 saw rank 3's notice, which relayed rank 0's: peers are told rank 0's.
TEST(RootCause, RelayedFailureGivesTheInnermost) {
  const Status rank0 = InvalidUsage("allreduce (torus): mismatched calls: rank 0 called allreduce #2");
  const Status rank3 = Status(Code::kInvalidUsage, "sending to rank 2 (shm), 0 of 4096 bytes moved; " +
                                                       PeerFailure(0, rank0).message());
  const Status rank2 = Status(Code::kInvalidUsage, "receiving from rank 0 (tcp): connection closed by rank 0; " +
                                                       PeerFailure(3, rank3).message());
  const Status root = RootCause(rank2);
  EXPECT_EQ(root.code(), Code::kInvalidUsage);
  EXPECT_EQ(root.message(), "rank 0 failed: " + rank0.message());
}

TEST(RootCause, RankWithoutFailedIsNotARelay) {
  const Status s = RemoteError("rank 12 (pid 7) exited; rank 4 called broadcast; rank failed: x; rank 9failed: y");
  EXPECT_EQ(RootCause(s).message(), s.message());
}

}  // namespace
}  // namespace tessera
