// tessera as a torch.distributed backend: the class torch holds for a group (a
// c10d::Backend on torch 2.x, a c10d::ProcessGroup on torch 1.13: torch_api.h), whose
// collectives run on one tessera communicator through the public C API.
//
// Contract, as torch.distributed users expect from Gloo:
//  - Every operation checks its arguments on the caller's thread (a bad argument raises
//    there), then returns a Work at once. The operations run in issue order on the
//    group's own worker thread.
//  - Work::wait(timeout), isCompleted, exception and getFuture work as with Gloo; the
//    future's value is the list of output tensors (what DDP's reducer and comm hooks read).
//    Future callbacks run on the thread that ran the operation (the worker, or a caller
//    waiting for it), after the communicator is free: a callback may post operations on
//    the group and wait() for them.
//  - A failure completes the Work with an error (torch 2.x: DistBackendError, a
//    RuntimeError) naming the operation, this rank and what tessera says of the peer and
//    the rank at fault; a timeout says "timed out". It happens on every rank within the
//    group's timeout, which is the communicator's timeout. The communicator is then
//    broken: every later operation fails with the same error.
//  - Sends and receives are held back until something needs them (a wait, a poll, a
//    collective, or the end of a batch_isend_irecv) and then run together in one tessera
//    group, so that an isend/irecv pair between two ranks cannot deadlock. Between
//    startCoalescing and endCoalescing everything is held and runs as one group.
//  - Different groups (dist.new_group, split_group) are different communicators with
//    their own worker threads: they are independent.
//  - Dense tensors must be CPU tensors, one per process where torch passes a list.
//    all_reduce also takes sparse COO tensors (SUM), as Gloo does.
//  - monitored_barrier runs over the group's store, not the communicator: a rank that
//    does not arrive is named, and the communicator stays usable.
//  - recv from any source works with TESSERA_TORCH_ANY_SOURCE=1 on every rank, over a
//    mailbox in the store that each send also writes to (any_source.h); without it, it
//    raises saying so.
#ifndef TESSERA_PYTORCH_BACKEND_H_
#define TESSERA_PYTORCH_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pytorch/torch_api.h"
#include "tessera/tessera.h"

namespace tessera_torch {

class AnySourceMailbox;
class OperationQueue;
class TesseraWork;

// Everything a group is created from.
struct GroupSpec {
  c10::intrusive_ptr<c10d::Store> store;  // the group's store (a PrefixStore of it)
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  std::string name;                   // the group's name in torch ("0", "1", ...)
  std::vector<int64_t> global_ranks;  // global rank of each group rank; empty: the world
  // How to block without holding the Python interpreter (see OperationQueue).
  std::function<void(const std::function<void()>& block)> without_interpreter;
};

class TesseraBackend : public TorchBackendBase {
 public:
  // Joins the group's communicator: group rank 0 creates the unique id and publishes it
  // in the store, every rank reads it and creates its member, with spec.timeout as the
  // communicator's timeout. Throws (RuntimeError) naming the rank if that fails.
  explicit TesseraBackend(const GroupSpec& spec);
  // Takes `comm`, a communicator already created for exactly this group (shrink).
  TesseraBackend(const GroupSpec& spec, tesseraComm_t comm);
  // Runs what is still queued, then releases the communicator.
  ~TesseraBackend() override;

  const std::string getBackendName() const override { return "tessera"; }

  void startCoalescing() override;
#if TESSERA_TORCH_2
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) override;
#endif

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Every rank checks in with group rank 0 through the store within opts.timeout (the
  // group's when unset); rank 0 raises naming the ranks that did not (all of them with
  // wait_all_ranks, else the first), and the others raise that rank 0 did not release
  // them. Does not touch the communicator.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // Sequence numbers count the collectives issued on this group; ranks that issue the
  // same calls agree on them.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

#if TESSERA_TORCH_2
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;

  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // A new communicator of `ranks` (ranks of this group), met through `store` as a new
  // group would be; nullptr on a rank that is not in `ranks`.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // tesseraCommShrink: the survivors (every rank not in ranks_to_exclude) call it; flags
  // as torch's SHRINK_DEFAULT/SHRINK_ABORT, which are tessera's.
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                           const c10::intrusive_ptr<Options>& opts_override) override;
  // The communicator is created when the group is: nothing left to connect.
  void eagerConnectSingleDevice(at::Device device) override {}
  // tesseraCommAbort: pending and later operations fail at once.
  void abort() override;
  // Runs what is queued and releases the communicator; later operations fail.
  void shutdown() override;
  // TIMEOUT, COMM_ERROR or REMOTE_ERROR once the communicator is broken.
  c10d::ErrorType getError() override;
#endif

 private:
  // Submits one operation and returns its Work. Sends and receives, and everything while
  // coalescing, are held until released.
  c10::intrusive_ptr<c10d::Work> Post(c10d::OpType type, const std::string& name, std::vector<at::Tensor> outputs,
                                      std::function<void(tesseraComm_t)> issue,
                                      std::function<void(tesseraComm_t)> finish = nullptr);
  c10::intrusive_ptr<c10d::Work> Submit(c10::intrusive_ptr<TesseraWork> work, const std::string& name,
                                        std::function<void(tesseraComm_t)> issue,
                                        std::function<void(tesseraComm_t)> finish, bool hold);
  c10::intrusive_ptr<c10d::Work> EndCoalescing();
  c10::intrusive_ptr<c10d::Work> AllReduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts);

  GroupSpec spec_;
  std::shared_ptr<OperationQueue> queue_;
  std::unique_ptr<AnySourceMailbox> mailbox_;  // TESSERA_TORCH_ANY_SOURCE=1 only
  std::mutex post_mu_;
  bool coalescing_ = false;         // between startCoalescing and endCoalescing
  uint64_t sequence_ = 0;           // collectives posted
  uint64_t monitored_barriers_ = 0;  // monitored barriers entered (their store keys)
};

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_BACKEND_H_
