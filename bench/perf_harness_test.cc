// Checks the harness end to end on one rank, over a one-rank backend written here (for
// one rank an allreduce is a copy): a correct backend passes with exit code 0, and
// backends that get results wrong, write nothing, or refuse a type are caught.
// The real backends run in perf_programs_test.sh, under mpirun.
#include "bench/perf_harness.h"

#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera_bench {
namespace {

enum class Flaw { kNone, kCorruptOneElement, kOutOfPlaceWritesNothing, kRejectsHalf };

class OneRankBackend : public CollectiveBackend {
 public:
  explicit OneRankBackend(Flaw flaw) : flaw_(flaw) {}
  std::string Description() const override { return "one-rank test backend"; }
  int Rank() const override { return 0; }
  int Size() const override { return 1; }
  Outcome AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                    ReduceOp op) override {
    (void)op;
    ++calls_;
    if (flaw_ == Flaw::kRejectsHalf && type == DataType::kFloat16) {
      return Outcome::Rejected("half is not supported here");
    }
    if (flaw_ == Flaw::kOutOfPlaceWritesNothing) return Outcome::Ok();
    if (sendbuff != recvbuff) std::memmove(recvbuff, sendbuff, count * ElementSize(type));
    if (flaw_ == Flaw::kCorruptOneElement && count > 3) {
      static_cast<unsigned char*>(recvbuff)[3 * ElementSize(type)] ^= 0x40;
    }
    return Outcome::Ok();
  }
  Outcome Barrier() override { return Outcome::Ok(); }
  Outcome MaxAcrossRanks(double*, size_t) override { return Outcome::Ok(); }
  Outcome SumAcrossRanks(int64_t*, size_t) override { return Outcome::Ok(); }
  int calls() const { return calls_; }

 private:
  Flaw flaw_;
  int calls_ = 0;
};

struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
  int calls;
};

RunResult RunWith(Flaw flaw, const PerfOptions& options) {
  OneRankBackend backend(flaw);
  AllReducePerf allreduce;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int code = RunPerfTest("test_perf", options, backend, allreduce);
  RunResult result{code, testing::internal::GetCapturedStdout(),
                   testing::internal::GetCapturedStderr(), backend.calls()};
  return result;
}

PerfOptions SmallRun() {
  PerfOptions options;
  options.min_bytes = 1;
  options.max_bytes = 64 << 10;
  options.step_factor = 4;
  options.iters = 3;
  options.warmup_iters = 2;
  options.types = AllDataTypes();
  options.ops = AllReduceOps();
  return options;
}

// SmallRun narrowed to one row: `type`, sum, `bytes` only.
PerfOptions OneRow(DataType type, size_t bytes) {
  PerfOptions options = SmallRun();
  options.types = {type};
  options.ops = {ReduceOp::kSum};
  options.min_bytes = bytes;
  options.max_bytes = bytes;
  return options;
}

// The whitespace-separated fields of the first table row.
std::vector<std::string> FirstRowFields(const std::string& text) {
  for (size_t start = 0; start < text.size(); start = text.find('\n', start) + 1) {
    if (text[start] == '#') continue;
    std::istringstream row(text.substr(start, text.find('\n', start) - start));
    std::vector<std::string> fields;
    for (std::string field; row >> field;) fields.push_back(field);
    return fields;
  }
  return {};
}

int CountRows(const std::string& text) {
  int rows = 0;
  for (size_t start = 0; start < text.size(); start = text.find('\n', start) + 1) {
    if (text[start] != '#') ++rows;
  }
  return rows;
}

TEST(PerfHarnessTest, CorrectBackendPassesEveryTypeAndOp) {
  RunResult run = RunWith(Flaw::kNone, SmallRun());
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("# Out of bounds values : 0 OK"), std::string::npos) << run.out;
  // Sizes 1, 4, ..., 64K: 9 sizes; those below one element are skipped (1 byte for
  // 2-, 4- and 8-byte types; 4 bytes for 8-byte types).
  const int sizes = 9;
  int expected_rows = 5 * (2 * sizes + 2 * (sizes - 1) + 3 * (sizes - 1) + 3 * (sizes - 2));
  EXPECT_EQ(CountRows(run.out), expected_rows) << run.out;
  // Each group: warmup + timed + checked calls.
  EXPECT_EQ(run.calls, expected_rows * 2 * (2 + 3 + 1));
}

// -D: the timed calls go on past -n until they have lasted the minimum duration.
TEST(PerfHarnessTest, MinimumDurationRunsMoreCallsThanIters) {
  PerfOptions options = OneRow(DataType::kInt32, 64);
  options.min_duration_ms = 30;
  const auto start = std::chrono::steady_clock::now();
  RunResult run = RunWith(Flaw::kNone, options);
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(CountRows(run.out), 1) << run.out;
  EXPECT_NE(run.out.find(" min duration: 30 ms\n"), std::string::npos) << run.out;
  EXPECT_GE(elapsed_ms, 30.0);
  // Two groups (out of place, in place), each far more than warmup + 3 timed + checked.
  EXPECT_GT(run.calls, 2 * (2 + 3 + 1) * 10);
}

TEST(PerfHarnessTest, WrongElementsAreCountedAndFailTheRun) {
  PerfOptions options = OneRow(DataType::kInt32, 64);
  RunResult run = RunWith(Flaw::kCorruptOneElement, options);
  EXPECT_EQ(run.exit_code, kExitFailed);
  // One wrong element in each group of the single row (#wrong: fields 8 and 12).
  std::vector<std::string> fields = FirstRowFields(run.out);
  ASSERT_EQ(fields.size(), 13u) << run.out;
  EXPECT_EQ(fields[8], "1");
  EXPECT_EQ(fields[12], "1");
  EXPECT_NE(run.out.find("# Out of bounds values : 2 FAILED"), std::string::npos) << run.out;
}

TEST(PerfHarnessTest, AnOutOfPlaceCallThatWritesNothingIsCaught) {
  // In place, doing nothing is right for one rank; out of place, recvbuff keeps the
  // poison written before the checked call.
  PerfOptions options = OneRow(DataType::kFloat32, 1024);
  RunResult run = RunWith(Flaw::kOutOfPlaceWritesNothing, options);
  EXPECT_EQ(run.exit_code, kExitFailed);
  std::vector<std::string> fields = FirstRowFields(run.out);
  ASSERT_EQ(fields.size(), 13u) << run.out;
  EXPECT_EQ(fields[8], "256");
  EXPECT_EQ(fields[12], "0");
  EXPECT_NE(run.out.find("# Out of bounds values : 256 FAILED"), std::string::npos) << run.out;
}

TEST(PerfHarnessTest, NoCheckMeansNotApplicable) {
  PerfOptions options = SmallRun();
  options.check = false;
  options.types = {DataType::kFloat32};
  options.ops = {ReduceOp::kSum};
  RunResult run = RunWith(Flaw::kCorruptOneElement, options);
  EXPECT_EQ(run.exit_code, kExitOk);
  std::vector<std::string> fields = FirstRowFields(run.out);
  ASSERT_EQ(fields.size(), 13u) << run.out;
  EXPECT_EQ(fields[8], "N/A");
  EXPECT_EQ(fields[12], "N/A");
}

TEST(PerfHarnessTest, ARejectedTypeStopsCleanlyWithTheMessage) {
  PerfOptions options = SmallRun();
  options.types = {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64};
  options.ops = {ReduceOp::kSum};
  RunResult run = RunWith(Flaw::kRejectsHalf, options);
  EXPECT_EQ(run.exit_code, kExitFailed);
  EXPECT_NE(run.err.find("half is not supported here"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("allreduce of 2 x half (sum, out-of-place): warmup call 0"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.out.find("double"), std::string::npos) << "ran on after the failure";
  EXPECT_NE(run.out.find("# stopped: allreduce of 2 x half"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace tessera_bench
