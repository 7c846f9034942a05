#include "diagnosis/watch.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <random>

#include "gtest/gtest.h"

namespace tessera {
namespace {

constexpr uint64_t kSecret = 0x1234;

TEST(WatchTest, PeersAnswerWithTheirActivity) {
  Activity a0, a1;
  CallRecord call;
  call.what = "allreduce";
  call.stamp.seq = 5;
  call.stamp.count = 8;
  a1.CallBegan(call, NowMicros());
  int dumps = 0;
  std::unique_ptr<WatchService> w0, w1;
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, 2, &a0, nullptr, false, &w0).ok());
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 1, 2, &a1, [&dumps] { ++dumps; }, false, &w1).ok());
  std::vector<PeerAnswer> answers;
  QueryPeers({w0->address(), w1->address()}, {}, kSecret, 2, WatchRequest::kStatusAndDump, Deadline::AfterMs(2000),
             false, &answers);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].kind, PeerAnswer::Kind::kAnswered) << answers[0].error;
  EXPECT_EQ(answers[0].snapshot.state, ActivitySnapshot::State::kIdle);
  EXPECT_EQ(answers[1].kind, PeerAnswer::Kind::kAnswered) << answers[1].error;
  EXPECT_EQ(answers[1].snapshot.state, ActivitySnapshot::State::kInCall);
  EXPECT_EQ(answers[1].snapshot.call, call.stamp);
  EXPECT_EQ(dumps, 1);
}

// The judge's question: each rank answers with its CallTimings and takes the verdict
// the request carries.
TEST(WatchTest, TimingsAreAnsweredAndTheVerdictHandedOver) {
  Activity a0, a1;
  a1.SetRanks(2, true);
  for (uint32_t seq = 1; seq <= 3; ++seq) {
    CallRecord call;
    call.stamp.seq = seq;
    a1.CallBegan(call, 100 * seq);
    const int peer = 0;
    a1.Waiting(&peer, 1, 1000 * seq);
    a1.Resumed(1000 * seq + 2500);
    a1.CallEnded(CallOutcome::kDone, 100 * seq + 50);
  }
  std::unique_ptr<WatchService> w1;
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 1, 2, &a1, nullptr, false, &w1).ok());
  StragglerVerdict verdict;
  verdict.rank = 1;
  verdict.window_calls = 80;
  verdict.last_calls = 70;
  verdict.median_lag_us = 2500;
  verdict.waiters = {0};
  std::vector<PeerAnswer> answers;
  std::vector<RankTimings> timings;
  QueryTimings({SocketAddress{}, w1->address()}, {true, false}, kSecret, 0, verdict, Deadline::AfterMs(2000), &answers,
               &timings);
  ASSERT_EQ(answers[1].kind, PeerAnswer::Kind::kAnswered) << answers[1].error;
  EXPECT_EQ(timings[1].last_seq, 3u);
  EXPECT_EQ(timings[1].covered_from, 1u);
  ASSERT_EQ(timings[1].stalls.size(), 3u);
  EXPECT_EQ(timings[1].stalls[2].seq, 3u);
  EXPECT_EQ(timings[1].stalls[2].stalled_us, 2500u);
  EXPECT_EQ(timings[1].stalls[2].waited_on, 0);
  EXPECT_EQ(timings[1].stalls[2].began_us, 300);
  const StragglerVerdict handed = a1.Straggler();
  EXPECT_EQ(handed.rank, 1);
  EXPECT_EQ(handed.last_calls, 70u);
  EXPECT_EQ(handed.waiters, (std::vector<int32_t>{0}));
  EXPECT_EQ(a1.PeerStalls(), (std::vector<int64_t>{7500, 0}));
}

// A verdict from the network is checked before it is believed.
TEST(WatchTest, AVerdictOutOfRangeIsRefused) {
  StragglerVerdict v;
  v.rank = 5;
  StragglerVerdict out;
  EXPECT_FALSE(DecodeStragglerVerdict(EncodeStragglerVerdict(v), 4, &out).ok());
  v.rank = 3;
  v.waiters = {7};
  EXPECT_FALSE(DecodeStragglerVerdict(EncodeStragglerVerdict(v), 4, &out).ok());
  v.waiters = {0, 1};
  const std::string bytes = EncodeStragglerVerdict(v);
  EXPECT_TRUE(DecodeStragglerVerdict(bytes, 4, &out).ok());
  EXPECT_FALSE(DecodeStragglerVerdict(bytes.substr(0, bytes.size() - 1), 4, &out).ok());
}

TEST(WatchTest, WrongSecretIsNotAnsweredAndAClosedPortIsRefused) {
  Activity a;
  std::unique_ptr<WatchService> w;
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, 2, &a, nullptr, false, &w).ok());
  SocketAddress gone = w->address();
  std::vector<PeerAnswer> answers;
  QueryPeers({w->address()}, {}, kSecret + 1, 1, WatchRequest::kStatus, Deadline::AfterMs(300), false, &answers);
  EXPECT_NE(answers[0].kind, PeerAnswer::Kind::kAnswered);
  w.reset();  // stops listening
  QueryPeers({gone}, {}, kSecret, 1, WatchRequest::kStatus, Deadline::AfterMs(1000), false, &answers);
  EXPECT_EQ(answers[0].kind, PeerAnswer::Kind::kRefused) << answers[0].error;
}

TEST(WatchTest, TheDumpSignalRunsTheDump) {
  ASSERT_TRUE(InstallDumpSignal(SIGUSR2).ok());
  EXPECT_TRUE(InstallDumpSignal(SIGUSR2).ok());
  EXPECT_EQ(InstallDumpSignal(SIGUSR1).code(), Code::kInvalidUsage);
  Activity a;
  std::atomic<int> dumps{0};
  std::unique_ptr<WatchService> on, off;
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, 2, &a, [&dumps] { dumps += 1; }, true, &on).ok());
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 1, 2, &a, [&dumps] { dumps += 100; }, false, &off).ok());
  raise(SIGUSR2);
  for (int i = 0; i < 100 && dumps.load() == 0; ++i) usleep(10000);
  usleep(3 * kSignalCheckMs * 1000);
  EXPECT_EQ(dumps.load(), 1);
}

TEST(WatchTest, GarbageRepliesAreRejected) {
  ActivitySnapshot s;
  s.verdict = "v";
  s.culprits = {1, 2};
  const std::string good = EncodeSnapshot(3, 42, s);
  int rank = 0, pid = 0;
  ActivitySnapshot out;
  ASSERT_TRUE(DecodeSnapshot(good, &rank, &pid, &out).ok());
  EXPECT_EQ(out.culprits, (std::vector<int32_t>{1, 2}));
  std::mt19937 gen(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    bad[gen() % bad.size()] = static_cast<char>(gen());
    if (i % 3 == 0) bad.resize(gen() % (bad.size() + 1));
    DecodeSnapshot(bad, &rank, &pid, &out);  // must not crash; any result
  }
  EXPECT_FALSE(DecodeSnapshot(good.substr(0, good.size() - 1), &rank, &pid, &out).ok());
}

}  // namespace
}  // namespace tessera
