// all_reduce_perf: tessera's allreduce bandwidth and latency, reported the way
// nccl-tests' all_reduce_perf reports NCCL's, flag for flag and column for column.
//
// Running it
//   bazel build --jobs=2 //bench:all_reduce_perf //bench:mpi_all_reduce_perf
//   cd bazel-bin/bench
//   ./all_reduce_perf -b 8 -e 64M -f 4                                   # alone: 1 rank
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./all_reduce_perf -b 8 -e 64M -f 4
//   mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi_all_reduce_perf -b 8 -e 64M -f 4
// The communicator is created with tesseraCommInitFromEnv: under mpirun (or Slurm, or
// torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) every process is one rank.
// mpi_all_reduce_perf measures Open MPI's MPI_Allreduce with the same flags and table,
// for a side-by-side comparison.
//
// Flags (nccl-tests'; sizes take K, M, G suffixes, powers of 2)
//   -b minbytes (32M)  -e maxbytes (32M)  -f step factor (1)  -i step bytes (1M; used
//   when -f is 1)  -n iterations (20)  -w warmup iterations (5)  -c check 0|1 (1)
//   -o sum|prod|max|min|avg|all (sum)  -d int8|uint8|int32|uint32|int64|uint64|half|
//   float|double|bfloat16|all (float)  -h help.  Bad flags: usage, exit code 2.
//   -o and -d also take comma-separated lists (-d int8,float -o sum,max).
// Each row and group: -w warmup calls, a barrier, -n timed calls, then (-c 1) one more
// call that is checked.
//
// Reading the table (rank 0 prints it)
//   size      bytes per rank buffer (count * element size); sizes below one element
//             are skipped
//   time      microseconds per call: the timed calls' average on each rank, then the
//             maximum over ranks (the collective is as slow as its slowest rank)
//   algbw     size / time, in GB/s with GB = 1e9 bytes
//   busbw     algbw * 2(n-1)/n: comparable across rank counts, and to the hardware's
//             bandwidth (0 for one rank)
//   #wrong    with -c 1, elements of one separate checked call that differ from the
//             exact expected result, summed over ranks; N/A with -c 0
// Out-of-place calls use distinct buffers, in-place calls sendbuff == recvbuff.
// The footer's "Avg bus bandwidth" averages busbw over every row and both groups.
// Exit code 0 when every value was right; 1 on a wrong value or a failed call (the
// error is printed, naming the call, the case and the rank; a type or op tessera does
// not support is reported the same way).
#include "bench/perf_collective.h"
#include "bench/perf_harness.h"
#include "bench/tessera_backend.h"

int main(int argc, char** argv) {
  tessera_bench::AllReducePerf allreduce;
  return tessera_bench::PerfProgramMain(argc, argv, allreduce, [](std::string* error) {
    return std::unique_ptr<tessera_bench::CollectiveBackend>(
        tessera_bench::TesseraBackend::Create(error));
  });
}
