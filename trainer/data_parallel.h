// Data parallelism on tessera: identical start, then gradients averaged across ranks
// while backward is still running.
//
// GradientBuckets groups the parameters, in the reverse of their registration order
// (roughly the order in which backward produces their gradients), into buckets of about
// `bucket_bytes`; the bucket of the first layers, sent last, is capped at 1 MiB so that
// little communication is left once backward ends. A hook on each parameter copies its
// gradient into the bucket's flat float32 buffer the moment autograd computes it; when
// the last gradient of a bucket has arrived, the bucket is handed to a communication
// thread, which allreduces it (tesseraAllReduce, sum) on a communicator that only this
// thread uses, while autograd goes on with the earlier layers. Buckets are launched strictly in bucket order, so
// every rank issues the same sequence of collectives. Finish() waits for the last
// bucket (the time it waits is the allreduce time that backward did not hide) and
// points each parameter's .grad at its slice of the reduced buffer.
//
// Exact averaging: the trainer scales each rank's loss by 1 / (images in the global
// step), so the sum over ranks is the mean over every image of the step, whatever the
// ranks' share (corrupt files make shares unequal).
//
// Gradients can be handed to tessera as bfloat16 or float16 (--wire_dtype). The trainer
// then sets TESSERA_HALF_WIRE=half (unless the user set it), so the partial sums travel
// between ranks in the half type, half the bytes of float32, each step combined in
// float32 (docs/semantics.md). The float32 buffer receives the result.
//
// Micro-batches (Begin(k), BeginMicroBatch): the gradients of each of a step's k
// backward passes are kept apart, and each bucket goes out with the last pass's as k
// parts of one tesseraAllReduceParts. In tessera's deterministic mode every part is one
// contribution on the shared grid, so 2 ranks of 2 micro-batches end with the bits of 4
// ranks of 1 (a float sum of the micro-batches here would already differ).
//
// Double buffering (staleness 1, as ChainerMN's double-buffering optimizer): Finish()
// hands this step's buckets to the thread without waiting for them and waits instead
// for the previous step's, whose allreduce ran during this step's forward and backward;
// .grad is set to those, so the update of step t applies the averaged gradient of step
// t-1 (the first step applies none). Two sets of flat buffers alternate: backward fills
// one while the other is reduced or waits to be applied. The gradient that waits (the
// "pending" one) is part of the training state: PendingGradients() and
// SetPendingGradients() carry it through checkpoints and to the survivors of a lost rank.
//
// Failures: a failed allreduce (tessera names the peer; every wait is bounded by
// TESSERA_TIMEOUT_MS) is returned by Finish() or WaitPending() and the communicator
// stays broken. After revoking it, Abandon() ends the thread's work and says whether the
// pending gradient was reduced in full before the failure.
#ifndef TESSERA_TRAINER_DATA_PARALLEL_H_
#define TESSERA_TRAINER_DATA_PARALLEL_H_

#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "tessera/tessera.h"
#include "trainer/train_settings.h"

namespace trainer {

// Calls tessera and turns a failure into a Status naming the operation and the library's
// message (which names rank and peer).
tessera::Status TesseraCall(tesseraResult_t result, tesseraComm_t comm, const char* operation);

// Copies rank `root`'s parameters and buffers to every rank (collective over comm).
tessera::Status BroadcastModuleState(torch::nn::Module& module, tesseraComm_t comm, int root = 0);

// Copies rank `root`'s buffers (batch-norm running statistics) to every rank, as
// PyTorch DDP does before each forward, so that all ranks hold one model.
tessera::Status BroadcastBuffers(torch::nn::Module& module, tesseraComm_t comm, int root = 0);

// Copies rank `root`'s tensors to every rank, in place (one flat buffer per dtype).
tessera::Status BroadcastTensors(const std::vector<torch::Tensor>& tensors, tesseraComm_t comm, int root = 0);

// values[i] = sum over ranks of values[i] (float64, collective over comm).
tessera::Status AllReduceSum(std::vector<double>* values, tesseraComm_t comm);

class GradientBuckets {
 public:
  // comm may be nullptr: a single process, nothing is communicated. The communicator
  // must not be used by anyone else while this object lives. staleness: 0 or 1.
  GradientBuckets(std::vector<torch::Tensor> parameters, double bucket_bytes, WireType wire, int staleness,
                  tesseraComm_t comm);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before each step: clears the parameters' .grad and the buffers that this
  // step's backward fills; the step has `micro_batches` backward passes (>= 1), each
  // after BeginMicroBatch.
  void Begin(int micro_batches = 1);
  // Call before the backward of micro-batch `index` (0, 1, ... in order) when the step
  // has several; the buckets are sent during the last one's.
  void BeginMicroBatch(int index);

  // Call after backward (or instead of it, when this rank had no image): sends the
  // buckets whose gradients did not all arrive (missing ones count as zero). Staleness
  // 0: waits for every allreduce and sets each parameter's .grad to the reduced
  // gradient. Staleness 1: leaves this step's allreduces running, waits for the pending
  // (previous) step's and sets .grad to those; *have_gradient is false when none was
  // pending. *exposed_s: seconds spent waiting here; *busy_s: seconds the communication
  // thread spent in allreduces since the last Finish.
  tessera::Status Finish(double* exposed_s, double* busy_s, bool* have_gradient);

  // Staleness 1: whether a step's gradient waits to be applied (reduced or in flight).
  bool has_pending() const { return pending_ >= 0; }
  // Waits until the pending gradient's allreduce is done (an error if it failed).
  tessera::Status WaitPending();
  // The pending, reduced gradient as one flat float32 tensor (after WaitPending).
  torch::Tensor PendingGradients();
  // Makes `flat` (from PendingGradients) the pending gradient, already reduced; an
  // undefined tensor: none. Not while a step's allreduce may be in flight.
  void SetPendingGradients(const torch::Tensor& flat);
  // After a failure, once the communicator is revoked (so the allreduces left end at
  // once): waits for the thread to be idle and returns whether the pending gradient
  // was reduced in full; if not, it is dropped. Only the destructor may follow, or
  // PendingGradients when it returned true.
  bool Abandon();

  int bucket_count() const { return static_cast<int>(plan_.size()); }
  // Buckets of the last step that were handed to the communication thread while
  // backward was still running (before Finish): the overlap actually achieved.
  int launched_during_backward() const { return launched_during_backward_; }
  // Parameter indices of bucket b, in the order they sit in its buffer.
  const std::vector<int>& bucket_parameters(int b) const { return plan_[b].parameters; }

 private:
  struct BucketPlan {
    std::vector<int> parameters;
    std::vector<int64_t> offsets;  // of each parameter in the bucket's buffer
    int64_t elements = 0;
  };
  // The buffers of one step's gradients and how far their allreduce has come.
  struct StepBuffers {
    std::vector<torch::Tensor> flat;  // per bucket, float32, on the CPU
    // Per bucket, the micro-batches before the last, each like flat.
    std::vector<std::vector<torch::Tensor>> earlier;
    std::vector<int> missing;         // per bucket: gradients not yet arrived
    std::vector<bool> arrived;        // per parameter
    int launched = 0;                 // buckets handed to the thread (always a prefix)
    int done = 0;                     // buckets reduced, or given up after a failure
    tessera::Status error;
  };

  void OnGradient(int parameter, const torch::Tensor& gradient);
  void LaunchReadyLocked(int set);  // hands ready buckets of `set`, in order, to the thread
  void LaunchAllLocked(int set);    // the rest too: missing gradients are zero
  tessera::Status WaitDoneLocked(std::unique_lock<std::mutex>& lock, int set);
  void PointGradientsAt(int set);
  void CommunicationLoop();
  // One allreduce of a bucket: `flat` (the last micro-batch's, which receives the
  // result) and the earlier micro-batches' as parts.
  tessera::Status Reduce(const torch::Tensor& flat, const std::vector<torch::Tensor>& earlier);

  std::vector<torch::Tensor> parameters_;
  std::vector<std::pair<int, int>> location_;  // parameter -> (bucket, slot)
  std::vector<BucketPlan> plan_;
  std::vector<unsigned> hook_ids_;
  const WireType wire_;
  const int staleness_;
  const tesseraComm_t comm_;

  std::mutex mutex_;
  std::condition_variable work_;       // a bucket was queued, or stop
  std::condition_variable finished_;   // a bucket was reduced
  StepBuffers sets_[2];
  int current_ = 0;   // the set this step's backward fills
  int pending_ = -1;  // staleness 1: the set whose gradient waits to be applied
  std::deque<std::pair<int, int>> queue_;  // (set, bucket)
  bool reducing_ = false;                  // the thread is in an allreduce
  int micro_batches_ = 1;
  int micro_batch_ = 0;  // the backward under way
  int launched_during_backward_ = 0;
  double busy_s_ = 0;
  tessera::Status error_;  // the first failure: every later bucket is given up
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_DATA_PARALLEL_H_
