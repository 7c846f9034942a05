// Every setting of train_resnet: one table (name, meaning, how to parse and show the
// field) parsed from `--name=value` arguments into an immutable TrainSettings. The
// defaults are the initialisers of TrainSettings (and LrSchedule), written nowhere else:
// `--help` prints the table with them; docs/trainer.md describes the recipe.
#ifndef TESSERA_TRAINER_TRAIN_SETTINGS_H_
#define TESSERA_TRAINER_TRAIN_SETTINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/recipe.h"

namespace trainer {

enum class Precision { kFloat32, kBfloat16, kFloat16 };
enum class WireType { kFloat32, kBfloat16, kFloat16 };
enum class OptimizerKind { kSgd, kLars };
enum class ProgressStyle { kAuto, kBar, kLines, kOff };
enum class ElasticBatch { kGlobal, kPerRank };  // what a shrink keeps

struct TrainSettings {
  // Data.
  std::string data;            // dataset root (ImageNet layout)
  bool synthetic = false;      // random tensors instead of a dataset (throughput runs)
  int64_t synthetic_images = 1281167;  // images per epoch with --synthetic
  int synthetic_classes = 1000;
  int decode_threads = 2;
  int prefetch_batches = 2;
  int crop_size = 224;
  int val_resize = 256;
  double min_crop_area = 0.08;
  // Model.
  std::vector<int> blocks = {3, 4, 6, 3};  // bottleneck blocks per stage (ResNet-50)
  int width = 64;                          // channels of the stem and of stage 1's bottleneck
  bool batch_norm = true;
  bool zero_init_residual = true;          // last BN gamma of each block starts at 0
  // Schedule.
  int epochs = 90;
  std::string batch_schedule = "256";
  LrSchedule lr;
  // Optimiser and loss.
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool decay_bn_and_bias = false;          // false: no weight decay on BN parameters and biases
  double lars_eta = 0.001;
  double label_smoothing = 0.1;
  // Precision and device.
  std::string device = "cpu";
  Precision precision = Precision::kBfloat16;
  bool loss_scaling = false;               // dynamic loss scaling (on by default for float16)
  double initial_loss_scale = 65536.0;
  int loss_scale_growth_interval = 2000;
  // Data parallelism.
  double bucket_mb = 25.0;
  WireType wire_type = WireType::kFloat32;
  bool deterministic = false;              // TESSERA_DETERMINISTIC=1 and one torch thread
  int micro_batch = 0;                     // images per backward pass; 0: the rank's whole batch
  int staleness = 0;                       // 1: each step applies the previous step's gradient
  bool elastic = false;                    // survive lost ranks: shrink and go on
  ElasticBatch elastic_batch = ElasticBatch::kGlobal;
  // Run control.
  std::string out_dir = "train_out";
  bool resume = true;                      // resume from <out>/checkpoint.pt if present
  int64_t checkpoint_every = 0;            // steps; 0: at the end of each epoch only
  int64_t stop_after_steps = 0;            // stop (with a checkpoint) after this global step
  int64_t max_steps_per_epoch = 0;         // 0: the whole epoch
  int val_every = 1;                       // epochs; 0: never
  int val_batch = 0;                       // per rank; 0: the training per-rank batch
  int64_t max_val_batches = 0;             // per rank; 0: all
  uint64_t seed = 1;
  int threads = 0;                         // torch intra-op threads; 0: cores / local ranks
  ProgressStyle progress = ProgressStyle::kAuto;
  bool plot = true;
  bool help = false;

  // Derived from the above by ParseTrainSettings.
  BatchSchedule batches;
};

// Parses argv (program name first). Unknown flags, malformed values and inconsistent
// combinations are InvalidArgument errors naming the flag.
tessera::Status ParseTrainSettings(int argc, const char* const* argv, TrainSettings* settings);

// The flag table as text: one line per flag with its default and meaning.
std::string TrainSettingsHelp();

// A one-line summary of the settings that decide the training trajectory.
std::string DescribeSettings(const TrainSettings& settings);

}  // namespace trainer

#endif  // TESSERA_TRAINER_TRAIN_SETTINGS_H_
