// Surviving a lost rank: rank(s) killed (SIGKILL) or stopped (SIGSTOP) in the middle of
// a large allreduce; the survivors see the failure, revoke the communicator, shrink it
// to themselves and run 100 rounds of every collective, checked, on the new one. On one
// host (4 ranks over shared memory) and on two emulated hosts of two ranks (one rank of
// each host lost; TCP between the hosts). Each survivor prints the time from the fault
// to its first collective completed on the shrunk communicator.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/collective_calls.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kRanks = 4;
constexpr int kRounds = 100;
constexpr int kFaultAfterMs = 20;

struct ShrinkCase {
  const char* name;
  int ranks_per_host;       // 0: one host
  std::vector<int> victims;
  int signo;
  enum List { kExplicit, kCulprits, kLost } list;  // the victims; excludeCount 0 (what the
                                                   // diagnosis named); TESSERA_SHRINK_LOST
};

void PrintTo(const ShrinkCase& c, std::ostream* os) { *os << c.name; }

bool IsVictim(const ShrinkCase& c, int rank) {
  return std::find(c.victims.begin(), c.victims.end(), rank) != c.victims.end();
}

// One round: every collective once, with its results checked.
std::string RunRound(tesseraComm_t comm, int round) {
  int rank = 0, nranks = 0;
  tesseraCommUserRank(comm, &rank);
  tesseraCommCount(comm, &nranks);
  for (Collective kind : AllCollectives()) {
    const CallSpec spec{kind, tesseraFloat32, OpsOf(kind)[round % OpsOf(kind).size()],
                        Placements(kind)[round % Placements(kind).size()], round % nranks, 1031, round};
    PreparedCall call(spec, rank, nranks);
    std::string step;
    tesseraResult_t r = call.CreateOp(comm);
    if (r == tesseraSuccess) r = call.Issue(comm, &step);
    if (r != tesseraSuccess) return call.what() + ": " + step + ": " + LastError(comm);
    const std::string wrong = call.Check();
    if (!wrong.empty()) return call.what() + ": " + wrong;
    call.DestroyOp(comm);
  }
  return "";
}

// The survivor's side: the failed allreduce, revoke, shrink, the rounds.
std::string Survive(const ShrinkCase& c, int rank, tesseraComm_t comm, tesseraResult_t failed,
                    std::chrono::steady_clock::time_point fault) {
  RankChecks checks;
  if (failed == tesseraSuccess) {
    // The fault came after this rank's part of the allreduce was done (a loaded
    // machine can delay the victim's signal): its next call is the one that fails.
    float one = 1.0f;
    failed = tesseraAllReduce(&one, &one, 1, tesseraFloat32, tesseraSum, comm, nullptr);
  }
  checks.Expect(failed == tesseraRemoteError || failed == tesseraTimeout,
                "the allreduce with a lost rank returned " + std::to_string(failed) + ": " + LastError(comm));
  checks.ExpectCode(tesseraCommRevoke(comm, 0), tesseraSuccess, "tesseraCommRevoke: " + LastError(comm));
  tesseraComm_t shrunk = nullptr;
  const bool given = c.list == ShrinkCase::kExplicit;
  const tesseraResult_t r = tesseraCommShrink(comm, given ? c.victims.data() : nullptr,
                                              given ? static_cast<int>(c.victims.size()) : 0, &shrunk, nullptr,
                                              c.list == ShrinkCase::kLost ? TESSERA_SHRINK_LOST : TESSERA_SHRINK_DEFAULT);
  if (!checks.ExpectCode(r, tesseraSuccess, "tesseraCommShrink: " + LastError(comm))) return checks.str();
  int nranks = 0, new_rank = -1;
  tesseraCommCount(shrunk, &nranks);
  tesseraCommUserRank(shrunk, &new_rank);
  checks.Expect(nranks == kRanks - static_cast<int>(c.victims.size()), "shrunk to " + std::to_string(nranks));
  int expected_rank = 0;
  for (int r2 = 0; r2 < rank; ++r2) expected_rank += IsVictim(c, r2) ? 0 : 1;
  checks.Expect(new_rank == expected_rank, "new rank " + std::to_string(new_rank));
  for (int round = 0; round < kRounds && checks.str().empty(); ++round) {
    const std::string wrong = RunRound(shrunk, round);
    checks.Expect(wrong.empty(), "round " + std::to_string(round) + " on the shrunk communicator: " + wrong);
    if (round == 0) {
      printf("[ info ] rank %d (%s): fault to first collective on the shrunk communicator: %.3f s\n", rank, c.name,
             SecondsSince(fault));
    }
  }
  checks.ExpectCode(tesseraCommDestroy(shrunk), tesseraSuccess, "destroying the shrunk communicator");
  return checks.str();
}

class Shrink : public testing::TestWithParam<ShrinkCase> {};

TEST_P(Shrink, SurvivorsCarryOn) {
  const ShrinkCase c = GetParam();
  RankOptions opts;
  opts.timeout = Milliseconds(90000);
  opts.ranks_per_host = c.ranks_per_host;
  opts.env["TESSERA_TIMEOUT_MS"] = "3000";
  auto results = RunRanks(kRanks, [c](int rank, tesseraComm_t comm) {
    std::vector<int32_t> pids(kRanks);
    int32_t mine = getpid();
    if (tesseraAllGather(&mine, pids.data(), 1, tesseraInt32, comm, nullptr) != tesseraSuccess) {
      return "allgather of pids: " + LastError(comm);
    }
    const size_t big = size_t{16} << 20;
    std::vector<float> buf(big, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    if (IsVictim(c, rank)) {
      std::thread([c] {
        std::this_thread::sleep_for(std::chrono::milliseconds(kFaultAfterMs));
        raise(c.signo);
      }).detach();
    }
    const tesseraResult_t failed =
        tesseraAllReduce(buf.data(), buf.data(), big, tesseraFloat32, tesseraSum, comm, nullptr);
    if (IsVictim(c, rank)) pause();  // its allreduce ended before the signal: wait for it
    const std::string outcome = Survive(c, rank, comm, failed, start + std::chrono::milliseconds(kFaultAfterMs));
    ArriveAndWait(0, kRanks - static_cast<int>(c.victims.size()), Milliseconds(60000));
    if (rank == 0 && c.signo == SIGSTOP) {
      for (int v : c.victims) kill(pids[v], SIGKILL);
    }
    return outcome;
  }, opts);
  ASSERT_EQ(static_cast<size_t>(kRanks), results.size());
  for (int r = 0; r < kRanks; ++r) {
    if (IsVictim(c, r)) {
      EXPECT_EQ(SIGKILL, results[r].signal) << results[r].Describe();
    } else {
      EXPECT_TRUE(results[r].ok()) << results[r].Describe();
    }
  }
}

// tesseraCommRevoke from a second thread while the first is blocked in an allreduce that
// cannot complete (rank 1 has not called it): the call returns promptly saying it was
// revoked. Rank 1's matching allreduce may still complete from the message rank 0 had
// already delivered (it needs nothing more from rank 0); its next one, which would, fails
// at once with rank 0's word.
TEST(Revoke, FromAnotherThreadEndsTheBlockedCallEverywhere) {
  RankOptions opts;
  opts.env["TESSERA_TIMEOUT_MS"] = "20000";
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    std::vector<float> buf(1024, 1.0f);
    if (rank == 1) {
      c.Expect(WaitForRanksDone({0}, Milliseconds(30000)), "rank 0 never finished");
      tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm, nullptr);
      const auto start = std::chrono::steady_clock::now();
      const tesseraResult_t r =
          tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm, nullptr);
      c.ExpectCode(r, tesseraRemoteError, "the second allreduce after rank 0 revoked");
      c.Expect(LastError(comm).find("rank 0 revoked the communicator") != std::string::npos,
               "rank 1's error: " + LastError(comm));
      c.Expect(SecondsSince(start) < 2.0, "rank 1's call took " + std::to_string(SecondsSince(start)) + " s");
      return c.str();
    }
    std::thread revoker([comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      tesseraCommRevoke(comm, 0);
    });
    const auto start = std::chrono::steady_clock::now();
    const tesseraResult_t r =
        tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm, nullptr);
    revoker.join();
    c.ExpectCode(r, tesseraRemoteError, "the blocked allreduce");
    c.Expect(LastError(comm).find("revoked") != std::string::npos, "rank 0's error: " + LastError(comm));
    c.Expect(SecondsSince(start) < 1.5, "the blocked call took " + std::to_string(SecondsSince(start)) + " s");
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// A survivor revokes before anyone has diagnosed a failure, so every other survivor's
// call fails with "rank 0 revoked" and names no culprit: shrinking with an empty list
// then leaves out the rank that does not answer (stopped, never in a call).
TEST(Shrink, AfterARevokeAloneLeavesOutTheSilentRank) {
  RankOptions opts;
  opts.timeout = Milliseconds(60000);
  opts.env["TESSERA_TIMEOUT_MS"] = "5000";
  auto results = RunRanks(kRanks, [](int rank, tesseraComm_t comm) {
    std::vector<int32_t> pids(kRanks);
    int32_t mine = getpid();
    if (tesseraAllGather(&mine, pids.data(), 1, tesseraInt32, comm, nullptr) != tesseraSuccess) {
      return "allgather of pids: " + LastError(comm);
    }
    if (rank == 2) {
      raise(SIGSTOP);
      pause();
    }
    RankChecks c;
    float one = 1.0f;
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      c.ExpectCode(tesseraCommRevoke(comm, 0), tesseraSuccess, "tesseraCommRevoke");
    } else {
      const tesseraResult_t r = tesseraAllReduce(&one, &one, 1, tesseraFloat32, tesseraSum, comm, nullptr);
      c.ExpectCode(r, tesseraRemoteError, "the allreduce after rank 0 revoked");
      c.Expect(LastError(comm).find("rank 0 revoked") != std::string::npos, "rank's error: " + LastError(comm));
      c.ExpectCode(tesseraCommRevoke(comm, 0), tesseraSuccess, "tesseraCommRevoke");
    }
    tesseraComm_t shrunk = nullptr;
    const tesseraResult_t r = tesseraCommShrink(comm, nullptr, 0, &shrunk, nullptr, TESSERA_SHRINK_DEFAULT);
    if (!c.ExpectCode(r, tesseraSuccess, "tesseraCommShrink: " + LastError(comm))) return c.str();
    int nranks = 0;
    tesseraCommCount(shrunk, &nranks);
    c.Expect(nranks == kRanks - 1, "shrunk to " + std::to_string(nranks) + " ranks, want 3");
    if (c.str().empty()) c.Expect(RunRound(shrunk, 0).empty(), "a round on the shrunk communicator");
    c.ExpectCode(tesseraCommDestroy(shrunk), tesseraSuccess, "destroying the shrunk communicator");
    ArriveAndWait(0, kRanks - 1, Milliseconds(30000));
    if (rank == 0) kill(pids[2], SIGKILL);
    return c.str();
  }, opts);
  ASSERT_EQ(static_cast<size_t>(kRanks), results.size());
  EXPECT_EQ(SIGKILL, results[2].signal) << results[2].Describe();
  for (int r : {0, 1, 3}) EXPECT_TRUE(results[r].ok()) << results[r].Describe();
}

// A rank that is computing (outside tessera) when the others' call fails is a culprit of
// their diagnosis ("has not called"), so a shrink with excludeCount 0 would leave it out;
// it is not lost, and TESSERA_SHRINK_LOST keeps it. Rank 3 is killed in an allreduce
// that rank 2 joins only 1.5 s later: ranks 0 and 1 shrink at once, rank 2 when its own
// call fails, and the three run checked rounds of every collective.
TEST(ShrinkLost, KeepsARankThatWasComputing) {
  RankOptions opts;
  opts.timeout = Milliseconds(60000);
  // The ring, whatever the model measures at creation: the test needs ranks 0 and 1 to
  // wait on rank 3 while rank 2 still computes. In Rabenseifner's halving (partners at
  // distance 2 first) rank 3 finishes its round with rank 1 before it dies, and ranks 0
  // and 1 then wait on rank 2, rightly: nobody notices rank 3 until rank 2 joins.
  opts.env["TESSERA_ALGO"] = "ring";
  opts.env["TESSERA_TIMEOUT_MS"] = "5000";
  auto results = RunRanks(kRanks, [](int rank, tesseraComm_t comm) {
    RankChecks checks;
    std::vector<float> buf(size_t{1} << 20, 1.0f);
    if (rank == 3) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(kFaultAfterMs));
        raise(SIGKILL);
      }).detach();
    }
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const tesseraResult_t failed =
        tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm, nullptr);
    if (rank == 3) pause();
    checks.Expect(failed == tesseraRemoteError || failed == tesseraTimeout,
                  "the allreduce with a lost rank returned " + std::to_string(failed) + ": " + LastError(comm));
    if (rank < 2) {
      checks.Expect(LastError(comm).find("rank 2 (pid") != std::string::npos,
                    "the diagnosis does not blame rank 2, which was computing: " + LastError(comm));
    }
    checks.ExpectCode(tesseraCommRevoke(comm, 0), tesseraSuccess, "tesseraCommRevoke: " + LastError(comm));
    tesseraComm_t shrunk = nullptr;
    const tesseraResult_t r = tesseraCommShrink(comm, nullptr, 0, &shrunk, nullptr, TESSERA_SHRINK_LOST);
    if (!checks.ExpectCode(r, tesseraSuccess, "tesseraCommShrink: " + LastError(comm))) return checks.str();
    int nranks = 0, new_rank = -1;
    tesseraCommCount(shrunk, &nranks);
    tesseraCommUserRank(shrunk, &new_rank);
    checks.Expect(nranks == 3 && new_rank == rank, "rank " + std::to_string(new_rank) + " of " + std::to_string(nranks));
    for (int round = 0; round < 10 && checks.str().empty(); ++round) {
      const std::string wrong = RunRound(shrunk, round);
      checks.Expect(wrong.empty(), "round " + std::to_string(round) + " on the shrunk communicator: " + wrong);
    }
    checks.ExpectCode(tesseraCommDestroy(shrunk), tesseraSuccess, "destroying the shrunk communicator");
    return checks.str();
  }, opts);
  ASSERT_EQ(static_cast<size_t>(kRanks), results.size());
  EXPECT_EQ(SIGKILL, results[3].signal) << results[3].Describe();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(results[r].ok()) << results[r].Describe();
}

// TESSERA_SHRINK_LOST finds the lost ranks itself: an exclude list with it is refused.
TEST(ShrinkLost, RefusesAnExcludeList) {
  auto results = RunRanks(1, [](int, tesseraComm_t comm) {
    RankChecks checks;
    int exclude = 0;
    tesseraComm_t shrunk = nullptr;
    checks.ExpectCode(tesseraCommShrink(comm, &exclude, 1, &shrunk, nullptr, TESSERA_SHRINK_LOST),
                      tesseraInvalidArgument, "TESSERA_SHRINK_LOST with a list");
    checks.Expect(LastError(comm).find("TESSERA_SHRINK_LOST with an exclude list") != std::string::npos,
                  "message: " + LastError(comm));
    return checks.str();
  });
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, Shrink,
    testing::Values(ShrinkCase{"killed_1x4", 0, {2}, SIGKILL, ShrinkCase::kExplicit},
                    ShrinkCase{"killed_2x2", 2, {1, 3}, SIGKILL, ShrinkCase::kExplicit},
                    ShrinkCase{"stopped_1x4", 0, {2}, SIGSTOP, ShrinkCase::kCulprits},
                    ShrinkCase{"stopped_2x2", 2, {1, 3}, SIGSTOP, ShrinkCase::kCulprits},
                    ShrinkCase{"stopped_2x2_lost", 2, {1, 3}, SIGSTOP, ShrinkCase::kLost}),
    [](const testing::TestParamInfo<ShrinkCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera_test
