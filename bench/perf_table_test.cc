// Checks the report text character for character against nccl-tests' layout, and the
// bandwidth arithmetic.
#include "bench/perf_table.h"

#include <gtest/gtest.h>

namespace tessera_bench {
namespace {

TEST(PerfTableTest, ColumnHeaderIsNcclTests) {
  EXPECT_EQ(FormatColumnHeader(),
            "#                                                              out-of-place"
            "                       in-place          \n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
            "            (us)  (GB/s)  (GB/s)       \n");
}

TEST(PerfTableTest, RowColumnsLineUpWithTheHeader) {
  TableRow row;
  row.bytes = 134217728;
  row.count = 33554432;
  row.type = DataType::kFloat32;
  row.op = ReduceOp::kSum;
  row.root = -1;
  row.out_of_place = GroupResult{1211.2, 110.81, 110.81, 0};
  row.in_place = GroupResult{1211.8, 110.76, 110.76, -1};
  EXPECT_EQ(FormatRow(row),
            "   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0"
            "   1211.8  110.76  110.76    N/A\n");
}

TEST(PerfTableTest, TimeLosesDecimalsAsItGrows) {
  TableRow row;
  row.out_of_place.time_us = 12.345;
  row.in_place.time_us = 123456.7;
  std::string text = FormatRow(row);
  EXPECT_NE(text.find("    12.35"), std::string::npos) << text;
  EXPECT_NE(text.find("   123457"), std::string::npos) << text;
  row.out_of_place.time_us = 9999.94;
  EXPECT_NE(FormatRow(row).find("  9999.9"), std::string::npos);
}

TEST(PerfTableTest, Bandwidths) {
  GroupResult group;
  group.time_us = 1000;  // 1 ms
  ComputeBandwidths(4000000, 2.0 * 3 / 4, &group);  // 4 MB in 1 ms, 4 ranks
  EXPECT_DOUBLE_EQ(group.algbw, 4.0);
  EXPECT_DOUBLE_EQ(group.busbw, 6.0);
}

TEST(PerfTableTest, Footer) {
  EXPECT_EQ(FormatFooter(0, 1.5),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  EXPECT_EQ(FormatFooter(12, 0.25),
            "# Out of bounds values : 12 FAILED\n# Avg bus bandwidth    : 0.25 \n#\n");
}

TEST(PerfTableTest, RunHeaderNamesTheArgumentsAndRanks) {
  RunDescription run;
  run.program = "all_reduce_perf";
  run.backend = "tessera 0.1.0";
  run.collective = "allreduce";
  run.bus_formula = "2(n-1)/n";
  run.nranks = 2;
  run.options.min_bytes = 8;
  run.options.max_bytes = 1024;
  run.options.step_factor = 2;
  run.rank_lines = {FormatRankLine(0, 123, "host"), FormatRankLine(1, 124, "host")};
  std::string text = FormatRunHeader(run);
  EXPECT_NE(text.find("# nRanks 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 "
                      "iters: 20 validation: 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("#  Rank  0 Pid    123 on       host\n#  Rank  1 Pid    124 on       host\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("maximum over ranks"), std::string::npos);
  for (size_t start = 0; start < text.size();) {  // every line is a comment
    EXPECT_EQ(text[start], '#') << text.substr(start);
    start = text.find('\n', start) + 1;
  }
}

}  // namespace
}  // namespace tessera_bench
