// Checkpoints that let a run continue exactly where it stopped: the model (parameters
// and batch-norm buffers), the momentum buffers, the loss scaler, the position in the
// schedule (epoch, step within it, positions of the epoch read, global step) with the
// running sums of the epoch, and with --staleness=1 the gradient that waits to be
// applied (reduced over the ranks: the in-flight buffer is part of the state).
// The data pipeline needs nothing more: its order and augmentation follow from
// (seed, epoch, position), so the resumed run reads the very batches the uninterrupted
// one would have read, and its loss curve is the same.
//
// One file (torch serialization), written by rank 0 to <path>.tmp then renamed, so a
// crash while saving leaves the previous checkpoint intact. Rank 0 alone loads it and
// broadcasts the state (trainer.cc), so the output directory need not be shared.
#ifndef TESSERA_TRAINER_CHECKPOINT_H_
#define TESSERA_TRAINER_CHECKPOINT_H_

#include <torch/torch.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace trainer {

struct TrainProgress {
  int epoch = 0;                 // the epoch in progress (or next)
  int64_t step_in_epoch = 0;     // steps of that epoch already taken
  int64_t global_step = 0;       // steps taken in the run
  double loss_scale = 1.0;
  int64_t clean_steps = 0;       // loss scaler's steps since the last change
  double epoch_loss_sum = 0;     // sum of the epoch's step losses so far
  int64_t epoch_images = 0;      // images trained on in the epoch so far
  double epoch_seconds = 0;      // time spent on the epoch so far
  int64_t skipped_total = 0;     // corrupt or unreadable files so far
  int64_t epoch_position = 0;    // positions of the epoch's shuffled list read so far
  int64_t epoch_span = 0;        // positions the epoch reads (0: not started)
  bool pending = false;          // staleness 1: a step's gradient waits to be applied
  double pending_scale = 1.0;    // the loss scale it was computed with
  int64_t pending_images = 0;    // the images of its step (none: nothing to apply)
  int world = 1;                 // ranks of the run that saved it
  std::string settings;          // DescribeSettings() of that run
};

// `pending`: the reduced gradient waiting to be applied, flat (progress.pending), or an
// undefined tensor.
tessera::Status SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                               const std::vector<torch::Tensor>& momentum, const torch::Tensor& pending,
                               const TrainProgress& progress);

// Loads into a model of the same architecture; a different architecture, a truncated
// file or a missing entry is an error naming what did not match. Checkpoints written
// before the epoch position and the pending gradient were saved load with
// epoch_position = -1 (the caller derives it) and nothing pending.
tessera::Status LoadCheckpoint(const std::string& path, torch::nn::Module& model,
                               std::vector<torch::Tensor>* momentum, torch::Tensor* pending, TrainProgress* progress);

}  // namespace trainer

#endif  // TESSERA_TRAINER_CHECKPOINT_H_
