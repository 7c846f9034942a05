// Command-line flags of the *_perf programs, as nccl-tests spells them:
//   -b/--minbytes  -e/--maxbytes  (plain bytes, or with a K, M or G suffix = 2^10, 2^20, 2^30)
//   -f/--stepfactor (multiply; wins when > 1)  -i/--stepbytes (add)
//   -n/--iters  -w/--warmup_iters  -c/--check <0|1>  -o/--op <op|all>
//   -d/--datatype <type|all>  -h/--help
// -o and -d also take comma-separated lists ("-d int8,float -o sum,max"), an extension.
// and, for scripts written for nccl-tests, -t/--nthreads and -g/--ngpus accepting only 1
// (one process is one rank here).
#ifndef TESSERA_BENCH_PERF_OPTIONS_H_
#define TESSERA_BENCH_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "bench/perf_types.h"

namespace tessera_bench {

// Defaults are nccl-tests'.
struct PerfOptions {
  size_t min_bytes = size_t{32} << 20;
  size_t max_bytes = size_t{32} << 20;
  size_t step_bytes = size_t{1} << 20;  // used when step_factor == 1
  size_t step_factor = 1;
  int iters = 20;
  int warmup_iters = 5;
  // -D: the timed calls of a size run on, in batches, until they have lasted this long
  // on the slowest rank (0: just `iters`). For hosts shared with other work, where a
  // loop of short calls can fit between the other work's time slices and miss it.
  int min_duration_ms = 0;
  bool check = true;
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  std::vector<DataType> types = {DataType::kFloat32};
  bool help = false;  // -h: print usage and exit 0
};

struct ParsedOptions {
  bool ok = false;
  std::string error;  // when !ok: what was wrong, naming the flag
  PerfOptions options;
};

// Parses argv[1..argc-1]. Never prints, never exits.
ParsedOptions ParsePerfOptions(int argc, char** argv);

// The usage text (several lines, ends with a newline).
std::string PerfUsage(const std::string& program);

// "8", "64K", "64M", "1G" (either case) -> bytes. False on anything else or overflow.
bool ParseByteSize(const std::string& text, size_t* bytes);

// The sizes of the loop: min_bytes, then * step_factor (when > 1) or + step_bytes,
// while <= max_bytes. Stops if a step would not grow the size.
std::vector<size_t> SizeSeries(const PerfOptions& options);

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_OPTIONS_H_
