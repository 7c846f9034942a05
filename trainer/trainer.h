// The training loop of train_resnet: epochs of data-parallel steps, validation,
// checkpoints, metrics.
//
// One step on every rank:
//   1. rank 0's batch-norm buffers are broadcast (as PyTorch DDP does) and the ranks
//      add up how many images the global step has (corrupt files make it vary);
//   2. forward under autocast (bfloat16 on CPU, float16 or bfloat16 on CUDA), loss =
//      sum of the label-smoothed cross-entropy / global images (x loss scale);
//   3. backward, during which GradientBuckets allreduces finished buckets;
//   4. wait for the last bucket; with loss scaling: unscale, skip the step on inf/NaN
//      (all ranks see the same reduced gradients, so they all decide alike);
//   5. SGD/LARS update of the float32 master weights at the scheduled rate.
// Rank 0 writes the metrics and the checkpoint.
//
// --staleness=1 (double buffering, ChainerMN): step 4 waits instead for the previous
// step's allreduce, which ran during this step's forward and backward, and step 5
// applies that gradient; this step's allreduce goes on into the next step. The gradient
// that waits is part of the state (checkpoints, the survivors of a lost rank).
//
// --elastic: a step (or validation, or a checkpoint) that fails because a rank died or
// stalled is not the end. Every survivor revokes both communicators, keeps the last
// state it holds complete (a step whose update it applied; with staleness 1, a pending
// gradient only if its allreduce finished, else it steps back before that gradient's
// step), shrinks the communicator to the ranks still alive (TESSERA_SHRINK_LOST) and
// splits the gradients' one off it again. The survivors then agree on the most advanced
// state any of them holds and take it from its holder by broadcast, reopen the metrics
// there, and go on: the rest of the epoch's images are shared out over the new world
// (epoch_shard.h), at the same global batch or the same per-rank batch
// (--elastic_batch; the rate follows the batch by the linear scaling rule).
#ifndef TESSERA_TRAINER_TRAINER_H_
#define TESSERA_TRAINER_TRAINER_H_

#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "base/status.h"
#include "tessera/tessera.h"
#include "trainer/batch_loader.h"
#include "trainer/checkpoint.h"
#include "trainer/data_parallel.h"
#include "trainer/dataset_index.h"
#include "trainer/metrics_log.h"
#include "trainer/optimizer.h"
#include "trainer/recipe.h"
#include "trainer/resnet.h"
#include "trainer/train_settings.h"

namespace trainer {

// The two communicators of a rank: `main` for the training loop (broadcasts, step
// statistics, validation), `gradients` for GradientBuckets' thread alone.
struct Communicators {
  tesseraComm_t main = nullptr;
  tesseraComm_t gradients = nullptr;
  int rank = 0;
  int world = 1;
};

class Trainer {
 public:
  Trainer(const TrainSettings& settings, const Communicators& comms);
  ~Trainer();

  // Trains for settings.epochs (or until --stop_after_steps). Collective: every rank
  // calls it.
  tessera::Status Run();

  // The communicators in use: those given, or after lost ranks (--elastic) the
  // survivors'. The caller destroys them.
  const Communicators& communicators() const { return comms_; }

 private:
  // The images of one step on this rank (from the pipeline or synthetic).
  struct StepInput {
    torch::Tensor images;  // (n, 3, crop, crop) float32, CPU
    torch::Tensor labels;  // (n) int64
    int count = 0;
    int skipped = 0;
    double id_sum = 0, id_sq_sum = 0;  // of the image numbers this rank read
    Batch batch;                       // the pixels `images` points into
  };

  tessera::Status Setup();
  tessera::Status Resume();
  // Every rank takes rank `root`'s state: progress, model, momentum and, if pending, the
  // gradient in *pending (read on the root, written on the others).
  tessera::Status BroadcastState(int root, torch::Tensor* pending);
  tessera::Status OpenMetrics(bool fresh);
  tessera::Status TrainEpoch(int epoch, bool* stopped);
  std::unique_ptr<BatchLoader> TrainLoader(int epoch, const Batches& batches) const;
  tessera::Status ReadStep(BatchLoader* loader, const std::vector<int64_t>& ids, StepInput* input);
  tessera::Status TrainStep(const StepInput& input, int epoch, int64_t global_batch, StepMetrics* metrics);
  double ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels, double factor);
  void ApplyGradient(bool have_gradient, double scale, double images, StepMetrics* metrics);
  bool UnscaleGradients(double scale);
  void EndStep(const StepMetrics& metrics, int64_t positions, int64_t steps_left);
  tessera::Status EndEpoch(int epoch);
  tessera::Status Validate(EpochMetrics* metrics);
  tessera::Status SaveState();
  void ReportSkipped(const Batch& batch);
  // The straggler verdict of the main or the gradients' communicator, whichever names one
  // (docs/diagnosis.md#stragglers).
  void PrintStraggler(int epoch) const;
  void PrintSummary() const;
  bool leader() const { return comms_.rank == 0; }
  // The global batch of `epoch` for the world in use (--elastic_batch).
  int64_t GlobalBatch(int epoch) const;
  int64_t TrainImages() const;
  // Steps of the epochs after `epoch` (for the ETA).
  int64_t LaterSteps(int epoch) const;

  // --elastic.
  tessera::Status Recover(const tessera::Status& cause);
  tessera::Status ShrinkCommunicators();
  tessera::Status AgreeOnState(int old_rank, int old_world, std::vector<int>* lost, int* root);
  void NoteRecovered(const StepMetrics& metrics);

  const TrainSettings settings_;
  Communicators comms_;
  int launch_world_;  // the world at launch (--elastic_batch=rank keeps its per-rank batch)
  torch::Device device_;
  DatasetIndex index_;
  ResNet model_{nullptr};
  std::unique_ptr<MomentumOptimizer> optimizer_;
  std::unique_ptr<GradientBuckets> buckets_;
  DynamicLossScale scaler_;
  TrainProgress progress_;
  // Staleness 1: the progress before the step whose gradient is pending, to step back
  // to when that gradient's allreduce fails.
  TrainProgress pending_start_;
  // False while this rank takes another's state (a broadcast cut short leaves it mixed).
  bool state_valid_ = true;
  MetricsLog log_;
  std::unique_ptr<ProgressDisplay> display_;
  int skipped_reported_ = 0;
  // Sums over this process's steady steps (all but the first two of an epoch), for the
  // summary line.
  struct SteadyTotals {
    int64_t steps = 0;
    int64_t images = 0;
    double step_s = 0, data_s = 0, compute_s = 0, exposed_s = 0, busy_s = 0, update_s = 0;
    void Add(const StepMetrics& m);
  };
  SteadyTotals steady_;
  struct Recovery {
    int count = 0;         // recoveries so far
    double seen_s = -1;    // wall-clock time the last failure was seen; -1: none open
    // Every rank's metrics of its last step (the same on all: they are reduced), so a
    // new leader can write the row a lost leader completed but did not write.
    StepMetrics last_step;
  };
  Recovery recovery_;
  torch::Tensor synthetic_images_, synthetic_labels_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_TRAINER_H_
