// PerfCollective: what differs between collectives in the benchmark (buffer sizes, bus
// bandwidth factor, test data and expected results, the call itself), so that the
// harness's size loop, timing and table are written once. nccl-tests calls this a
// "testColl". AllReducePerf is the first one; allgather, reduce-scatter, broadcast
// follow the same shape with their own counts, factors and expected patterns.
#ifndef TESSERA_BENCH_PERF_COLLECTIVE_H_
#define TESSERA_BENCH_PERF_COLLECTIVE_H_

#include <cstddef>
#include <memory>

#include "bench/collective_backend.h"
#include "bench/perf_data.h"
#include "bench/perf_types.h"

namespace tessera_bench {

// Elements in each rank's send and receive buffers for one measured size.
struct BufferCounts {
  size_t send = 0;
  size_t recv = 0;
};

class PerfCollective {
 public:
  virtual ~PerfCollective() = default;

  virtual const char* Name() const = 0;  // "allreduce"
  // The table's root column: -1 for collectives without a root.
  virtual int Root() const { return -1; }

  // The buffers measured when the size loop asks for `bytes` (rounded down to whole
  // elements; zero counts are skipped by the harness).
  virtual BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const = 0;
  // For in-place runs, where this rank's send data lives inside recvbuff, in elements.
  virtual size_t InPlaceSendOffset(const BufferCounts& counts, int rank) const {
    (void)counts;
    (void)rank;
    return 0;
  }
  // busbw = algbw * this (nccl-tests' PERFORMANCE.md): the fraction of the data each
  // rank must move over its busiest link with an optimal algorithm.
  virtual double BusBandwidthFactor(int nranks) const = 0;
  virtual const char* BusBandwidthFormula() const = 0;  // the factor as text: "2(n-1)/n"

  // Builds this rank's send data and the expected result for (type, op); the two
  // calls below use them.
  virtual void Prepare(DataType type, ReduceOp op, int rank, int nranks) = 0;
  virtual void FillSend(void* sendbuff, const BufferCounts& counts) const = 0;
  // Number of elements of recvbuff that differ from the expected result.
  virtual size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const = 0;

  virtual Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                      const BufferCounts& counts, DataType type, ReduceOp op) const = 0;
};

// Allreduce: count elements in, count elements out, busbw factor 2(n-1)/n.
class AllReducePerf : public PerfCollective {
 public:
  const char* Name() const override { return "allreduce"; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "2(n-1)/n"; }
  void Prepare(DataType type, ReduceOp op, int rank, int nranks) override;
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;

 private:
  std::unique_ptr<ElementPattern> send_pattern_;
  std::unique_ptr<ElementPattern> expected_pattern_;
};

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_COLLECTIVE_H_
