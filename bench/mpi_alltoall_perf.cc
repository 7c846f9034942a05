// mpi_alltoall_perf: Open MPI's alltoall measured exactly as alltoall_perf measures tessera's
// (same flags and table; see perf_collectives_more.h for the MPI call each uses).
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi_alltoall_perf -b 8 -e 16M -f 8
#include "bench/mpi_backend.h"
#include "bench/perf_collectives_more.h"

int main(int argc, char** argv) {
  return tessera_bench::MorePerfMain(argc, argv, "alltoall", [](std::string* error) {
    return std::unique_ptr<tessera_bench::CollectiveBackend>(
        tessera_bench::MpiBackend::Create(error));
  });
}
