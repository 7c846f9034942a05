// The flag table of train_resnet and its parser (see train_settings.h).
#include "trainer/train_settings.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

namespace trainer {
namespace {

using Setter = std::function<tessera::Status(const std::string& value, TrainSettings* settings)>;
// A field's value as flag text. --help shows TrainSettings{}'s values, so each default is
// written once, in the struct (and LrSchedule).
using Shower = std::function<std::string(const TrainSettings& settings)>;

// How a flag reads and shows its field.
struct Access {
  Setter set;
  Shower show;
};

struct Flag {
  const char* name;
  const char* meaning;
  Access access;
};

std::string ShowReal(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

tessera::Status Bad(const std::string& name, const std::string& value, const std::string& expected) {
  return tessera::InvalidArgument("--" + name + "=" + value + ": expected " + expected);
}

// Setters for the field types. Each returns a lambda that parses into one field.
// Accessors for the field types. Each parses into and shows one field.
template <typename Field>
Access Int(Field TrainSettings::*field, const char* name, int64_t min) {
  return {[=](const std::string& value, TrainSettings* s) {
            char* end = nullptr;
            long long parsed = std::strtoll(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || parsed < min) {
              return Bad(name, value, "an integer >= " + std::to_string(min));
            }
            s->*field = static_cast<Field>(parsed);
            return tessera::Status::Ok();
          },
          [=](const TrainSettings& s) { return std::to_string(s.*field); }};
}

// A number >= min into the field that `field` selects.
template <typename Select>
Access RealIn(Select field, const char* name, double min) {  // field(settings) -> double&
  return {[=](const std::string& value, TrainSettings* s) {
            char* end = nullptr;
            double parsed = std::strtod(value.c_str(), &end);
            if (value.empty() || *end != '\0' || !(parsed >= min)) {
              return Bad(name, value, "a number >= " + std::to_string(min));
            }
            field(*s) = parsed;
            return tessera::Status::Ok();
          },
          [=](const TrainSettings& s) { return ShowReal(field(s)); }};
}

Access Real(double TrainSettings::*field, const char* name, double min) {
  return RealIn([field](auto& s) -> auto& { return s.*field; }, name, min);
}

Access LrReal(double LrSchedule::*field, const char* name, double min) {
  return RealIn([field](auto& s) -> auto& { return s.lr.*field; }, name, min);
}

Access Bool(bool TrainSettings::*field, const char* name) {
  return {[=](const std::string& value, TrainSettings* s) {
            if (value == "1" || value == "true" || value == "yes") {
              s->*field = true;
            } else if (value == "0" || value == "false" || value == "no") {
              s->*field = false;
            } else {
              return Bad(name, value, "1 or 0");
            }
            return tessera::Status::Ok();
          },
          [=](const TrainSettings& s) { return std::string(s.*field ? "1" : "0"); }};
}

Access Text(std::string TrainSettings::*field) {
  return {[=](const std::string& value, TrainSettings* s) {
            s->*field = value;
            return tessera::Status::Ok();
          },
          [=](const TrainSettings& s) { return s.*field; }};
}

// Choosing among named values of an enum.
template <typename Enum>
Access Choice(Enum TrainSettings::*field, const char* name, std::vector<std::pair<std::string, Enum>> choices) {
  return {[=](const std::string& value, TrainSettings* s) {
            std::string names;
            for (const auto& choice : choices) {
              if (choice.first == value) {
                s->*field = choice.second;
                return tessera::Status::Ok();
              }
              names += (names.empty() ? "" : ", ") + choice.first;
            }
            return Bad(name, value, "one of " + names);
          },
          [=](const TrainSettings& s) {
            for (const auto& choice : choices) {
              if (choice.second == s.*field) return choice.first;
            }
            return std::string("?");
          }};
}

// Numbers joined by commas ("30,60,80").
template <typename Number>
std::string ShowList(const std::vector<Number>& values) {
  std::string text;
  for (Number v : values) text += (text.empty() ? "" : ",") + ShowReal(static_cast<double>(v));
  return text;
}

tessera::Status SetBlocks(const std::string& value, TrainSettings* s) {
  std::vector<int> blocks;
  std::stringstream stream(value);
  std::string part;
  while (std::getline(stream, part, ',')) {
    char* end = nullptr;
    long parsed = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || parsed < 1 || parsed > 64) return Bad("blocks", value, "4 counts like 3,4,6,3");
    blocks.push_back(static_cast<int>(parsed));
  }
  if (blocks.size() != 4) return Bad("blocks", value, "4 counts like 3,4,6,3");
  s->blocks = blocks;
  return tessera::Status::Ok();
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      // Data.
      {"data", "dataset root in the ImageNet layout (train/<wnid>/*.JPEG, val/<wnid>/*.JPEG)",
       Text(&TrainSettings::data)},
      {"synthetic", "1: random tensors instead of a dataset (throughput measurements)",
       Bool(&TrainSettings::synthetic, "synthetic")},
      {"synthetic_images", "images per epoch with --synthetic=1",
       Int(&TrainSettings::synthetic_images, "synthetic_images", 1)},
      {"synthetic_classes", "classes with --synthetic=1", Int(&TrainSettings::synthetic_classes, "synthetic_classes", 2)},
      {"decode_threads", "JPEG decoding threads per rank", Int(&TrainSettings::decode_threads, "decode_threads", 1)},
      {"prefetch", "batches decoded ahead of training", Int(&TrainSettings::prefetch_batches, "prefetch", 1)},
      {"crop_size", "network input size (train random-resized-crop, val center crop)",
       Int(&TrainSettings::crop_size, "crop_size", 8)},
      {"val_resize", "validation: shorter side before the center crop", Int(&TrainSettings::val_resize, "val_resize", 8)},
      {"min_crop_area", "random-resized-crop: smallest area fraction",
       Real(&TrainSettings::min_crop_area, "min_crop_area", 0.001)},
      // Model.
      {"blocks", "bottleneck blocks per stage (3,4,6,3 is ResNet-50)",
       {SetBlocks, [](const TrainSettings& s) { return ShowList(s.blocks); }}},
      {"width", "base width (64 is ResNet-50; smaller for quick runs)", Int(&TrainSettings::width, "width", 1)},
      {"batch_norm", "0: no batch norm (the gradient-equality test's model)",
       Bool(&TrainSettings::batch_norm, "batch_norm")},
      {"zero_init_residual", "start each block's last BN gamma at 0 (Goyal et al.)",
       Bool(&TrainSettings::zero_init_residual, "zero_init_residual")},
      // Schedule.
      {"epochs", "epochs to train", Int(&TrainSettings::epochs, "epochs", 1)},
      {"batch", "global batch, or a per-epoch schedule 'epoch:batch,...' (e.g. 0:256,5:512)",
       Text(&TrainSettings::batch_schedule)},
      {"lr", "learning rate at the reference batch (linear scaling rule)", LrReal(&LrSchedule::base_lr, "lr", 0)},
      {"reference_batch", "batch at which --lr applies",
       {[](const std::string& v, TrainSettings* s) {
          char* end = nullptr;
          long long parsed = std::strtoll(v.c_str(), &end, 10);
          if (v.empty() || *end != '\0' || parsed < 1) return Bad("reference_batch", v, "an integer >= 1");
          s->lr.reference_batch = parsed;
          return tessera::Status::Ok();
        },
        [](const TrainSettings& s) { return std::to_string(s.lr.reference_batch); }}},
      {"warmup_epochs", "gradual warm-up length in epochs (0: none)",
       LrReal(&LrSchedule::warmup_epochs, "warmup_epochs", 0)},
      {"warmup_start_lr", "rate at the start of warm-up (-1: --lr; capped at the target)",
       LrReal(&LrSchedule::warmup_start_lr, "warmup_start_lr", -1)},
      {"lr_decay", "decay after warm-up: step, cosine or poly",
       {[](const std::string& v, TrainSettings* s) { return ParseLrDecay(v, &s->lr.decay); },
        [](const TrainSettings& s) { return LrDecayName(s.lr.decay); }}},
      {"milestones", "step decay: epochs where the rate is multiplied by --step_factor",
       {[](const std::string& v, TrainSettings* s) { return ParseMilestones(v, &s->lr.milestones); },
        [](const TrainSettings& s) { return ShowList(s.lr.milestones); }}},
      {"step_factor", "step decay factor", LrReal(&LrSchedule::step_factor, "step_factor", 0)},
      {"poly_power", "poly decay power", LrReal(&LrSchedule::poly_power, "poly_power", 0)},
      // Optimiser and loss.
      {"optimizer", "sgd (momentum) or lars (layer-wise adaptive rate scaling)",
       Choice(&TrainSettings::optimizer, "optimizer", {{"sgd", OptimizerKind::kSgd}, {"lars", OptimizerKind::kLars}})},
      {"momentum", "SGD momentum", Real(&TrainSettings::momentum, "momentum", 0)},
      {"weight_decay", "L2 weight decay", Real(&TrainSettings::weight_decay, "weight_decay", 0)},
      {"decay_bn_and_bias", "1: weight decay also on batch-norm parameters and biases",
       Bool(&TrainSettings::decay_bn_and_bias, "decay_bn_and_bias")},
      {"lars_eta", "LARS trust coefficient", Real(&TrainSettings::lars_eta, "lars_eta", 0)},
      {"label_smoothing", "label smoothing of the cross-entropy loss",
       Real(&TrainSettings::label_smoothing, "label_smoothing", 0)},
      // Precision and device.
      {"device", "cpu or cuda (cuda needs a libtorch built with CUDA)", Text(&TrainSettings::device)},
      {"precision", "autocast precision: bf16, fp16 (CUDA) or fp32; weights stay float32",
       Choice(&TrainSettings::precision, "precision",
              {{"bf16", Precision::kBfloat16}, {"fp16", Precision::kFloat16}, {"fp32", Precision::kFloat32}})},
      {"loss_scaling", "dynamic loss scaling: auto (on for fp16), 1 or 0",
       {[](const std::string& v, TrainSettings* s) {
          if (v == "auto") return tessera::Status::Ok();  // decided after parsing
          return Bool(&TrainSettings::loss_scaling, "loss_scaling").set(v, s);
        },
        // Unless given, ParseTrainSettings decides it from --precision.
        [](const TrainSettings&) { return std::string("auto"); }}},
      {"initial_loss_scale", "first loss scale", Real(&TrainSettings::initial_loss_scale, "initial_loss_scale", 1)},
      {"loss_scale_growth_interval", "clean steps before the loss scale doubles",
       Int(&TrainSettings::loss_scale_growth_interval, "loss_scale_growth_interval", 1)},
      // Data parallelism.
      {"bucket_mb", "gradient bucket size in MiB (each bucket is one allreduce)",
       Real(&TrainSettings::bucket_mb, "bucket_mb", 0.001)},
      {"wire_dtype", "gradients on the wire: float32, bfloat16 or float16 (reduced in float32)",
       Choice(&TrainSettings::wire_type, "wire_dtype",
              {{"float32", WireType::kFloat32}, {"bfloat16", WireType::kBfloat16}, {"float16", WireType::kFloat16}})},
      {"deterministic",
       "1: the same weights bit for bit whatever the layout, algorithm and, with --micro_batch, rank count "
       "(TESSERA_DETERMINISTIC=1; --threads defaults to 1)",
       Bool(&TrainSettings::deterministic, "deterministic")},
      {"micro_batch", "images per forward/backward pass, each pass's gradients one allreduce part (0: all)",
       Int(&TrainSettings::micro_batch, "micro_batch", 0)},
      {"staleness", "1: double buffering: a step's allreduce runs during the next step, which applies it",
       Choice(&TrainSettings::staleness, "staleness", {{"0", 0}, {"1", 1}})},
      {"elastic", "1: when ranks are lost, the survivors shrink and go on (mpirun needs --enable-recovery)",
       Bool(&TrainSettings::elastic, "elastic")},
      {"elastic_batch", "after lost ranks keep the global batch, or the per-rank one (rank; linear-scaled rate)",
       Choice(&TrainSettings::elastic_batch, "elastic_batch",
              {{"global", ElasticBatch::kGlobal}, {"rank", ElasticBatch::kPerRank}})},
      // Run control.
      {"out", "directory of metrics CSVs, the plot and the checkpoint", Text(&TrainSettings::out_dir)},
      {"resume", "resume from <out>/checkpoint.pt if it exists", Bool(&TrainSettings::resume, "resume")},
      {"checkpoint_every", "also checkpoint every N steps (0: at epoch ends only)",
       Int(&TrainSettings::checkpoint_every, "checkpoint_every", 0)},
      {"stop_after_steps", "stop after this global step, with a checkpoint (0: never)",
       Int(&TrainSettings::stop_after_steps, "stop_after_steps", 0)},
      {"max_steps_per_epoch", "cut epochs to this many steps (0: whole epochs)",
       Int(&TrainSettings::max_steps_per_epoch, "max_steps_per_epoch", 0)},
      {"val_every", "validate every N epochs (0: never)", Int(&TrainSettings::val_every, "val_every", 0)},
      {"val_batch", "validation batch per rank (0: the training per-rank batch)",
       Int(&TrainSettings::val_batch, "val_batch", 0)},
      {"max_val_batches", "validation batches per rank (0: all)", Int(&TrainSettings::max_val_batches, "max_val_batches", 0)},
      {"seed", "seed of initialisation, shuffling and augmentation", Int(&TrainSettings::seed, "seed", 0)},
      {"threads", "torch threads per rank (0: cores / ranks on this host)", Int(&TrainSettings::threads, "threads", 0)},
      {"progress", "progress display: auto (bar on a terminal), bar, lines or off",
       Choice(&TrainSettings::progress, "progress",
              {{"auto", ProgressStyle::kAuto}, {"bar", ProgressStyle::kBar}, {"lines", ProgressStyle::kLines},
               {"off", ProgressStyle::kOff}})},
      {"plot", "write <out>/metrics.png with gnuplot after each epoch", Bool(&TrainSettings::plot, "plot")},
      {"help", "print this table and exit", Bool(&TrainSettings::help, "help")},
  };
  return flags;
}

}  // namespace

tessera::Status ParseTrainSettings(int argc, const char* const* argv, TrainSettings* settings) {
  *settings = TrainSettings();
  bool loss_scaling_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return tessera::InvalidArgument("unexpected argument '" + arg + "' (flags are --name=value)");
    size_t equals = arg.find('=');
    std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    std::string value = equals == std::string::npos ? "1" : arg.substr(equals + 1);
    const Flag* flag = nullptr;
    for (const Flag& candidate : Flags()) {
      if (name == candidate.name) flag = &candidate;
    }
    if (flag == nullptr) return tessera::InvalidArgument("unknown flag --" + name + " (see --help)");
    TESSERA_RETURN_IF_ERROR(flag->access.set(value, settings));
    if (name == "loss_scaling" && value != "auto") loss_scaling_given = true;
  }
  if (settings->help) return tessera::Status::Ok();

  TESSERA_RETURN_IF_ERROR(BatchSchedule::Parse(settings->batch_schedule, &settings->batches));
  if (!loss_scaling_given) settings->loss_scaling = settings->precision == Precision::kFloat16;
  if (settings->device != "cpu" && settings->device.rfind("cuda", 0) != 0) {
    return Bad("device", settings->device, "cpu or cuda[:N]");
  }
  if (settings->val_resize < settings->crop_size) {
    return tessera::InvalidArgument("--val_resize=" + std::to_string(settings->val_resize) +
                                    " is smaller than --crop_size=" + std::to_string(settings->crop_size));
  }
  if (!settings->synthetic && settings->data.empty()) {
    return tessera::InvalidArgument("no dataset: pass --data=<ImageNet-layout root> or --synthetic=1");
  }
  settings->lr.total_epochs = settings->epochs;
  return tessera::Status::Ok();
}

std::string TrainSettingsHelp() {
  std::string text = "usage: train_resnet --data=DIR [--name=value ...]\n"
                     "Launch alone or with `mpirun -np N`; every rank takes the same flags.\n\n";
  const TrainSettings defaults;
  for (const Flag& flag : Flags()) {
    std::string left = std::string("  --") + flag.name + "=" + flag.access.show(defaults);
    if (left.size() < 34) left.resize(34, ' ');
    text += left + " " + flag.meaning + "\n";
  }
  return text;
}

std::string DescribeSettings(const TrainSettings& s) {
  std::ostringstream out;
  out << "blocks=" << s.blocks[0] << "," << s.blocks[1] << "," << s.blocks[2] << "," << s.blocks[3]
      << " width=" << s.width << " batch=" << s.batches.ToString() << " lr=" << s.lr.base_lr << "@"
      << s.lr.reference_batch << " warmup=" << s.lr.warmup_epochs << " epochs=" << s.epochs
      << " optimizer=" << (s.optimizer == OptimizerKind::kLars ? "lars" : "sgd")
      << " label_smoothing=" << s.label_smoothing << " precision="
      << (s.precision == Precision::kBfloat16 ? "bf16" : s.precision == Precision::kFloat16 ? "fp16" : "fp32")
      << " wire="
      << (s.wire_type == WireType::kBfloat16 ? "bfloat16" : s.wire_type == WireType::kFloat16 ? "float16" : "float32")
      << " bucket_mb=" << s.bucket_mb << " crop=" << s.crop_size << " seed=" << s.seed << " staleness=" << s.staleness;
  return out.str();
}

}  // namespace trainer
