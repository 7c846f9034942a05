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
// Micro-batches (Begin(k), BeginMicroBatch): the gradients of each of a step's k
// backward passes are kept apart, and each bucket goes out with the last pass's as k
// parts of one tesseraAllReduceParts. In tessera's deterministic mode every part is one
// contribution on the shared grid, so 2 ranks of 2 micro-batches end with the bits of 4
// ranks of 1 (a float sum of the micro-batches here would already differ).
//
// Gradients can be handed to tessera as bfloat16 or float16 (--wire_dtype). The trainer
// then sets TESSERA_HALF_WIRE=half (unless the user set it), so the partial sums travel
// between ranks in the half type, half the bytes of float32, each step combined in
// float32 (docs/semantics.md). The float32 buffer receives the result.
//
// Failures: a failed allreduce (tessera names the peer; every wait is bounded by
// TESSERA_TIMEOUT_MS) is returned by Finish() and the communicator stays broken.
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

// Copies rank 0's parameters and buffers to every rank (collective over comm).
tessera::Status BroadcastModuleState(torch::nn::Module& module, tesseraComm_t comm);

// Copies rank 0's buffers (batch-norm running statistics) to every rank, as PyTorch DDP
// does before each forward, so that all ranks hold one model.
tessera::Status BroadcastBuffers(torch::nn::Module& module, tesseraComm_t comm);

// values[i] = sum over ranks of values[i] (float64, collective over comm).
tessera::Status AllReduceSum(std::vector<double>* values, tesseraComm_t comm);

class GradientBuckets {
 public:
  // comm may be nullptr: a single process, nothing is communicated. The communicator
  // must not be used by anyone else while this object lives.
  GradientBuckets(std::vector<torch::Tensor> parameters, double bucket_bytes, WireType wire, tesseraComm_t comm);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before each step: clears the parameters' .grad and the bucket state; the step
  // has `micro_batches` backward passes (>= 1), each after BeginMicroBatch.
  void Begin(int micro_batches = 1);
  // Call before the backward of micro-batch `index` (0, 1, ... in order) when the step
  // has several; the buckets are sent during the last one's.
  void BeginMicroBatch(int index);

  // Call after backward (or instead of it, when this rank had no image): sends the
  // buckets whose gradients did not all arrive (missing ones count as zero), waits for
  // every allreduce and sets each parameter's .grad to the reduced gradient.
  // *exposed_s: seconds spent waiting here; *busy_s: seconds the communication thread
  // spent in allreduces during this step.
  tessera::Status Finish(double* exposed_s, double* busy_s);

  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  // Buckets of the last step that were handed to the communication thread while
  // backward was still running (before Finish): the overlap actually achieved.
  int launched_during_backward() const { return launched_during_backward_; }
  // Parameter indices of bucket b, in the order they sit in its buffer.
  const std::vector<int>& bucket_parameters(int b) const { return buckets_[b].parameters; }

 private:
  struct Bucket {
    std::vector<int> parameters;
    std::vector<int64_t> offsets;  // of each parameter in `flat`
    torch::Tensor flat;            // float32, on the CPU
    std::vector<torch::Tensor> earlier;  // micro-batches before the last, each like flat
    int missing = 0;               // gradients not yet arrived this step
    bool launched = false;
    bool done = false;
  };

  void OnGradient(int parameter, const torch::Tensor& gradient);
  void LaunchReadyLocked();  // hands ready buckets, in order, to the thread
  void CommunicationLoop();
  tessera::Status Reduce(Bucket* bucket);

  std::vector<torch::Tensor> parameters_;
  std::vector<std::pair<int, int>> location_;  // parameter -> (bucket, slot)
  std::vector<bool> arrived_;
  std::vector<Bucket> buckets_;
  std::vector<unsigned> hook_ids_;
  const WireType wire_;
  const tesseraComm_t comm_;

  std::mutex mutex_;
  std::condition_variable work_;       // a bucket was queued, or stop
  std::condition_variable finished_;   // a bucket was reduced
  std::deque<int> queue_;
  int next_launch_ = 0;
  int done_count_ = 0;
  int launched_during_backward_ = 0;
  int micro_batches_ = 1;
  int micro_batch_ = 0;  // the backward under way
  double busy_s_ = 0;
  tessera::Status error_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_DATA_PARALLEL_H_
