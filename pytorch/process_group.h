// tessera as a torch.distributed backend: a c10d::ProcessGroup (torch 1.13) whose
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
//  - A failure completes the Work with a RuntimeError naming the operation, this rank and
//    what tessera says of the peer. It happens on every rank within the group's timeout,
//    which is the communicator's timeout. The communicator is then broken: every later
//    operation fails with the same error.
//  - Sends and receives are held back until something needs them (a wait, a poll, a
//    collective, or the end of a batch_isend_irecv) and then run together in one tessera
//    group, so that an isend/irecv pair between two ranks cannot deadlock.
//  - Different groups (dist.new_group) are different communicators with their own worker
//    threads: they are independent.
//  - Tensors must be dense CPU tensors; one tensor per process where torch passes a list.
//    recvAnysource, monitoredBarrier and send/recv tags other than matching order are not
//    offered, and say so.
#ifndef TESSERA_PYTORCH_PROCESS_GROUP_H_
#define TESSERA_PYTORCH_PROCESS_GROUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "tessera/tessera.h"

namespace tessera_torch {

class OperationQueue;

// Everything a group is created from.
struct GroupSpec {
  c10::intrusive_ptr<c10d::Store> store;  // the group's store (a PrefixStore of it)
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{kProcessGroupDefaultTimeout};
  std::string name;                 // the group's name in torch ("0", "1", ...)
  std::vector<int64_t> global_ranks;  // global rank of each group rank; empty: the world
  // How to block without holding the Python interpreter (see OperationQueue).
  std::function<void(const std::function<void()>& block)> without_interpreter;
};

class TesseraProcessGroup : public c10d::ProcessGroup {
 public:
  // Joins the group's communicator: group rank 0 creates the unique id and publishes it
  // in the store, every rank reads it and creates its member, with spec.timeout as the
  // communicator's timeout. Throws (RuntimeError) naming the rank if that fails.
  explicit TesseraProcessGroup(const GroupSpec& spec);
  // Runs what is still queued, then releases the communicator.
  ~TesseraProcessGroup() override;

  const std::string getBackendName() const override { return "tessera"; }

  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) override;

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

  // Sequence numbers count the collectives issued on this group; ranks that issue the
  // same calls agree on them.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

 private:
  // Submits one operation and returns its Work. Sends and receives, and everything while
  // coalescing, are held until released.
  c10::intrusive_ptr<c10d::Work> Post(c10d::OpType type, const std::string& name, std::vector<at::Tensor> outputs,
                                      std::function<void(tesseraComm_t)> issue,
                                      std::function<void(tesseraComm_t)> finish = nullptr);

  std::shared_ptr<OperationQueue> queue_;
  std::mutex post_mu_;
  bool coalescing_ = false;  // between startCoalescing and endCoalescing
  uint64_t sequence_ = 0;    // collectives posted
};

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_PROCESS_GROUP_H_
