// sendrecv_perf: tessera's sendrecv measured as nccl-tests' sendrecv_perf measures NCCL's (flags,
// sizes, busbw factor and table: see perf_collectives_more.h and all_reduce_perf.cc).
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./sendrecv_perf -b 8 -e 16M -f 8
// mpi_sendrecv_perf is the same program over Open MPI.
#include "bench/perf_collectives_more.h"
#include "bench/tessera_backend.h"

int main(int argc, char** argv) {
  return tessera_bench::MorePerfMain(argc, argv, "sendrecv", [](std::string* error) {
    return std::unique_ptr<tessera_bench::CollectiveBackend>(
        tessera_bench::TesseraBackend::Create(error));
  });
}
