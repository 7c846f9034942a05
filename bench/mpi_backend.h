// MpiBackend: the benchmark's CollectiveBackend over Open MPI's MPI_COMM_WORLD, the
// baseline tessera is measured against (mpi_all_reduce_perf).
//
// What MPI lacks is built the way an MPI user would build it, and costs what it
// would cost them: half and bfloat16 are reduced with user-defined MPI_Ops over 16-bit
// elements (convert to float, combine, round back), and avg is MPI_SUM followed by a
// division of the local result by the number of ranks (inside the timed call).
// Counts above INT_MAX are rejected (MPI counts are int).
#ifndef TESSERA_BENCH_MPI_BACKEND_H_
#define TESSERA_BENCH_MPI_BACKEND_H_

#include <mpi.h>

#include <memory>
#include <string>

#include "bench/collective_backend.h"

namespace tessera_bench {

class MpiBackend : public CollectiveBackend {
 public:
  // Initializes MPI (errors returned, not fatal). Null and *error set on failure.
  static std::unique_ptr<MpiBackend> Create(std::string* error);
  // Frees the user-defined ops and finalizes MPI.
  ~MpiBackend() override;

  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  std::string Description() const override { return description_; }
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }

  Outcome AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                    ReduceOp op) override;
  Outcome AllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                    DataType type) override;
  Outcome ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, DataType type,
                        ReduceOp op) override;
  Outcome Broadcast(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                    int root) override;
  Outcome Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType type, ReduceOp op,
                 int root) override;
  Outcome AlltoAll(const void* sendbuff, void* recvbuff, size_t count, DataType type) override;
  Outcome SendRecv(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                   int send_peer, int recv_peer) override;
  Outcome Barrier() override;
  Outcome MaxAcrossRanks(double* values, size_t count) override;
  Outcome SumAcrossRanks(int64_t* values, size_t count) override;
  void AbortJob() override;  // MPI_Abort: mpirun then stops every rank

 private:
  MpiBackend();
  // Creates the user-defined ops for the 16-bit floating types.
  Outcome CreateFloat16Ops();
  // The MPI datatype and op that compute (type, op); avg maps to MPI_SUM.
  Outcome Translate(DataType type, ReduceOp op, MPI_Datatype* mpi_type, MPI_Op* mpi_op) const;

  int rank_ = 0;
  int size_ = 1;
  std::string description_;
  // [0]: half, [1]: bfloat16; each indexed by sum, prod, max, min.
  MPI_Op float16_ops_[2][4];  // MPI_OP_NULL until created
};

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_MPI_BACKEND_H_
