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

 private:
  // The images of one step on this rank (from the pipeline or synthetic).
  struct StepInput {
    torch::Tensor images;  // (n, 3, crop, crop) float32, CPU
    torch::Tensor labels;  // (n) int64
    int count = 0;
    int skipped = 0;
  };

  tessera::Status Setup();
  tessera::Status Resume();
  tessera::Status TrainEpoch(int epoch, bool* stopped);
  tessera::Status TrainStep(const StepInput& input, int epoch, int64_t steps_in_epoch, StepMetrics* metrics);
  tessera::Status Validate(EpochMetrics* metrics);
  tessera::Status SaveState();
  void ReportSkipped(const Batch& batch);
  void PrintSummary() const;
  int64_t StepsInEpoch(int epoch) const;
  int64_t RemainingSteps(int epoch, int64_t step_in_epoch) const;

  const TrainSettings settings_;
  const Communicators comms_;
  const bool leader_;  // rank 0
  torch::Device device_;
  DatasetIndex index_;
  ResNet model_{nullptr};
  std::unique_ptr<MomentumOptimizer> optimizer_;
  std::unique_ptr<GradientBuckets> buckets_;
  DynamicLossScale scaler_;
  TrainProgress progress_;
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
  torch::Tensor synthetic_images_, synthetic_labels_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_TRAINER_H_
