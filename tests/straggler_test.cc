// Straggler detection end to end, in real processes on two emulated hosts (2 x 2: shared
// memory inside a host, TCP between): a rank that arrives late at every allreduce is
// named by every rank's tesseraCommGetHealth, logged at WARN by rank 0 when named and
// when no longer, and kept in the flight record; a balanced job of 10,000 allreduces
// names nobody at any point.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kRanks = 4;
constexpr int kLate = 3;           // the straggler
constexpr int kLateMs = 10;        // how late it comes to each allreduce
constexpr int kLateCalls = 150;    // allreduces with it late
constexpr int kOnTimeCalls = 200;  // then on time: the window (100) forgets it

RankOptions TwoHosts() {
  RankOptions opts;
  opts.ranks_per_host = 2;
  opts.timeout = Milliseconds(60000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_STRAGGLER_WINDOW"] = "100";
  opts.env["TESSERA_STRAGGLER_PERIOD_MS"] = "100";
  return opts;
}

tesseraHealth_t Health(tesseraComm_t comm, RankChecks* c, std::vector<double>* peers = nullptr) {
  tesseraHealth_t h = TESSERA_HEALTH_INITIALIZER;
  c->ExpectCode(tesseraCommGetHealth(comm, &h, peers ? peers->data() : nullptr, peers ? kRanks : 0), tesseraSuccess,
                "tesseraCommGetHealth");
  return h;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Straggler, ALateRankIsNamedByEveryRankAndForgottenOnceOnTime) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/straggler_" + std::to_string(getpid());
  ASSERT_EQ(0, system(("mkdir -p " + dir).c_str()));
  RankOptions opts = TwoHosts();
  opts.env["TESSERA_FLIGHT_RECORDER_DIR"] = dir;
  auto body = [](int rank, tesseraComm_t comm) {
    RankChecks c;
    std::vector<float> data(2, 1.0f);
    int named_at = -1;
    tesseraHealth_t h;
    auto late_phase = [&] {
      for (int i = 0; i < kLateCalls && c.ok(); ++i) {
        if (rank == kLate) std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
        c.ExpectCode(tesseraAllReduce(data.data(), data.data(), 2, tesseraFloat32, tesseraSum, comm, nullptr),
                     tesseraSuccess, "allreduce");
        h = Health(comm, &c);
        if (named_at < 0 && h.straggler == kLate) named_at = i + 1;
      }
    };
    const std::string log = rank == 0 ? CaptureStderr(late_phase) : (late_phase(), "");
    std::vector<double> peers(kRanks, -1.0);
    h = Health(comm, &c, &peers);
    std::fprintf(stderr, "straggler_test: rank %d named rank 3 after %d allreduces: %s\n", rank, named_at, h.verdict);
    c.Expect(named_at > 0, "rank 3 was never named (verdict: '" + std::string(h.verdict) + "')");
    c.Expect(h.straggler == kLate, "rank " + std::to_string(h.straggler) + " named at the end of the late phase");
    c.ExpectContains(h.verdict, "rank 3 (pid ", "the verdict");
    c.Expect(h.lateCalls >= h.windowCalls / 2 && h.waitShare >= 0.5,
             std::to_string(h.lateCalls) + " of " + std::to_string(h.windowCalls) + " calls late, wait share " +
                 std::to_string(h.waitShare));
    c.Expect(h.stragglerLagSeconds >= 0.005 && h.stragglerLagSeconds < 0.5,
             "median lag " + std::to_string(h.stragglerLagSeconds) + " s for " + std::to_string(kLateMs) + " ms late");
    c.Expect(h.calls >= static_cast<unsigned long long>(kLateCalls), "calls " + std::to_string(h.calls));
    if (rank != kLate) {
      c.Expect(h.stalledSeconds >= 0.5 * kLateCalls * kLateMs / 1000.0,
               "stalled only " + std::to_string(h.stalledSeconds) + " s");
      double on_peers = 0;
      for (double s : peers) on_peers += s;
      c.Expect(on_peers > 0 && peers[rank] == 0, "stalls by peer do not add up");
    }
    if (rank == 0) c.ExpectContains(log, "straggler: rank 3 (pid ", "rank 0's WARN log");
    if (!c.ok()) return c.str();
    // On time again: once the window holds fewer late calls than the share, nobody.
    std::string recovered = CaptureStderr([&] {
      for (int i = 0; i < kOnTimeCalls && c.ok(); ++i) {
        c.ExpectCode(tesseraAllReduce(data.data(), data.data(), 2, tesseraFloat32, tesseraSum, comm, nullptr),
                     tesseraSuccess, "allreduce");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the verdict reaches every rank
    });
    h = Health(comm, &c);
    c.Expect(h.straggler == -1, "rank " + std::to_string(h.straggler) + " still named once on time");
    if (rank == 0) c.ExpectContains(recovered, "straggler no longer: rank 3", "rank 0's WARN log");
    c.ExpectCode(tesseraCommDumpFlightRecord(comm), tesseraSuccess, "tesseraCommDumpFlightRecord");
    c.Expect(ArriveAndWait(0, kRanks, Milliseconds(10000)), "barrier");
    return c.str();
  };
  const auto results = RunRanks(kRanks, body, opts);
  ASSERT_EQ(Failures(results), "");
  // Every rank's flight record keeps the verdict's start and end.
  const std::string listing = "ls " + dir + "/tessera-flight-*-rank1.json";
  FILE* p = popen(listing.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char path[512] = {};
  ASSERT_NE(fgets(path, sizeof(path), p), nullptr);
  pclose(p);
  path[std::strcspn(path, "\n")] = '\0';
  const std::string record = ReadFile(path);
  EXPECT_NE(record.find("\"stragglers\": [{\"wall_us\": "), std::string::npos) << record;
  EXPECT_NE(record.find("\"verdict\": \"rank 3 (pid "), std::string::npos) << record;
  EXPECT_NE(record.find("\"verdict\": \"\"}]"), std::string::npos) << record;
}

TEST(Straggler, ABalancedJobNamesNobody) {
  RankOptions opts = TwoHosts();
  opts.env.erase("TESSERA_STRAGGLER_WINDOW");  // the default, 1000 calls
  auto body = [](int, tesseraComm_t comm) {
    RankChecks c;
    std::vector<float> data(2, 1.0f);
    for (int i = 1; i <= 10000 && c.ok(); ++i) {
      c.ExpectCode(tesseraAllReduce(data.data(), data.data(), 2, tesseraFloat32, tesseraSum, comm, nullptr),
                   tesseraSuccess, "allreduce");
      if (i % 100 != 0) continue;
      const tesseraHealth_t h = Health(comm, &c);
      c.Expect(h.straggler == -1, "after " + std::to_string(i) + " calls: " + h.verdict);
    }
    return c.str();
  };
  ASSERT_EQ(Failures(RunRanks(kRanks, body, opts)), "");
}

TEST(Straggler, HealthArgumentsAreChecked) {
  auto body = [](int, tesseraComm_t comm) {
    RankChecks c;
    tesseraHealth_t h = TESSERA_HEALTH_INITIALIZER;
    c.ExpectCode(tesseraCommGetHealth(comm, nullptr, nullptr, 0), tesseraInvalidArgument, "NULL health");
    h.size = 8;
    c.ExpectCode(tesseraCommGetHealth(comm, &h, nullptr, 0), tesseraInvalidArgument, "a short size");
    c.ExpectContains(LastError(comm), "TESSERA_HEALTH_INITIALIZER", "the error");
    h.size = sizeof(h);
    c.ExpectCode(tesseraCommGetHealth(comm, &h, nullptr, -1), tesseraInvalidArgument, "npeers -1");
    c.ExpectCode(tesseraCommGetHealth(nullptr, &h, nullptr, 0), tesseraInvalidArgument, "a NULL comm");
    double one = -1;
    c.ExpectCode(tesseraCommGetHealth(comm, &h, &one, 1), tesseraSuccess, "one peer");
    c.Expect(one == 0 && h.straggler == -1 && h.nranks == 2 && h.verdict[0] == '\0', "a fresh communicator's health");
    return c.str();
  };
  ASSERT_EQ(Failures(RunRanks(2, body)), "");
}

}  // namespace
}  // namespace tessera_test
