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
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, &a0, nullptr, false, &w0).ok());
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 1, &a1, [&dumps] { ++dumps; }, false, &w1).ok());
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

TEST(WatchTest, WrongSecretIsNotAnsweredAndAClosedPortIsRefused) {
  Activity a;
  std::unique_ptr<WatchService> w;
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, &a, nullptr, false, &w).ok());
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
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 0, &a, [&dumps] { dumps += 1; }, true, &on).ok());
  ASSERT_TRUE(WatchService::Start("127.0.0.1", kSecret, 1, &a, [&dumps] { dumps += 100; }, false, &off).ok());
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
