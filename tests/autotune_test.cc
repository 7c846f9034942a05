// The choice measured in the job (TESSERA_AUTOTUNE=1): every call sums right while the
// contenders are measured; each size is decided once, after the contenders' calls, on
// every rank the same way; tesseraAllReduceAlgorithm then names the winner, and rank 0
// saved it (TESSERA_AUTOTUNE_FILE) where a later communicator's TESSERA_ALGO_TABLE finds
// it. Where TESSERA_ALGO forces an algorithm nothing is measured.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kCalls = 600;  // more than 7 contenders x 5 turns x kTurnCalls
constexpr char kTurnCalls[] = "16";
const std::vector<size_t> kCounts = {2, 2048, 1 << 14};

std::string DecisionsFile(int rank) { return testing::TempDir() + "/autotune_rank" + std::to_string(rank) + ".txt"; }
std::string ChoicesFile() { return testing::TempDir() + "/autotune_choices.txt"; }
constexpr char kOtherLayoutRow[] = "allreduce 1x4 8 board";  // kept when the file is rewritten

// What tesseraAllReduceAlgorithm names for each of kCounts, in the decisions' format.
std::string Named(tesseraComm_t comm) {
  std::string named;
  for (size_t count : kCounts) {
    named += "allreduce of " + std::to_string(count * 4) + " B: " +
             tesseraAllReduceAlgorithm(comm, count, tesseraFloat32) + "\n";
  }
  return named;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// kCalls allreduces of each count, each checked; stderr (the info log) goes to a file
// meanwhile. Returns a failure, or "" and the log's text in `log`.
std::string SumWithLog(int rank, tesseraComm_t comm, std::string* log) {
  std::string failure;
  int n = 0;
  tesseraCommCount(comm, &n);
  *log = CaptureStderr([&] {
    for (size_t count : kCounts) {
      std::vector<float> buf(count);
      for (int call = 0; call < kCalls && failure.empty(); ++call) {
        std::fill(buf.begin(), buf.end(), static_cast<float>(rank + call));
        if (tesseraAllReduce(buf.data(), buf.data(), count, tesseraFloat32, tesseraSum, comm, nullptr) !=
            tesseraSuccess) {
          failure = std::string("allreduce: ") + tesseraGetLastError(comm);
        } else if (buf[0] != n * (n - 1) / 2.0f + n * call || buf[count - 1] != buf[0]) {
          failure = "call " + std::to_string(call) + " of " + std::to_string(count) + " elements: wrong sum";
        }
      }
    }
  });
  return failure;
}

// The winners the log names, one line per decision ("allreduce of 8 B: NAME").
std::string Decisions(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  const std::string mark = " B, measured in the job: ";
  while (std::getline(in, line)) {
    const size_t at = line.find(mark), of = line.find("allreduce of ");
    if (at == std::string::npos || of == std::string::npos) continue;
    const size_t name = at + mark.size();
    out += line.substr(of, at + 2 - of) + ": " + line.substr(name, line.find(' ', name) - name) + "\n";
  }
  return out;
}

// The model from a file, not the probe: a size is measured where two rows or more are
// predicted within kContenderSpread of the best, and under a sanitizer the probe's
// figures (alpha across 237 us, its floor 125) have put every row but one past that
// at 8 B. The built-in figures (a file of no keys keeps them) leave several contenders
// at each size.
std::string TuningFile() {
  const std::string path = testing::TempDir() + "/autotune_tuning.txt";
  std::ofstream(path) << "# the built-in figures\n";
  return path;
}

TEST(AutoTune, EveryRankRunsTheSameMeasuredAlgorithm) {
  RankOptions opts;
  opts.ranks_per_host = 2;  // 2x2: seven allreduce schedules apply
  opts.env["TESSERA_TUNING_FILE"] = TuningFile();
  opts.env["TESSERA_AUTOTUNE"] = "1";
  opts.env["TESSERA_AUTOTUNE_TURN_CALLS"] = kTurnCalls;
  opts.env["TESSERA_DEBUG"] = "INFO";
  opts.env["TESSERA_AUTOTUNE_FILE"] = ChoicesFile();
  std::ofstream(ChoicesFile()) << kOtherLayoutRow << "\n";
  auto results = RunRanks(4, [](int rank, tesseraComm_t comm) {
    std::string log;
    const std::string failure = SumWithLog(rank, comm, &log);
    if (!failure.empty()) return failure;
    const std::string decided = Decisions(log);
    const std::string named = Named(comm);
    if (decided != named) return "decided\n" + decided + "but tesseraAllReduceAlgorithm names\n" + named;
    std::ofstream(DecisionsFile(rank)) << decided;
    return std::string();
  }, opts);
  ASSERT_EQ("", Failures(results));
  std::vector<std::string> decided(4);
  for (int r = 0; r < 4; ++r) decided[r] = ReadFile(DecisionsFile(r));
  EXPECT_EQ(std::count(decided[0].begin(), decided[0].end(), '\n'), static_cast<long>(kCounts.size())) << decided[0];
  for (int r = 1; r < 4; ++r) EXPECT_EQ(decided[0], decided[r]) << "rank " << r;

  // The saved rows, read back as TESSERA_ALGO_TABLE: a new communicator of the layout
  // runs the winners from its first call, without measuring.
  const std::string saved = ReadFile(ChoicesFile());
  EXPECT_NE(std::string::npos, saved.find(kOtherLayoutRow)) << saved;
  RankOptions again;
  again.ranks_per_host = 2;
  again.env["TESSERA_ALGO_TABLE"] = ChoicesFile();
  const std::string want = decided[0];
  auto reread = RunRanks(4, [&want](int, tesseraComm_t comm) {
    const std::string named = Named(comm);
    return named == want ? std::string() : "saved\n" + want + "but TESSERA_ALGO_TABLE names\n" + named;
  }, again);
  EXPECT_EQ("", Failures(reread)) << saved;
}

TEST(AutoTune, AForcedAlgorithmIsNotMeasured) {
  RankOptions opts;
  opts.env["TESSERA_AUTOTUNE"] = "1";
  opts.env["TESSERA_AUTOTUNE_TURN_CALLS"] = kTurnCalls;
  opts.env["TESSERA_ALGO"] = "ring";
  opts.env["TESSERA_DEBUG"] = "INFO";
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    std::string log;
    const std::string failure = SumWithLog(rank, comm, &log);
    if (!failure.empty()) return failure;
    if (!Decisions(log).empty()) return "measured although TESSERA_ALGO=ring: " + Decisions(log);
    const bool ring_ran = log.find("allreduce of 8 B: ring") != std::string::npos;
    return ring_ran ? std::string() : std::string("the log does not show the ring running");
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// The setting and its turn length: ranks that differed would run different contenders.
TEST(AutoTune, MustBeTheSameOnEveryRank) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"TESSERA_AUTOTUNE", "0"},
                                                                   {"TESSERA_AUTOTUNE_TURN_CALLS", "32"}};
  for (const auto& differing : cases) {
    const std::string name = differing.first, value = differing.second;
    RankOptions opts;
    opts.env["TESSERA_AUTOTUNE"] = "1";
    opts.env_for_rank = [&](int rank) { return rank == 1 ? EnvVars{{name, value}} : EnvVars{}; };
    auto results = RunRanksRaw(2, [&](const RankContext& ctx) {
      tesseraComm_t comm = nullptr;
      const std::string init = InitComm(ctx, &comm);
      if (comm != nullptr) tesseraCommDestroy(comm);
      if (init.empty()) return "created with " + name + " differing";
      return init.find(name + " differs") == std::string::npos ? "init failed without naming " + name + ": " + init
                                                        : std::string();
    }, opts);
    EXPECT_EQ("", Failures(results)) << name;
  }
}

}  // namespace
}  // namespace tessera_test
