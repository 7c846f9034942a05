// The text of a benchmark report, in nccl-tests' layout: `# ` header lines, a column
// header with an out-of-place and an in-place group, one row per size, and the footer
// ("Out of bounds values", "Avg bus bandwidth"). Pure formatting: every function
// returns text, which rank 0 prints.
#ifndef TESSERA_BENCH_PERF_TABLE_H_
#define TESSERA_BENCH_PERF_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/perf_options.h"
#include "bench/perf_types.h"

namespace tessera_bench {

// One group of a row (out-of-place or in-place).
struct GroupResult {
  double time_us = 0;  // average per iteration, max over ranks
  double algbw = 0;    // GB/s, GB = 1e9 bytes
  double busbw = 0;
  int64_t wrong = -1;  // wrong elements summed over ranks; -1 when not checked (-c 0)
};

struct TableRow {
  size_t bytes = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;
  GroupResult out_of_place;
  GroupResult in_place;
};

// Fills algbw and busbw from time_us: algbw = bytes / time, busbw = algbw * factor.
void ComputeBandwidths(size_t bytes, double bus_factor, GroupResult* group);

// "#  Rank  0 Pid  12345 on   hostname" (nccl-tests' per-rank line, without devices).
std::string FormatRankLine(int rank, int pid, const std::string& host);

// The `# ` lines describing the run: program, backend, arguments, how columns are
// computed, then the rank lines.
struct RunDescription {
  std::string program;       // "all_reduce_perf"
  std::string backend;       // "tessera 0.1.0"
  std::string collective;    // "allreduce"
  std::string bus_formula;   // "2(n-1)/n"
  int nranks = 1;
  PerfOptions options;
  std::vector<std::string> rank_lines;
};
std::string FormatRunHeader(const RunDescription& run);

// The three column-header lines (group titles, names, units).
std::string FormatColumnHeader();

// One row, ending with a newline.
std::string FormatRow(const TableRow& row);

// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#".
std::string FormatFooter(int64_t wrong_total, double average_busbw);

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_TABLE_H_
