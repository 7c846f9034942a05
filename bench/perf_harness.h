// The benchmark harness shared by every *_perf program: the size loop, timing,
// validation and the nccl-tests table, for any PerfCollective over any
// CollectiveBackend.
//
// Per row (data type x op x size), for the out-of-place group and then the in-place
// group (where sendbuff == recvbuff):
//   1. fill the send data (for in-place: recvbuff, so repeated calls start from it);
//   2. -w warmup calls; a barrier; -n timed calls measured with std::chrono::steady_clock;
//      time = elapsed / n on each rank, then the maximum over ranks;
//   3. with -c 1: poison recvbuff, refill the send data, make one more call and count
//      the elements that differ from the exact result (summed over ranks). Checking a
//      separate call, as nccl-tests does, is what makes in-place checks meaningful:
//      repeated in-place sums accumulate.
// Only rank 0 prints. Failures are reported naming the rank, the call and the case.
#ifndef TESSERA_BENCH_PERF_HARNESS_H_
#define TESSERA_BENCH_PERF_HARNESS_H_

#include <functional>
#include <memory>
#include <string>

#include "bench/collective_backend.h"
#include "bench/perf_collective.h"
#include "bench/perf_options.h"

namespace tessera_bench {

// Process exit codes of the *_perf programs.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;    // a wrong value, or a call that failed
constexpr int kExitBadFlags = 2;  // usage printed

// Runs every row on this rank, printing the report on rank 0. Returns kExitOk or
// kExitFailed. After a kFailed outcome it has called backend.AbortJob().
int RunPerfTest(const std::string& program, const PerfOptions& options,
                CollectiveBackend& backend, PerfCollective& collective);

// Joins the job, or returns null and sets *error.
using BackendFactory = std::function<std::unique_ptr<CollectiveBackend>(std::string* error)>;

// The whole main() of a *_perf program: parses the flags (on bad flags prints the
// error and usage and returns kExitBadFlags, on -h prints usage and returns kExitOk,
// in both cases without joining the job), creates the backend, runs, leaves the job.
// Usage and errors that every rank would print alike are printed by the launcher's
// rank 0 only.
int PerfProgramMain(int argc, char** argv, PerfCollective& collective,
                    const BackendFactory& make_backend);

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_HARNESS_H_
