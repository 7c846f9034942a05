// How a waiting rank spends its core (transport/progress_policy.h): a rank blocked for a
// second in a collective, because a peer comes late, uses under 5% of a core, whether
// its polls pause the CPU or yield the core. And which of the two TESSERA_POLL=auto
// picks: yielding when the ranks on this kernel outnumber its cores, counting the
// ranks of other hosts emulated on it.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

class Progress : public ::testing::TestWithParam<const char*> {};

TEST_P(Progress, ABlockedRankUsesLittleOfItsCore) {
  RankOptions opts;
  opts.env["TESSERA_POLL"] = GetParam();
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    std::vector<float> buf(1024, 1.0f);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuSeconds();
    const tesseraResult_t r = tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm,
                                               nullptr);
    const double cpu = ThreadCpuSeconds() - cpu_start;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r != tesseraSuccess) return std::string("allreduce: ") + tesseraGetLastError(comm);
    if (buf[0] != 2.0f) return "allreduce gave " + std::to_string(buf[0]);
    if (rank != 0) return std::string();
    printf("[ info ] rank 0 waited %.3f s and used %.4f s of CPU (%.2f%%)\n", wall, cpu, 100 * cpu / wall);
    if (wall < 0.5) return "rank 0 waited only " + std::to_string(wall) + " s";
    if (cpu > 0.05 * wall) return "rank 0 used " + std::to_string(cpu) + " s of CPU in " + std::to_string(wall) + " s";
    return std::string();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Polls, Progress, ::testing::Values("auto", "yield", "pause"));

// Creates the communicator with its stderr in a file and returns the "ready" line the
// info log writes there (how its waits poll), or a failure starting "error: ".
std::string ReadyLine(const RankContext& ctx) {
  tesseraComm_t comm = nullptr;
  std::string init;
  std::istringstream text(CaptureStderr([&] { init = InitComm(ctx, &comm); }));
  if (!init.empty()) return "error: " + init;
  if (tesseraCommDestroy(comm) != tesseraSuccess) return "error: tesseraCommDestroy failed";
  std::string line;
  while (std::getline(text, line)) {
    if (line.find(" ready: ") != std::string::npos) return line;
  }
  return "error: no ready line in: " + text.str();
}

// Two emulated hosts (TESSERA_HOST_ID) on this machine, `per_host` ranks each: every
// rank's waits must poll `expected` ("yielding" or "pausing").
std::string EmulatedHostsPoll(int per_host, const std::string& expected) {
  RankOptions opts;
  opts.env["TESSERA_DEBUG"] = "INFO";
  opts.ranks_per_host = per_host;
  const int nranks = 2 * per_host;
  auto results = RunRanksRaw(nranks, [&](const RankContext& ctx) {
    const std::string line = ReadyLine(ctx);
    if (line.rfind("error: ", 0) == 0) return line;
    RankChecks c;
    c.ExpectContains(line, std::to_string(per_host) + " rank(s) on this host, " + std::to_string(nranks) +
                               " on its kernel", "the ranks counted");
    c.ExpectContains(line, "waits poll " + expected, "the poll mode");
    return c.str();
  }, opts);
  return Failures(results);
}

long OnlineCores() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

// Ranks of two emulated hosts that each fit the cores but together outnumber them share
// those cores: a rank's peer may be queued on its core, so its waits yield.
TEST(AutoPoll, YieldsWhenTheKernelsRanksOutnumberItsCores) {
  const int per_host = static_cast<int>(OnlineCores() / 2 + 1);  // 2 x per_host > cores >= per_host
  if (per_host > 16) GTEST_SKIP() << OnlineCores() << " cores: too many ranks to start here";
  EXPECT_EQ("", EmulatedHostsPoll(per_host, "yielding"));
}

TEST(AutoPoll, PausesWhenTheKernelsRanksFitItsCores) {
  if (OnlineCores() < 2) GTEST_SKIP() << "one core: two ranks outnumber it";
  EXPECT_EQ("", EmulatedHostsPoll(1, "pausing"));
}

}  // namespace
}  // namespace tessera_test
