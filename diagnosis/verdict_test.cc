#include "diagnosis/verdict.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

using State = ActivitySnapshot::State;
using Kind = PeerAnswer::Kind;

CallStamp Allreduce(uint32_t seq, uint64_t count = 1024) {
  CallStamp c;
  c.seq = seq;
  c.count = count;
  c.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  c.type = static_cast<uint8_t>(DataType::kFloat32);
  return c;
}

// Four ranks on two hosts, all in allreduce #73 and waiting, unless a test changes them.
std::vector<RankFacts> Waiting() {
  std::vector<RankFacts> ranks(4);
  for (int r = 0; r < 4; ++r) {
    RankFacts& f = ranks[r];
    f.pid = 1000 + r;
    f.host = r < 2 ? "a" : "b";
    f.same_host = r < 2;  // as rank 0
    f.answer.kind = Kind::kAnswered;
    f.answer.snapshot.state = State::kInCall;
    f.answer.snapshot.call = Allreduce(73);
    f.answer.snapshot.last_done_seq = 72;
    f.answer.snapshot.in_state_us = 5000000;
    f.answer.snapshot.since_progress_us = 4900000;
  }
  return ranks;
}

TEST(VerdictTest, SilentRankIsTheCulpritAndWaitersAreNot) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[1].answer = PeerAnswer();  // kSilent
  ranks[1].process_state = "stopped (SIGSTOP or a debugger)";
  const Verdict v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{1});
  EXPECT_NE(v.text.find("rank 1 (pid 1001 on host a) has made no progress in allreduce #73"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("for 4900 ms"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("stopped (SIGSTOP"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("ranks 0, 2, 3 were waiting on it [culprit: rank 1]"), std::string::npos) << v.text;
}

// A detected host identity names the host by its hostname alone: the namespace and boot
// id tell hosts apart, and belong in debug lines.
TEST(VerdictTest, HostsAreNamedByTheirHostname) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[1].host = "node-a/net:4026531833/boot:2a7001a1";
  ranks[1].answer = PeerAnswer();  // kSilent
  const Verdict v = Judge(0, ranks);
  EXPECT_NE(v.text.find("rank 1 (pid 1001 on host node-a) has made no progress"), std::string::npos) << v.text;
  EXPECT_EQ(v.text.find("net:"), std::string::npos) << v.text;
}

// Rank 3 still finishes allreduce #72, waiting on the stopped rank 2, while ranks 0 and 1
// are in #73: rank 3 waits, it is not to blame.
TEST(VerdictTest, RankBehindWaitingOnTheCulpritIsAWaiter) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[2].answer = PeerAnswer();
  ActivitySnapshot& behind = ranks[3].answer.snapshot;
  behind.call = Allreduce(72);
  behind.last_done_seq = 71;
  behind.waiting_on = {2};
  Verdict v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{2}) << v.text;
  EXPECT_NE(v.text.find("ranks 0, 1, 3 were waiting on it [culprit: rank 2]"), std::string::npos) << v.text;
  behind.waiting_on = {0};  // through a rank that is itself waiting: still a waiter
  v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{2}) << v.text;
  behind.waiting_on.clear();  // running, not yet waiting in #72 (a loaded host): a waiter too
  behind.since_progress_us = -1;
  v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{2}) << v.text;
  ranks[2] = ranks[1];  // nobody else to blame: the rank behind is the suspect
  v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{3}) << v.text;
  EXPECT_NE(v.text.find("rank 3 (pid 1003 on host b) is still in allreduce #72"), std::string::npos) << v.text;
}

TEST(VerdictTest, RankOutsideTesseraIsTheCulprit) {
  std::vector<RankFacts> ranks = Waiting();
  ActivitySnapshot& idle = ranks[2].answer.snapshot;
  idle.state = State::kIdle;
  idle.call = Allreduce(72);
  idle.in_state_us = 5003000;
  const Verdict v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{2});
  EXPECT_NE(v.text.find("rank 2 (pid 1002 on host b) has not called allreduce #73"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("outside tessera for 5003 ms since allreduce #72"), std::string::npos) << v.text;
}

TEST(VerdictTest, GoneRankIsTheCulprit) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[3].answer.kind = Kind::kRefused;
  ranks[3].answer.error = "connect: Connection refused";
  const Verdict v = Judge(1, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{3});
  EXPECT_NE(v.text.find("rank 3 (pid 1003 on host b) is gone during allreduce #73"), std::string::npos) << v.text;
}

TEST(VerdictTest, MismatchedCallNamesTheOddRank) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[2].answer.snapshot.call = Allreduce(73, 2048);
  const Verdict v = Judge(0, ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{2});
  EXPECT_NE(v.text.find("mismatched calls: rank 2 (pid 1002 on host b) called allreduce #73 (2048 x float32"),
            std::string::npos) << v.text;
  EXPECT_NE(v.text.find("the others called allreduce #73 (1024 x float32"), std::string::npos) << v.text;
}

TEST(VerdictTest, LocalNetworkFaultBlamesThisHost) {
  std::vector<RankFacts> ranks = Waiting();
  for (int r = 0; r < 4; ++r) ranks[r].same_host = r >= 2;  // as rank 2
  ranks[0].answer.kind = Kind::kLocalError;
  ranks[0].answer.error = "connect: Network is unreachable";
  ranks[1].answer.kind = Kind::kLocalError;
  const Verdict v = Judge(2, ranks);
  EXPECT_EQ(v.culprits, (std::vector<int32_t>{2, 3}));
  EXPECT_NE(v.text.find("host b (ranks 2, 3) cannot reach its peers"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("[culprit: ranks 2, 3]"), std::string::npos) << v.text;
}

TEST(VerdictTest, AVerdictAlreadyGivenIsAdopted) {
  std::vector<RankFacts> ranks = Waiting();
  ranks[1].answer = PeerAnswer();
  ranks[2].answer.snapshot.verdict = "rank 1 ... [culprit: rank 1]";
  ranks[2].answer.snapshot.culprits = {1};
  ranks[3].answer.snapshot.verdict = "something else [culprit: rank 0]";
  ranks[3].answer.snapshot.culprits = {0};
  const Verdict v = Judge(0, ranks);
  EXPECT_TRUE(v.adopted);
  EXPECT_EQ(v.adopted_from, 2);
  EXPECT_EQ(v.culprits, std::vector<int32_t>{1});
}

TEST(VerdictTest, EveryoneWaitingNamesNoCulprit) {
  const Verdict v = Judge(0, Waiting());
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_NE(v.text.find("no rank stopped: ranks 0, 1, 2, 3 are all in allreduce #73"), std::string::npos) << v.text;
  EXPECT_EQ(v.text.find("[culprit"), std::string::npos);
}

// A rank that cannot judge (it has no table) passes on the culprits a message names.
TEST(VerdictTest, CulpritsAreReadBackFromTheirTag) {
  EXPECT_EQ(CulpritsOfTag("x " + CulpritTag({2})), std::vector<int32_t>({2}));
  EXPECT_EQ(CulpritsOfTag("x " + CulpritTag({2, 30, 7})), std::vector<int32_t>({2, 30, 7}));
  EXPECT_EQ(CulpritsOfTag("[culprit: rank 1] then [culprit: rank 4]"), std::vector<int32_t>({4}));
  EXPECT_TRUE(CulpritsOfTag("no tag").empty());
  EXPECT_TRUE(CulpritsOfTag("[culprit: rendezvous host pid 42]").empty());
  EXPECT_TRUE(CulpritsOfTag("[culprit: rank ]").empty());
  EXPECT_TRUE(CulpritsOfTag("[culprit: rank 99999999999]").empty());
  EXPECT_TRUE(CulpritsOfTag("[culprit: rank").empty());
}

}  // namespace
}  // namespace tessera
