// mpi_all_reduce_perf: Open MPI's MPI_Allreduce measured exactly as all_reduce_perf
// measures tessera (same flags, same table; see all_reduce_perf.cc for usage), so the
// two can run side by side with the same mpirun line:
//
//   cd bazel-bin/bench
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi_all_reduce_perf -b 8 -e 64M -f 4
//
// half and bfloat16 use user-defined MPI_Ops and avg is MPI_SUM plus a local division
// (mpi_backend.h): what an MPI user would write, since MPI has neither.
#include "bench/mpi_backend.h"
#include "bench/perf_collective.h"
#include "bench/perf_harness.h"

int main(int argc, char** argv) {
  tessera_bench::AllReducePerf allreduce;
  return tessera_bench::PerfProgramMain(argc, argv, allreduce, [](std::string* error) {
    return std::unique_ptr<tessera_bench::CollectiveBackend>(
        tessera_bench::MpiBackend::Create(error));
  });
}
