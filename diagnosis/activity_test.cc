// Activity: what a snapshot shows, and that a snapshot taken on another thread while the
// calls' thread writes without a lock is always one consistent state.
#include "diagnosis/activity.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace tessera {
namespace {

CallRecord Call(uint32_t seq) {
  CallRecord c;
  c.what = "allreduce";
  c.stamp.seq = seq;
  c.stamp.count = 8ull * seq;
  c.stamp.root = static_cast<int32_t>(seq % 7);
  return c;
}

TEST(Activity, ShowsTheCallItsWaitAndTheLastOneDone) {
  Activity a;
  a.CallBegan(Call(1), NowMicros());
  a.CallEnded(CallOutcome::kDone, NowMicros());
  a.CallBegan(Call(2), NowMicros());
  const int peers[] = {3, 5};
  a.Waiting(peers, 2, NowMicros());
  ActivitySnapshot s = a.Snapshot();
  EXPECT_EQ(s.state, ActivitySnapshot::State::kInCall);
  EXPECT_EQ(s.call.seq, 2u);
  EXPECT_EQ(s.last_done_seq, 1u);
  EXPECT_EQ(s.waiting_on, (std::vector<int32_t>{3, 5}));
  EXPECT_GE(s.since_progress_us, 0);
  a.CallEnded(CallOutcome::kFailed, NowMicros());  // failed: not done
  a.CallBegan(Call(3), NowMicros());
  s = a.Snapshot();
  EXPECT_EQ(s.last_done_seq, 1u);
  EXPECT_TRUE(s.waiting_on.empty());  // that wait was the previous call's
  EXPECT_EQ(s.since_progress_us, -1);
}

// A stall runs from the last progress Waiting names to Resumed (or the call's end), is
// counted on the peers waited for, and a call stalled in for a millisecond or more
// leaves its CallTiming.
TEST(Activity, CountsStallsByPeerAndKeepsTheCallsStalledIn) {
  Activity a;
  a.SetRanks(4, true);
  a.CallBegan(Call(1), 5000);
  const int peers[] = {2, 3};
  a.Waiting(peers, 2, 10000);
  a.Waiting(peers + 1, 1, 10000);  // the same stall, now on rank 3 alone
  a.Resumed(14000);
  a.CallEnded(CallOutcome::kDone, 15000);
  a.CallBegan(Call(2), 20000);
  a.Waiting(peers, 1, 20000);
  a.Resumed(20500);  // half a millisecond: no account
  a.CallEnded(CallOutcome::kDone, 21000);
  a.CallBegan(Call(3), 30000);
  a.Waiting(peers, 1, NowMicros() - 3000);  // ended by the call's end
  a.CallEnded(CallOutcome::kDone, 31000);
  a.CallBegan(Call(4), 40000);
  a.Waiting(peers, 1, 40000);
  a.Resumed(45000);
  a.CallEnded(CallOutcome::kFailed, 46000);  // no account of a failed call
  const RankTimings t = a.Timings();
  EXPECT_EQ(t.last_seq, 3u);
  EXPECT_EQ(t.covered_from, 1u);
  ASSERT_EQ(t.stalls.size(), 2u);
  EXPECT_EQ(t.stalls[0].seq, 1u);
  EXPECT_EQ(t.stalls[0].stalled_us, 4000u);
  EXPECT_EQ(t.stalls[0].waited_on, 3);
  EXPECT_EQ(t.stalls[0].began_us, 5000);
  EXPECT_EQ(t.stalls[1].seq, 3u);
  EXPECT_EQ(t.stalls[1].waited_on, 2);
  EXPECT_GE(t.stalls[1].stalled_us, 3000u);
  EXPECT_EQ(a.PeerStalls()[3], 4000);
  EXPECT_EQ(a.PeerStalls()[2], 500 + int64_t{t.stalls[1].stalled_us} + 5000);
  EXPECT_EQ(a.Stalled(), 4000 + 500 + int64_t{t.stalls[1].stalled_us} + 5000);
}

// Once the ring has wrapped, the accounts cover the calls from its oldest on.
TEST(Activity, AWrappedRingSaysWhatItCovers) {
  Activity a;
  a.SetRanks(2, true);
  const int peer = 1;
  for (uint32_t seq = 1; seq <= Activity::kTimingSlots + 10; ++seq) {
    a.CallBegan(Call(seq), 0);
    a.Waiting(&peer, 1, 1000 * int64_t{seq});
    a.Resumed(1000 * int64_t{seq} + 2000);
    a.CallEnded(CallOutcome::kDone, 0);
  }
  const RankTimings t = a.Timings();
  EXPECT_EQ(t.stalls.size(), Activity::kTimingSlots);
  EXPECT_EQ(t.covered_from, 11u);
  EXPECT_EQ(t.last_seq, Activity::kTimingSlots + 10);
}

TEST(Activity, KeepsNoTimingsWhenStragglersAreOff) {
  Activity a;
  a.SetRanks(2, false);
  a.CallBegan(Call(1), NowMicros());
  const int peer = 1;
  a.Waiting(&peer, 1, 0);
  a.CallEnded(CallOutcome::kDone, NowMicros());
  EXPECT_TRUE(a.Timings().stalls.empty());
}

TEST(Activity, BrokenStaysBroken) {
  Activity a;
  a.CallBegan(Call(1), NowMicros());
  a.Break();
  a.CallEnded(CallOutcome::kDone, NowMicros());
  a.CallBegan(Call(2), NowMicros());
  const ActivitySnapshot s = a.Snapshot();
  EXPECT_EQ(s.state, ActivitySnapshot::State::kBroken);
  EXPECT_EQ(s.call.seq, 1u);
  EXPECT_EQ(s.last_done_seq, 0u);
}

// ThreadSanitizer runs this.
TEST(Activity, ASnapshotOnAnotherThreadIsConsistent) {
  Activity a;
  std::atomic<size_t> reads{0};
  std::atomic<uint32_t> written{0};
  std::thread calls([&] {  // until the reader has read 2000 times
    const int peers[] = {1};
    uint32_t seq = 1;
    for (; reads.load() < 2000; ++seq) {
      a.CallBegan(Call(seq), NowMicros());
      if (seq % 3 == 0) a.Waiting(peers, 1, NowMicros());
      a.CallEnded(CallOutcome::kDone, NowMicros());
    }
    written.store(seq - 1);
  });
  while (reads.load() < 2000) {  // reads that saw a call
    const ActivitySnapshot s = a.Snapshot();
    if (s.call.seq == 0) continue;
    reads.fetch_add(1);
    ASSERT_EQ(s.call.count, 8ull * s.call.seq);
    ASSERT_EQ(s.call.root, static_cast<int32_t>(s.call.seq % 7));
    if (s.state == ActivitySnapshot::State::kIdle) {
      ASSERT_EQ(s.last_done_seq, s.call.seq);
    }
    if (s.state == ActivitySnapshot::State::kInCall) {
      ASSERT_EQ(s.last_done_seq + 1, s.call.seq);
    }
    if (!s.waiting_on.empty()) {
      ASSERT_EQ(s.call.seq % 3, 0u);
    }
  }
  calls.join();
  EXPECT_EQ(a.Snapshot().last_done_seq, written.load());
}

}  // namespace
}  // namespace tessera
