// How a waiting rank spends its core (transport/progress_policy.h): a rank blocked for a
// second in a collective, because a peer comes late, uses under 5% of a core, whether
// its polls pause the CPU or yield the core.
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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

}  // namespace
}  // namespace tessera_test
