// The training recipe of the large-batch ImageNet records, as plain arithmetic:
//
//  - Batch-size control (Mikami et al. 2018, Akiba et al. 2017): the global batch is a
//    per-epoch schedule, e.g. "0:256,5:512" = 256 for epochs 0-4, 512 from epoch 5 on.
//    The per-rank batch is global / world.
//  - Linear scaling rule (Goyal et al. 2017): the target learning rate is
//    base_lr * global_batch / reference_batch.
//  - Gradual warm-up: over the first warmup_epochs the rate rises linearly, per step,
//    from warmup_start_lr (by default base_lr, capped at the target) to the target.
//  - Decay after warm-up: step (x factor at each milestone epoch), cosine or polynomial.
//  - Dynamic loss scaling for float16 (used on CUDA): halve the scale on an overflow and
//    skip that step, double it after growth_interval clean steps.
//
// Epochs here are fractional: epoch + step / steps_per_epoch.
#ifndef TESSERA_TRAINER_RECIPE_H_
#define TESSERA_TRAINER_RECIPE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trainer {

class BatchSchedule {
 public:
  // Parses "E0:B0,E1:B1,..." (E0 must be 0, epochs increasing, batches > 0) or a single
  // number (the same batch for every epoch).
  static tessera::Status Parse(const std::string& text, BatchSchedule* schedule);

  int64_t GlobalBatch(int epoch) const;
  // Fails unless every global batch is a multiple of world.
  tessera::Status CheckDivisible(int world) const;
  std::string ToString() const;

 private:
  std::vector<std::pair<int, int64_t>> entries_;  // (first epoch, global batch)
};

enum class LrDecay { kStep, kCosine, kPoly };

struct LrSchedule {
  double base_lr = 0.1;             // at the reference batch
  int64_t reference_batch = 256;
  double warmup_epochs = 5;
  double warmup_start_lr = -1;      // < 0: base_lr, the reference batch's rate (Goyal
                                    // et al.); never above the target
  LrDecay decay = LrDecay::kStep;
  std::vector<double> milestones = {30, 60, 80};  // kStep
  double step_factor = 0.1;                       // kStep
  double poly_power = 2.0;                        // kPoly
  double total_epochs = 90;                       // kCosine, kPoly

  // The learning rate at fractional epoch `t` for the global batch in use then.
  double At(double t, int64_t global_batch) const;
};

// Parses "step", "cosine" or "poly".
tessera::Status ParseLrDecay(const std::string& text, LrDecay* decay);
const char* LrDecayName(LrDecay decay);  // "step", "cosine" or "poly"
// Parses "30,60,80".
tessera::Status ParseMilestones(const std::string& text, std::vector<double>* milestones);

class DynamicLossScale {
 public:
  DynamicLossScale(double initial_scale = 65536.0, int growth_interval = 2000)
      : scale_(initial_scale), growth_interval_(growth_interval) {}

  double scale() const { return scale_; }
  int clean_steps() const { return clean_steps_; }
  // Restores the state saved in a checkpoint.
  void Restore(double scale, int clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

  // Called once per step with whether any gradient was inf/NaN. Returns true if the
  // step's update must be applied (false: skip it).
  bool Update(bool found_nonfinite);

 private:
  double scale_;
  int growth_interval_;
  int clean_steps_ = 0;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_RECIPE_H_
