// The worker of one torch process group: a thread that owns the group's tessera
// communicator and runs its operations in issue order, and the Work objects that report
// them to torch.
//
// An operation has two halves: `issue` makes the tessera calls (it may run inside a
// tessera group, where calls only record), and `finish` runs after the data has moved
// (copies back into non-contiguous tensors, unpacking, folding). Operations submitted
// with `hold` (sends, receives, anything between startCoalescing and endCoalescing) wait
// in a batch until Release(); the batch then runs as one tessera group.
//
// A thread that waits for a Work without a timeout helps: while the worker thread has
// not picked up the queued batches, the waiting thread runs them itself, in order, one
// at a time (the `executing_` flag serialises the communicator between it and the
// worker). A blocking call such as dist.all_reduce(t) then costs no thread hand-off,
// which matters most when ranks share cores; operations still run in issue order, never
// two at once. wait(timeout) does not help: it must return when the timeout expires.
//
// The worker thread never drops the last reference to an operation's tensors: a tensor
// that Python has let go of needs the GIL to die, and the thread holding the GIL may be
// joining the worker (destroy_process_group). It leaves finished operations in
// `finished_`, and callers' threads destroy them (on the next Submit, and in Shutdown),
// so a tensor may outlive its last Python reference until the group's next operation.
#ifndef TESSERA_PYTORCH_OPERATION_QUEUE_H_
#define TESSERA_PYTORCH_OPERATION_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pytorch/torch_api.h"
#include "tessera/tessera.h"

namespace tessera_torch {

class OperationQueue;

// What torch holds for one operation. Waiting on it, polling it or taking its future
// releases the held batch it belongs to.
class TesseraWork : public c10d::Work {
 public:
  // `sequence`: the group's sequence number of the operation; `timeout`: the group's.
  TesseraWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::weak_ptr<OperationQueue> queue,
              uint64_t sequence, std::chrono::milliseconds timeout);

  bool isCompleted() override;
  // A wait whose timeout passes first raises "Operation timed out!" (torch's words); the
  // operation goes on and fails by itself within the group's timeout if it cannot end.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // The peer a receive from any source took its message from (group rank), else -1.
  int sourceRank() const override { return source_rank_; }
  void SetSourceRank(int rank) { source_rank_ = rank; }
#if TESSERA_TORCH_2
  uint64_t getSequencenumber() const override { return sequence_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
#endif

  // Called once each, in this order, by the thread that ran it: completes the work
  // (wait, isCompleted), then its future (value: the outputs; callbacks run here).
  void MarkDone(std::exception_ptr error);
  void CompleteFuture(std::exception_ptr error);
  // Whether MarkDone has run (without releasing anything).
  bool Done() { return c10d::Work::isCompleted(); }

 private:
  void ReleaseHeld();

  std::vector<at::Tensor> outputs_;
  std::weak_ptr<OperationQueue> queue_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const uint64_t sequence_;
  const std::chrono::milliseconds timeout_;
  std::atomic<int> source_rank_{-1};
};

// Thrown by Ok() when a tessera call fails; the worker turns it into the RuntimeError
// that names the operation, with tesseraGetLastError's message.
struct TesseraCallFailed {
  tesseraResult_t result;
};
inline void Ok(tesseraResult_t result) {
  if (result != tesseraSuccess) throw TesseraCallFailed{result};
}

struct Operation {
  std::string name;  // "allreduce", ...
  std::function<void(tesseraComm_t)> issue;
  std::function<void(tesseraComm_t)> finish;  // may be empty
  c10::intrusive_ptr<TesseraWork> work;
};

// Runs `block` (which blocks) without holding the Python interpreter, if the calling
// thread holds it. Given by the Python module; empty: run `block` as it is.
using WithoutInterpreter = std::function<void(const std::function<void()>& block)>;

class OperationQueue : public std::enable_shared_from_this<OperationQueue> {
 public:
  // Takes ownership of comm (destroyed by Shutdown) and starts the first worker. `who`
  // describes this rank in error messages ("rank 1 of 4 of group 0"). Each worker keeps
  // the queue alive until it ends: the last reference to the group may be dropped on a
  // worker, by a future callback.
  static std::shared_ptr<OperationQueue> Start(tesseraComm_t comm, std::string who,
                                               WithoutInterpreter without_interpreter = nullptr);
  ~OperationQueue();

  // Queues op. hold: keep it in the held batch until Release(). An operation that is not
  // held first releases the batch, so issue order is kept.
  void Submit(Operation op, bool hold);
  // Queues the held batch (if any) as one tessera group.
  void Release();
  // Runs queued batches on the calling thread, in order, until `work` has completed or
  // the worker thread is running a batch (then the caller waits as usual).
  void Help(TesseraWork* work);
  // Runs everything queued, stops the threads (joined without holding the Python
  // interpreter: a worker may need it to complete a future; a worker calling this, as
  // when a callback drops the group's last reference, is left to end by itself) and
  // destroys the communicator and the finished operations (on the calling thread).
  void Shutdown();
  // tesseraCommAbort from any thread: the operation running now fails promptly, and so
  // does every later one ("aborted"); Shutdown then has nothing left to release.
  void Abort();
  // tesseraCommShrink of this queue's communicator, on the calling thread (the worker may
  // be blocked in a call that flags' TESSERA_SHRINK_ABORT ends; without it the caller
  // has no operation pending). The queue stays as it is.
  tesseraResult_t Shrink(const std::vector<int>& excluded, tesseraComm_t* newcomm, tesseraConfig_t* config,
                         int flags);
  // The communicator's sticky error (tesseraSuccess while it works), for getError.
  tesseraResult_t AsyncError();
  // Shuts down every queue still running: at the interpreter's exit (atexit), before
  // Python stops the threads that would take the interpreter to run a callback.
  static void ShutdownAll();

  // Most worker threads a queue starts (see `workers_`).
  static constexpr size_t kMaxWorkers = 8;

 private:
  OperationQueue(tesseraComm_t comm, std::string who, WithoutInterpreter without_interpreter);
  void Loop();
  // Starts a worker if none is idle (and fewer than kMaxWorkers run). Needs mu_.
  void EnsureIdleWorkerLocked();
  // Runs `batch` with `executing_` set and completes its works, clears `executing_` and
  // wakes the others, then completes the works' futures (callbacks run here, with the
  // communicator free).
  void ExecuteExclusively(std::vector<Operation>& batch);
  std::exception_ptr Execute(std::vector<Operation>& batch);
  void ReleaseLocked();
  // Destroys, on the calling thread, the operations the worker has finished.
  void DropFinished();
  std::string Describe(const std::vector<Operation>& batch, tesseraResult_t result) const;
  // At most once a second, with `executing_` set: logs the straggler verdict when it
  // names another rank (docs/diagnosis.md#stragglers).
  void LogStraggler();

  tesseraComm_t comm_;
  const std::string who_;
  std::mutex mu_;
  std::condition_variable ready_cv_;
  std::deque<std::vector<Operation>> ready_;
  std::vector<Operation> held_;
  std::vector<Operation> finished_;  // run by the worker thread, destroyed by callers
  bool stopping_ = false;
  bool executing_ = false;  // a thread (worker or helper) is running a batch
  std::atomic<bool> aborted_{false};  // Abort() ran: comm_ is gone
  // Worker threads. One runs operations; a worker that goes on to complete a batch (and
  // so runs future callbacks, which may wait for the group's next operation, as
  // PowerSGD's hook does) first makes sure another worker is idle to run that
  // operation, starting one if none is (at most kMaxWorkers, so callbacks may nest that
  // deep). Operations still run one at a time, in issue order.
  std::vector<std::thread> workers_;
  size_t idle_workers_ = 0;  // workers waiting for a batch
  std::chrono::steady_clock::time_point next_health_{};  // LogStraggler's
  int straggler_ = -1;
  size_t running_workers_ = 0;  // workers whose Loop has not returned
  std::condition_variable ended_cv_;  // a worker's Loop returned
  WithoutInterpreter without_interpreter_;
};

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_OPERATION_QUEUE_H_
