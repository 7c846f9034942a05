// CollectiveBackend: what the benchmark harness needs from a communication library,
// so that one harness measures tessera, Open MPI and later peers (Gloo, ...) alike.
//
// A backend is one rank of a job that already exists: it is created joined (MPI_Init,
// tesseraCommInitFromEnv, ...) and leaves the job when destroyed. Collectives are
// called by every rank in the same order with the same arguments, as in NCCL.
// Besides the collectives it measures, a backend provides the harness's own
// control-plane operations: a barrier and reductions of timings and error counts.
//
// Adding a collective: add a virtual here whose default answers
// Outcome::Rejected(...), override it in the backends that have it, and add a
// PerfCollective (perf_collective.h) that calls it.
#ifndef TESSERA_BENCH_COLLECTIVE_BACKEND_H_
#define TESSERA_BENCH_COLLECTIVE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "bench/perf_types.h"

namespace tessera_bench {

// Result of a backend call.
//  - kRejected: refused before any communication, identically on every rank (a type
//    or op this backend lacks, an invalid argument): the ranks are still in step and
//    can stop cleanly.
//  - kFailed: communication failed; other ranks may be stuck or broken.
class Outcome {
 public:
  enum class Kind { kOk, kRejected, kFailed };

  static Outcome Ok() { return Outcome(Kind::kOk, ""); }
  static Outcome Rejected(std::string message) {
    return Outcome(Kind::kRejected, std::move(message));
  }
  static Outcome Failed(std::string message) { return Outcome(Kind::kFailed, std::move(message)); }

  bool ok() const { return kind_ == Kind::kOk; }
  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }

  // The same outcome with "context: " prepended to its message.
  Outcome Annotate(const std::string& context) const {
    return ok() ? *this : Outcome(kind_, context + ": " + message_);
  }

 private:
  Outcome(Kind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  Kind kind_;
  std::string message_;
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  // What the benchmark header names, e.g. "tessera 0.1.0" or "Open MPI v4.1.4".
  virtual std::string Description() const = 0;
  virtual int Rank() const = 0;
  virtual int Size() const = 0;

  // recvbuff[i] = op over ranks of sendbuff[i], i < count; in place when the two are
  // the same pointer. Completed when it returns.
  virtual Outcome AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                            ReduceOp op) = 0;

  // The algorithm the library will use for an allreduce of `count` elements, when it
  // says (tessera does), for the table's "# algorithm" lines; "" when unknown.
  virtual std::string AllReduceAlgorithm(size_t count, DataType type) const {
    (void)count;
    (void)type;
    return "";
  }

  // The other nccl.h collectives, with nccl.h's argument conventions and in-place rules
  // (tessera.h states them). Defaults reject, identically on every rank, so a backend
  // without one still stops cleanly.
  // recvbuff (nranks * sendcount) gets rank i's sendbuff at i * sendcount; in place
  // when sendbuff == recvbuff + rank * sendcount.
  virtual Outcome AllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            DataType type) {
    (void)sendbuff, (void)recvbuff, (void)sendcount, (void)type;
    return Outcome::Rejected(Description() + " has no allgather");
  }
  // sendbuff holds nranks * recvcount; recvbuff gets this rank's block of the reduction;
  // in place when recvbuff == sendbuff + rank * recvcount.
  virtual Outcome ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                DataType type, ReduceOp op) {
    (void)sendbuff, (void)recvbuff, (void)recvcount, (void)type, (void)op;
    return Outcome::Rejected(Description() + " has no reduce-scatter");
  }
  // Root's sendbuff to every recvbuff (the root's too); in place when equal on the root.
  virtual Outcome Broadcast(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                            int root) {
    (void)sendbuff, (void)recvbuff, (void)count, (void)type, (void)root;
    return Outcome::Rejected(Description() + " has no broadcast");
  }
  // The root's recvbuff gets the reduction; recvbuff unused elsewhere.
  virtual Outcome Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                         ReduceOp op, int root) {
    (void)sendbuff, (void)recvbuff, (void)count, (void)type, (void)op, (void)root;
    return Outcome::Rejected(Description() + " has no reduce");
  }
  // Block j of sendbuff (count elements) lands at rank j's recvbuff + rank * count;
  // in place when sendbuff == recvbuff.
  virtual Outcome AlltoAll(const void* sendbuff, void* recvbuff, size_t count, DataType type) {
    (void)sendbuff, (void)recvbuff, (void)count, (void)type;
    return Outcome::Rejected(Description() + " has no alltoall");
  }
  // sendbuff to send_peer while recvbuff receives from recv_peer, together (no
  // deadlock in a ring); in place when sendbuff == recvbuff.
  virtual Outcome SendRecv(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                           int send_peer, int recv_peer) {
    (void)sendbuff, (void)recvbuff, (void)count, (void)type, (void)send_peer, (void)recv_peer;
    return Outcome::Rejected(Description() + " has no send/recv");
  }

  // Control plane of the harness.
  virtual Outcome Barrier() = 0;
  // values[i] = max over ranks of values[i], on every rank.
  virtual Outcome MaxAcrossRanks(double* values, size_t count) = 0;
  // values[i] = sum over ranks of values[i], on every rank.
  virtual Outcome SumAcrossRanks(int64_t* values, size_t count) = 0;

  // Called instead of a clean exit after an Outcome of kind kFailed: makes sure no rank
  // is left waiting forever (MPI: MPI_Abort; tessera's own timeouts need nothing).
  virtual void AbortJob() {}
};

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_COLLECTIVE_BACKEND_H_
