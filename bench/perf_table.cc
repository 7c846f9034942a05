// nccl-tests' report layout, column widths included, so that tools and eyes used to
// reading all_reduce_perf output read ours the same way.
#include "bench/perf_table.h"

#include <cstdarg>
#include <cstdio>

namespace tessera_bench {
namespace {

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int length = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(&text[0], text.size() + 1, format, args);
  va_end(args);
  return text;
}

// Microseconds with fewer decimals as they grow, as nccl-tests prints them.
std::string FormatTime(double time_us) {
  if (time_us >= 10000.0) return Printf("%7.0f", time_us);
  if (time_us >= 100.0) return Printf("%7.1f", time_us);
  return Printf("%7.2f", time_us);
}

std::string FormatGroup(const GroupResult& group) {
  std::string wrong = group.wrong < 0 ? "N/A" : std::to_string(group.wrong);
  return Printf("  %7s  %6.2f  %6.2f  %5s", FormatTime(group.time_us).c_str(), group.algbw,
                group.busbw, wrong.c_str());
}

}  // namespace

void ComputeBandwidths(size_t bytes, double bus_factor, GroupResult* group) {
  // bytes / (time_us * 1e-6 s) / 1e9 B/GB = bytes / time_us / 1e3.
  group->algbw = group->time_us > 0 ? static_cast<double>(bytes) / group->time_us / 1.0e3 : 0;
  group->busbw = group->algbw * bus_factor;
}

std::string FormatRankLine(int rank, int pid, const std::string& host) {
  return Printf("#  Rank %2d Pid %6d on %10s", rank, pid, host.c_str());
}

std::string FormatRunHeader(const RunDescription& run) {
  const PerfOptions& o = run.options;
  bool by_factor = o.step_factor > 1;
  std::string text;
  text += Printf("# %s: %s, %s, %d rank%s\n", run.program.c_str(), run.collective.c_str(),
                 run.backend.c_str(), run.nranks, run.nranks == 1 ? "" : "s");
  text += Printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s)", run.nranks, o.min_bytes,
                 o.max_bytes, by_factor ? o.step_factor : o.step_bytes,
                 by_factor ? "factor" : "bytes");
  text += Printf(" warmup iters: %d iters: %d validation: %d", o.warmup_iters, o.iters, o.check ? 1 : 0);
  text += o.min_duration_ms > 0 ? Printf(" min duration: %d ms\n", o.min_duration_ms) : "\n";
  text += "#\n";
  text += "# time: average of one call over the timed iterations, the maximum over ranks (us)\n";
  if (o.min_duration_ms > 0) {
    text += "# timed iterations: -n, then more until they last the min duration on every rank\n";
  }
  text += "# algbw = size / time; busbw = algbw * " + run.bus_formula +
          "; GB/s with GB = 1e9 bytes\n";
  text += "# #wrong: elements that differ from the exact result, summed over ranks"
          " (one call checked)\n";
  text += "#\n";
  text += "# Using ranks\n";
  for (const std::string& line : run.rank_lines) text += line + "\n";
  text += "#\n";
  return text;
}

std::string FormatColumnHeader() {
  std::string text;
  // The five leading columns, then each group's four (the last two lines differ in how
  // #wrong's header and units are spaced, as in nccl-tests).
  const char* const kLeading = "# %10s  %12s  %8s  %6s  %6s";
  text += Printf(kLeading, "", "", "", "", "") +
          "           out-of-place                       in-place          \n";
  text += Printf(kLeading, "size", "count", "type", "redop", "root") +
          Printf("  %7s  %6s  %6s %6s", "time", "algbw", "busbw", "#wrong") +
          Printf("  %7s  %6s  %6s %6s\n", "time", "algbw", "busbw", "#wrong");
  text += Printf(kLeading, "(B)", "(elements)", "", "", "") +
          Printf("  %7s  %6s  %6s  %5s", "(us)", "(GB/s)", "(GB/s)", "") +
          Printf("  %7s  %6s  %6s  %5s\n", "(us)", "(GB/s)", "(GB/s)", "");
  return text;
}

std::string FormatRow(const TableRow& row) {
  return Printf("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, DataTypeName(row.type),
                ReduceOpName(row.op), row.root) +
         FormatGroup(row.out_of_place) + FormatGroup(row.in_place) + "\n";
}

std::string FormatFooter(int64_t wrong_total, double average_busbw) {
  std::string text;
  text += Printf("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(wrong_total),
                 wrong_total == 0 ? "OK" : "FAILED");
  text += Printf("# %-20s : %g \n", "Avg bus bandwidth", average_busbw);
  text += "#\n";
  return text;
}

}  // namespace tessera_bench
