// The collectives the benchmark measures: buffer sizes, bus bandwidth and checks.
#include "bench/perf_collective.h"

namespace tessera_bench {

BufferCounts AllReducePerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  (void)nranks;
  size_t count = element_size == 0 ? 0 : bytes / element_size;
  return BufferCounts{count, count};
}

double AllReducePerf::BusBandwidthFactor(int nranks) const {
  return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

void AllReducePerf::Prepare(DataType type, ReduceOp op, int rank, int nranks) {
  send_pattern_.reset(new ElementPattern(SendPattern(type, op, rank, nranks)));
  expected_pattern_.reset(new ElementPattern(ReducedPattern(type, op, nranks)));
}

void AllReducePerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  send_pattern_->Fill(sendbuff, counts.send);
}

size_t AllReducePerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  return expected_pattern_->CountMismatches(recvbuff, counts.recv);
}

Outcome AllReducePerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                           const BufferCounts& counts, DataType type, ReduceOp op) const {
  return backend.AllReduce(sendbuff, recvbuff, counts.send, type, op);
}

}  // namespace tessera_bench
