// The PerfCollectives of nccl-tests' other programs: allgather, reduce-scatter,
// broadcast, reduce, alltoall and sendrecv (allreduce is in perf_collective.h), and
// the main() their tessera and Open MPI programs share.
//
// Sizes follow nccl-tests: `size` is the whole buffer the collective is about:
//   allgather       the receive buffer (nranks * sendcount)
//   reduce-scatter  the send buffer (nranks * recvcount)
//   alltoall        each rank's send (= receive) buffer (nranks * per-peer count)
//   broadcast, reduce, sendrecv   the one buffer (count)
// Bus bandwidth factors (nccl-tests' PERFORMANCE.md): allgather, reduce-scatter and
// alltoall (n-1)/n; broadcast, reduce and sendrecv 1.
// In place follows nccl.h: allgather sends from recvbuff + rank * sendcount,
// reduce-scatter receives at sendbuff + rank * recvcount, the others use one buffer.
// sendrecv is a ring: rank r sends to r+1 and receives from r-1.
// Open MPI twins: MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce,
// MPI_Alltoall, MPI_Sendrecv (MPI_Sendrecv_replace in place); see mpi_backend.cc.
//
// Checks are exact. Data that is only moved is a small integer per (source rank,
// destination rank, element) that every type holds exactly; reductions use
// perf_data.h's patterns. Collectives that do not reduce ignore -o (the table still
// names the op of each pass).
#ifndef TESSERA_BENCH_PERF_COLLECTIVES_MORE_H_
#define TESSERA_BENCH_PERF_COLLECTIVES_MORE_H_

#include <memory>
#include <string>
#include <vector>

#include "bench/perf_collective.h"
#include "bench/perf_harness.h"

namespace tessera_bench {

// Base of the collectives below: remembers the case Prepare was given.
class PreparedCollective : public PerfCollective {
 public:
  void Prepare(DataType type, ReduceOp op, int rank, int nranks) override;

 protected:
  // The pattern of data moved from rank `source` to rank `destination`.
  ElementPattern MovedPattern(int source, int destination) const;
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  int rank_ = 0;
  int nranks_ = 1;
};

class AllGatherPerf : public PreparedCollective {
 public:
  const char* Name() const override { return "allgather"; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  size_t InPlaceSendOffset(const BufferCounts& counts, int rank) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "(n-1)/n"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;
};

class ReduceScatterPerf : public PreparedCollective {
 public:
  const char* Name() const override { return "reducescatter"; }
  // recv is the whole send size too: in place, the buffer holds the whole input.
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "(n-1)/n"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  // In place (sendbuff == recvbuff from the harness), this rank's block of the buffer
  // receives the result, as nccl.h defines it.
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;

 private:
  mutable bool last_in_place_ = false;  // where the checked call's result is
};

class BroadcastPerf : public PreparedCollective {
 public:
  explicit BroadcastPerf(int root) : root_(root) {}
  const char* Name() const override { return "broadcast"; }
  int Root() const override { return root_; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "1"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;

 private:
  int root_;
};

class ReducePerf : public PreparedCollective {
 public:
  explicit ReducePerf(int root) : root_(root) {}
  const char* Name() const override { return "reduce"; }
  int Root() const override { return root_; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "1"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;

 private:
  int root_;
};

class AlltoAllPerf : public PreparedCollective {
 public:
  const char* Name() const override { return "alltoall"; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "(n-1)/n"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;
};

class SendRecvPerf : public PreparedCollective {
 public:
  const char* Name() const override { return "sendrecv"; }
  BufferCounts CountsForBytes(size_t bytes, size_t element_size, int nranks) const override;
  double BusBandwidthFactor(int nranks) const override;
  const char* BusBandwidthFormula() const override { return "1"; }
  void FillSend(void* sendbuff, const BufferCounts& counts) const override;
  size_t CountWrong(const void* recvbuff, const BufferCounts& counts) const override;
  Outcome Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
              const BufferCounts& counts, DataType type, ReduceOp op) const override;
};

// main() of the programs above: takes "-r root" (default 0; only the rooted
// collectives accept it) out of argv, then runs PerfProgramMain. `collective` is a
// Name() above.
int MorePerfMain(int argc, char** argv, const std::string& collective,
                 const BackendFactory& make_backend);

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_COLLECTIVES_MORE_H_
