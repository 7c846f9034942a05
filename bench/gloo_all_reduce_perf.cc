// gloo_all_reduce_perf: Gloo's allreduce (PyTorch's CPU collectives) measured exactly as
// all_reduce_perf measures tessera and mpi_all_reduce_perf Open MPI: same flags, same
// table, same checks (see all_reduce_perf.cc), plus the choice of Gloo algorithm.
//
//   cd bazel-bin/bench
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./gloo_all_reduce_perf -b 8 -e 64M -f 4
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./gloo_all_reduce_perf -A halving_doubling
//
// Extra flags (gloo_backend.h has the details):
//   -A,--algorithm ring|ring_chunked|halving_doubling|bcube|function_ring
//                        (default ring_chunked; printed in the table's first line)
//   --store_dir DIR      FileStore rendezvous directory seen by every rank (default
//                        $GLOO_PERF_STORE_DIR, else /tmp/gloo_perf_store.<job id>)
//   --timeout_s SECONDS  bound on every Gloo call (default 60)
// Rank and size come from mpirun (OMPI_COMM_WORLD_RANK/SIZE), Slurm or RANK/WORLD_SIZE;
// the TCP interface from GLOO_SOCKET_IFNAME (default loopback: ranks on one host).
// bfloat16 and avg, which Gloo lacks, end the run with a "rejected" message (exit 1).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/gloo_backend.h"
#include "bench/perf_collective.h"
#include "bench/perf_harness.h"
#include "bench/perf_options.h"

namespace {

// Whether this process prints what every rank would print alike (the launcher's rank 0).
bool PrintsForAll() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::atoi(value) == 0;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = "gloo_all_reduce_perf";
  tessera_bench::GlooOptions gloo_options;
  std::vector<char*> rest;
  std::string error = tessera_bench::ExtractGlooFlags(argc, argv, &gloo_options, &rest);
  if (!error.empty()) {
    if (PrintsForAll()) {
      std::fprintf(stderr, "%s: %s\n%s%s", program.c_str(), error.c_str(),
                   tessera_bench::PerfUsage(program).c_str(),
                   tessera_bench::GlooUsage().c_str());
    }
    return tessera_bench::kExitBadFlags;
  }
  const int rest_argc = static_cast<int>(rest.size()) - 1;  // rest ends with a null

  tessera_bench::AllReducePerf allreduce;
  int code = tessera_bench::PerfProgramMain(
      rest_argc, rest.data(), allreduce, [&gloo_options](std::string* backend_error) {
        return std::unique_ptr<tessera_bench::CollectiveBackend>(
            tessera_bench::GlooBackend::Create(gloo_options, backend_error));
      });
  // -h printed the harness's usage: the Gloo flags follow it.
  tessera_bench::ParsedOptions parsed = tessera_bench::ParsePerfOptions(rest_argc, rest.data());
  if (parsed.ok && parsed.options.help && PrintsForAll()) {
    std::fputs(tessera_bench::GlooUsage().c_str(), stdout);
  }
  return code;
}
