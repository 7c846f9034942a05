// TesseraBackend: the benchmark's CollectiveBackend over tessera's C API, one
// communicator of the whole job created with tesseraCommInitFromEnv (rank and size
// from the launcher's environment; run alone, a job of one rank).
//
// tessera has no barrier: the harness's barrier is an allreduce of one float, which no
// rank can leave before every rank has entered it. Every call is bounded by tessera's
// own timeout, so nothing here needs to abort the job after a failure.
#ifndef TESSERA_BENCH_TESSERA_BACKEND_H_
#define TESSERA_BENCH_TESSERA_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "bench/collective_backend.h"
#include "tessera/tessera.h"

namespace tessera_bench {

class TesseraBackend : public CollectiveBackend {
 public:
  // Joins the job (tesseraCommInitFromEnv). Null and *error set on failure.
  static std::unique_ptr<TesseraBackend> Create(std::string* error);
  // tesseraCommDestroy.
  ~TesseraBackend() override;

  TesseraBackend(const TesseraBackend&) = delete;
  TesseraBackend& operator=(const TesseraBackend&) = delete;

  std::string Description() const override { return description_; }
  std::string AllReduceAlgorithm(size_t count, DataType type) const override;
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

 private:
  explicit TesseraBackend(tesseraComm_t comm) : comm_(comm) {}
  // Ok for tesseraSuccess; otherwise the call that `describe()` names failed: Rejected
  // for an invalid argument (refused locally, alike on every rank), Failed for anything
  // else. The name is built only on failure, so timed calls do not pay for it.
  template <typename Describe>
  Outcome Check(tesseraResult_t result, const Describe& describe) const {
    return result == tesseraSuccess ? Outcome::Ok() : Failure(result, describe());
  }
  Outcome Check(tesseraResult_t result, const char* call) const {
    return result == tesseraSuccess ? Outcome::Ok() : Failure(result, call);
  }
  Outcome Failure(tesseraResult_t result, const std::string& call) const;

  tesseraComm_t comm_;
  int rank_ = 0;
  int size_ = 1;
  std::string description_;
  // In-place send/recv: tessera forbids overlapping buffers, so the send data is first
  // copied here (as a user would), inside the timed call.
  std::vector<unsigned char> scratch_;
};

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_TESSERA_BACKEND_H_
