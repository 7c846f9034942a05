// Measured choices (TESSERA_ALGO_TABLE): on the layout a file names, the communicator
// runs the algorithm measured best from each size on, and the result is still the sum;
// on another layout the file changes nothing.
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

// Each rank: the algorithm of each count in `counts` and one allreduce of each, checked.
std::string ChosenAndSummed(int rank, tesseraComm_t comm, const std::vector<size_t>& counts, std::string* chosen) {
  int n = 0;
  tesseraCommCount(comm, &n);
  for (size_t count : counts) {
    const char* algo = tesseraAllReduceAlgorithm(comm, count, tesseraFloat32);
    if (algo == nullptr) return "tesseraAllReduceAlgorithm failed";
    *chosen += std::string(algo) + " ";
    std::vector<float> buf(count, static_cast<float>(rank + 1));
    if (tesseraAllReduce(buf.data(), buf.data(), count, tesseraFloat32, tesseraSum, comm, nullptr) != tesseraSuccess) {
      return std::string("allreduce: ") + tesseraGetLastError(comm);
    }
    if (buf[count - 1] != static_cast<float>(n * (n + 1) / 2)) return "wrong sum with " + std::string(algo);
  }
  return "";
}

std::string TableFile() {
  const std::string path = testing::TempDir() + "/measured_choices.txt";
  std::ofstream(path) << "# bench/algorithm_sweep -o\n"
                         "allreduce 2x2 8 hierarchical_leader\n"
                         "allreduce 2x2 8192 ring\n"
                         "allreduce 2x2 65536 torus\n";
  return path;
}

TEST(MeasuredChoice, RunsTheMeasuredAlgorithmOnItsLayout) {
  RankOptions opts;
  opts.ranks_per_host = 2;  // two emulated hosts of two ranks: 2x2
  opts.env["TESSERA_ALGO_TABLE"] = TableFile();
  auto results = RunRanks(4, [](int rank, tesseraComm_t comm) {
    std::string chosen;
    const std::string failure = ChosenAndSummed(rank, comm, {2, 2048, 4096, 1 << 16}, &chosen);
    if (!failure.empty()) return failure;
    const std::string want = "hierarchical_leader ring ring torus ";
    return chosen == want ? std::string() : "chose " + chosen + "instead of " + want;
  }, opts);
  EXPECT_EQ("", Failures(results));
}

TEST(MeasuredChoice, AnotherLayoutKeepsTheModelsChoice) {
  const std::string path = testing::TempDir() + "/measured_ring.txt";
  std::ofstream(path) << "allreduce 2x2 8 ring\n";
  RankOptions opts;  // one host of four ranks: the 2x2 row does not apply
  opts.env["TESSERA_ALGO_TABLE"] = path;
  opts.env["TESSERA_PROBE"] = "0";
  auto results = RunRanks(4, [](int rank, tesseraComm_t comm) {
    std::string chosen;
    const std::string failure = ChosenAndSummed(rank, comm, {2}, &chosen);
    if (!failure.empty()) return failure;
    // The model never takes the ring's 6 steps for 8 bytes on one host.
    return chosen.find("ring") == std::string::npos ? std::string() : "the 2x2 row was used: " + chosen;
  }, opts);
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
