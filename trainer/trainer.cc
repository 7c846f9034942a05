// The training loop (see trainer.h).
#include "trainer/trainer.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Autocast for the forward pass, restored (and its cast cache cleared, so that updated
// weights are cast afresh) when the scope ends.
class AutocastScope {
 public:
  AutocastScope(const TrainSettings& settings, bool cuda) : cuda_(cuda) {
    enabled_ = settings.precision != Precision::kFloat32;
    if (!enabled_) return;
    at::ScalarType type = settings.precision == Precision::kFloat16 ? at::kHalf : at::kBFloat16;
    if (cuda_) {
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(type);
    } else {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(type);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
  }

 private:
  bool cuda_;
  bool enabled_;
};

std::string CheckpointPath(const TrainSettings& settings) { return settings.out_dir + "/checkpoint.pt"; }

// Forward and backward of one batch (a rank's, or one of its micro-batches): backward of
// the loss summed over its images times `scale / global_images`; returns the sum.
double ForwardBackward(ResNet& model, const TrainSettings& settings, const torch::Device& device,
                       const torch::Tensor& images_in, const torch::Tensor& labels_in, double scale,
                       double global_images) {
  torch::Tensor images = images_in.to(device, /*non_blocking=*/true);
  torch::Tensor labels = labels_in.to(device, /*non_blocking=*/true);
  torch::Tensor logits;
  {
    AutocastScope autocast(settings, device.is_cuda());
    logits = model->forward(images);
  }
  torch::Tensor loss_sum = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat32), labels,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(
          settings.label_smoothing));
  (loss_sum * (scale / global_images)).backward();
  return loss_sum.item<double>();
}

// FNV-1a over the bytes of every parameter and buffer: equal hashes, equal weights.
uint64_t WeightsHash(torch::nn::Module& module) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (const torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const torch::Tensor& tensor : tensors) {
    const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    const unsigned char* bytes = static_cast<const unsigned char*>(cpu.data_ptr());
    for (size_t i = 0; i < cpu.nbytes(); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

Trainer::Trainer(const TrainSettings& settings, const Communicators& comms)
    : settings_(settings),
      comms_(comms),
      leader_(comms.rank == 0),
      device_(settings.device),
      scaler_(settings.initial_loss_scale, settings.loss_scale_growth_interval) {}

Trainer::~Trainer() = default;

tessera::Status Trainer::Setup() {
  if (device_.is_cuda() && !torch::cuda::is_available()) {
    return tessera::InvalidArgument("--device=" + settings_.device +
                                    ": this libtorch has no CUDA device (Debian's libtorch-dev is CPU-only)");
  }
  if (!device_.is_cuda() && settings_.precision == Precision::kFloat16) {
    return tessera::InvalidArgument("--precision=fp16 needs --device=cuda; CPU autocast computes in bf16");
  }
  TESSERA_RETURN_IF_ERROR(settings_.batches.CheckDivisible(comms_.world));
  int classes = settings_.synthetic_classes;
  if (!settings_.synthetic) {
    TESSERA_RETURN_IF_ERROR(LoadImageNetIndex(settings_.data, settings_.val_every > 0, &index_));
    classes = static_cast<int>(index_.classes.size());
    if (classes < 2) return tessera::InvalidArgument("dataset " + settings_.data + " has a single class");
  }

  torch::manual_seed(settings_.seed);
  ResNetOptions options;
  options.blocks = settings_.blocks;
  options.width = settings_.width;
  options.num_classes = classes;
  options.batch_norm = settings_.batch_norm;
  options.zero_init_residual = settings_.zero_init_residual;
  model_ = ResNet(options);
  model_->to(device_);
  model_->train();

  OptimizerOptions optimizer;
  optimizer.momentum = settings_.momentum;
  optimizer.weight_decay = settings_.weight_decay;
  optimizer.decay_bn_and_bias = settings_.decay_bn_and_bias;
  optimizer.lars = settings_.optimizer == OptimizerKind::kLars;
  optimizer.lars_eta = settings_.lars_eta;
  optimizer_ = std::make_unique<MomentumOptimizer>(model_->parameters(), optimizer);
  buckets_ = std::make_unique<GradientBuckets>(model_->parameters(), settings_.bucket_mb * 1024 * 1024,
                                               settings_.wire_type, comms_.gradients);

  TESSERA_RETURN_IF_ERROR(Resume());
  if (leader_) {
    bool fresh = progress_.global_step == 0 && progress_.step_in_epoch == 0 && progress_.epoch == 0;
    TESSERA_RETURN_IF_ERROR(log_.Open(settings_.out_dir, fresh ? -1 : progress_.global_step, progress_.epoch));
    display_ = std::make_unique<ProgressDisplay>(settings_.progress, settings_.epochs, stderr);
    std::fprintf(stderr,
                 "train_resnet: %d rank(s), %lld parameters, %d gradient buckets, %zu classes, %zu train / %zu val "
                 "images%s\n  %s\n",
                 comms_.world, static_cast<long long>(ParameterCount(*model_)), buckets_->bucket_count(),
                 settings_.synthetic ? static_cast<size_t>(classes) : index_.classes.size(), index_.train.size(),
                 index_.val.size(), settings_.synthetic ? " (synthetic data)" : "", DescribeSettings(settings_).c_str());
  }
  return tessera::Status::Ok();
}

tessera::Status Trainer::Resume() {
  // Rank 0 alone reads the checkpoint; the state reaches the others by broadcast, so
  // the output directory need not be shared.
  std::vector<double> header(10, 0.0);  // [0]: 1 resumed, -1 failed
  tessera::Status load_status;
  const std::string path = CheckpointPath(settings_);
  if (leader_ && settings_.resume && std::filesystem::exists(path)) {
    load_status = LoadCheckpoint(path, *model_, &optimizer_->momentum_buffers(), &progress_);
    header[0] = load_status.ok() ? 1 : -1;
    if (load_status.ok()) {
      std::fprintf(stderr, "train_resnet: resuming from %s at epoch %d, step %lld (global step %lld)\n", path.c_str(),
                   progress_.epoch + 1, static_cast<long long>(progress_.step_in_epoch),
                   static_cast<long long>(progress_.global_step));
      if (progress_.world != comms_.world) {
        std::fprintf(stderr, "train_resnet: note: the checkpoint was written by %d rank(s), this run has %d: the "
                     "batches are the same, batch-norm statistics and rounding differ\n", progress_.world, comms_.world);
      }
      if (progress_.settings != DescribeSettings(settings_)) {
        std::fprintf(stderr, "train_resnet: note: settings differ from the checkpoint's:\n  was %s\n  now %s\n",
                     progress_.settings.c_str(), DescribeSettings(settings_).c_str());
      }
    }
  }
  header[1] = progress_.epoch;
  header[2] = static_cast<double>(progress_.step_in_epoch);
  header[3] = static_cast<double>(progress_.global_step);
  header[4] = progress_.loss_scale;
  header[5] = static_cast<double>(progress_.clean_steps);
  header[6] = progress_.epoch_loss_sum;
  header[7] = static_cast<double>(progress_.epoch_images);
  header[8] = progress_.epoch_seconds;
  header[9] = static_cast<double>(progress_.skipped_total);
  if (comms_.world > 1) {
    TESSERA_RETURN_IF_ERROR(TesseraCall(
        tesseraBroadcast(header.data(), header.data(), header.size(), tesseraFloat64, 0, comms_.main, nullptr),
        comms_.main, "tesseraBroadcast of the checkpoint header"));
  }
  if (header[0] < 0) {
    return leader_ ? load_status : tessera::InvalidArgument("rank 0 could not load the checkpoint " + path);
  }
  progress_.epoch = static_cast<int>(header[1]);
  progress_.step_in_epoch = static_cast<int64_t>(header[2]);
  progress_.global_step = static_cast<int64_t>(header[3]);
  progress_.loss_scale = header[4];
  progress_.clean_steps = static_cast<int64_t>(header[5]);
  progress_.epoch_loss_sum = header[6];
  progress_.epoch_images = static_cast<int64_t>(header[7]);
  progress_.epoch_seconds = header[8];
  progress_.skipped_total = static_cast<int64_t>(header[9]);
  if (header[0] > 0) scaler_.Restore(progress_.loss_scale, static_cast<int>(progress_.clean_steps));

  // Identical start on every rank: rank 0's weights, buffers and momentum.
  if (comms_.world > 1) {
    TESSERA_RETURN_IF_ERROR(BroadcastModuleState(*model_, comms_.main));
    torch::nn::Module holder;
    for (size_t i = 0; i < optimizer_->momentum_buffers().size(); ++i) {
      holder.register_buffer("m" + std::to_string(i), optimizer_->momentum_buffers()[i]);
    }
    TESSERA_RETURN_IF_ERROR(BroadcastBuffers(holder, comms_.main));
  }
  return tessera::Status::Ok();
}

int64_t Trainer::StepsInEpoch(int epoch) const {
  int64_t global_batch = settings_.batches.GlobalBatch(epoch);
  int64_t images = settings_.synthetic ? settings_.synthetic_images : static_cast<int64_t>(index_.train.size());
  int64_t steps = StepsPerEpoch(images, global_batch);
  if (settings_.max_steps_per_epoch > 0) steps = std::min(steps, settings_.max_steps_per_epoch);
  return steps;
}

int64_t Trainer::RemainingSteps(int epoch, int64_t step_in_epoch) const {
  int64_t remaining = StepsInEpoch(epoch) - step_in_epoch;
  for (int e = epoch + 1; e < settings_.epochs; ++e) remaining += StepsInEpoch(e);
  if (settings_.stop_after_steps > 0) {
    remaining = std::min(remaining, settings_.stop_after_steps - progress_.global_step);
  }
  return std::max<int64_t>(remaining, 0);
}

tessera::Status Trainer::Run() {
  TESSERA_RETURN_IF_ERROR(Setup());
  if (settings_.stop_after_steps > 0 && progress_.global_step >= settings_.stop_after_steps) {
    if (leader_) std::fprintf(stderr, "train_resnet: already at step %lld, nothing to do\n", static_cast<long long>(progress_.global_step));
    return tessera::Status::Ok();
  }
  if (progress_.epoch >= settings_.epochs) {
    if (leader_) {
      std::fprintf(stderr, "train_resnet: the checkpoint in %s already ends epoch %d of %d: nothing to train "
                   "(raise --epochs to go on, or --resume=0 to start afresh)\n",
                   settings_.out_dir.c_str(), progress_.epoch, settings_.epochs);
    }
    return tessera::Status::Ok();
  }
  for (int epoch = progress_.epoch; epoch < settings_.epochs; ++epoch) {
    bool stopped = false;
    TESSERA_RETURN_IF_ERROR(TrainEpoch(epoch, &stopped));
    if (stopped) {
      if (leader_) {
        std::fprintf(stderr, "train_resnet: stopped after global step %lld (--stop_after_steps); checkpoint in %s\n",
                     static_cast<long long>(progress_.global_step), CheckpointPath(settings_).c_str());
      }
      break;
    }
  }
  if (leader_) {
    PrintSummary();
    std::fprintf(stderr, "train_resnet: final weights hash %016llx (FNV-1a of every parameter and buffer)\n",
                 static_cast<unsigned long long>(WeightsHash(*model_)));
  }
  return tessera::Status::Ok();
}

tessera::Status Trainer::TrainEpoch(int epoch, bool* stopped) {
  const int64_t global_batch = settings_.batches.GlobalBatch(epoch);
  const int64_t per_rank = global_batch / comms_.world;
  const int64_t steps = StepsInEpoch(epoch);
  if (steps == 0) {
    return tessera::InvalidArgument("epoch " + std::to_string(epoch + 1) + ": global batch " +
                                    std::to_string(global_batch) + " is larger than the " +
                                    std::to_string(index_.train.size()) + " training images");
  }
  std::unique_ptr<BatchLoader> loader;
  if (settings_.synthetic) {
    if (!synthetic_images_.defined() || synthetic_images_.size(0) != per_rank) {
      torch::manual_seed(settings_.seed + 1000 + comms_.rank);
      synthetic_images_ = torch::randn({per_rank, 3, settings_.crop_size, settings_.crop_size});
      synthetic_labels_ = torch::randint(settings_.synthetic_classes, {per_rank}, torch::kInt64);
    }
  } else {
    Batches batches = TrainBatchesForRank(EpochPermutation(static_cast<int64_t>(index_.train.size()), settings_.seed, epoch),
                                          global_batch, comms_.world, comms_.rank);
    batches.resize(static_cast<size_t>(steps));
    PipelineOptions options;
    options.train = true;
    options.crop_size = settings_.crop_size;
    options.min_crop_area = settings_.min_crop_area;
    options.seed = settings_.seed;
    options.epoch = epoch;
    options.decode_threads = settings_.decode_threads;
    options.prefetch_batches = settings_.prefetch_batches;
    loader = std::make_unique<BatchLoader>(index_.train, std::move(batches), progress_.step_in_epoch, options);
  }

  for (int64_t step = progress_.step_in_epoch; step < steps; ++step) {
    const double start = Now();
    StepInput input;
    Batch batch;
    if (settings_.synthetic) {
      input.images = synthetic_images_;
      input.labels = synthetic_labels_;
      input.count = static_cast<int>(per_rank);
    } else {
      if (!loader->Next(&batch)) return tessera::InternalError("the input pipeline ended before the epoch");
      ReportSkipped(batch);
      input.count = batch.count;
      input.skipped = static_cast<int>(batch.skipped.size());
      input.images = torch::from_blob(batch.pixels.data(), {batch.count, 3, settings_.crop_size, settings_.crop_size},
                                      torch::kFloat32);
      input.labels = torch::from_blob(batch.labels.data(), {batch.count}, torch::kInt64);
    }
    StepMetrics metrics;
    metrics.data_s = Now() - start;
    TESSERA_RETURN_IF_ERROR(TrainStep(input, epoch, steps, &metrics).Annotate("step " + std::to_string(step + 1) +
                                                                             " of epoch " + std::to_string(epoch + 1)));
    metrics.step_s = Now() - start;
    progress_.step_in_epoch = step + 1;
    progress_.global_step += 1;
    progress_.epoch_loss_sum += metrics.loss;
    progress_.epoch_images += metrics.images;
    progress_.epoch_seconds += metrics.step_s;
    metrics.global_step = progress_.global_step;
    metrics.step = step + 1;
    metrics.skipped_total = progress_.skipped_total;
    if (metrics.step > 2 || steps <= 2) steady_.Add(metrics);
    if (leader_) {
      log_.AddStep(metrics);
      display_->Step(metrics, RemainingSteps(epoch, step + 1));
    }
    const bool stop = settings_.stop_after_steps > 0 && progress_.global_step >= settings_.stop_after_steps;
    const bool periodic = settings_.checkpoint_every > 0 && progress_.global_step % settings_.checkpoint_every == 0;
    if (stop || (periodic && step + 1 < steps)) TESSERA_RETURN_IF_ERROR(SaveState());
    if (stop) {
      *stopped = true;
      return tessera::Status::Ok();
    }
  }
  loader.reset();

  EpochMetrics metrics;
  metrics.epoch = epoch;
  metrics.train_loss = progress_.epoch_loss_sum / static_cast<double>(steps);
  metrics.images_per_s = progress_.epoch_seconds > 0 ? progress_.epoch_images / progress_.epoch_seconds : 0;
  metrics.seconds = progress_.epoch_seconds;
  const bool last = epoch + 1 == settings_.epochs;
  if (!settings_.synthetic && settings_.val_every > 0 && ((epoch + 1) % settings_.val_every == 0 || last)) {
    TESSERA_RETURN_IF_ERROR(Validate(&metrics).Annotate("validation after epoch " + std::to_string(epoch + 1)));
  }
  metrics.skipped_total = progress_.skipped_total;
  progress_.epoch = epoch + 1;
  progress_.step_in_epoch = 0;
  progress_.epoch_loss_sum = 0;
  progress_.epoch_images = 0;
  progress_.epoch_seconds = 0;
  TESSERA_RETURN_IF_ERROR(SaveState());
  if (leader_) {
    log_.AddEpoch(metrics);
    display_->EndEpoch(metrics);
    if (settings_.plot) {
      tessera::Status plotted = log_.Plot();
      if (!plotted.ok()) std::fprintf(stderr, "train_resnet: no plot: %s\n", plotted.message().c_str());
    }
  }
  return tessera::Status::Ok();
}

tessera::Status Trainer::TrainStep(const StepInput& input, int epoch, int64_t steps_in_epoch, StepMetrics* m) {
  const int64_t global_batch = settings_.batches.GlobalBatch(epoch);
  m->epoch = epoch;
  m->steps_in_epoch = steps_in_epoch;
  m->global_batch = global_batch;
  m->lr = settings_.lr.At(epoch + static_cast<double>(progress_.step_in_epoch) / steps_in_epoch, global_batch);

  // 1. One model everywhere (rank 0's BN statistics) and the global image count.
  double start = Now();
  if (comms_.world > 1 && settings_.batch_norm) TESSERA_RETURN_IF_ERROR(BroadcastBuffers(*model_, comms_.main));
  std::vector<double> counts = {static_cast<double>(input.count), static_cast<double>(input.skipped)};
  TESSERA_RETURN_IF_ERROR(AllReduceSum(&counts, comms_.main));
  const double global_images = counts[0];
  progress_.skipped_total += static_cast<int64_t>(counts[1]);

  // 2-3. Forward and backward, by micro-batches of --micro_batch images if set (as many
  // on every rank: the per-rank batch's); buckets are allreduced as the last backward
  // produces them.
  const double scale = settings_.loss_scaling ? scaler_.scale() : 1.0;
  const int64_t size = settings_.micro_batch > 0 ? settings_.micro_batch : std::max(input.count, 1);
  const int64_t per_rank = std::max<int64_t>(global_batch / comms_.world, input.count);
  const int micro_batches = settings_.micro_batch > 0 ? static_cast<int>((per_rank + size - 1) / size) : 1;
  double local_loss_sum = 0;
  buckets_->Begin(micro_batches);
  for (int j = 0; j < micro_batches; ++j) {
    if (micro_batches > 1) buckets_->BeginMicroBatch(j);
    const int64_t first = j * size, n = std::min<int64_t>(size, input.count - first);
    if (n <= 0) continue;
    local_loss_sum += ForwardBackward(model_, settings_, device_, input.images.narrow(0, first, n),
                                      input.labels.narrow(0, first, n), scale, global_images);
  }
  m->compute_s = Now() - start;

  // 4. The rest of the allreduce, then loss-scale bookkeeping.
  TESSERA_RETURN_IF_ERROR(buckets_->Finish(&m->exposed_comm_s, &m->comm_busy_s));
  start = Now();
  bool apply = global_images > 0;
  if (settings_.loss_scaling) {
    torch::NoGradGuard no_grad;
    bool nonfinite = false;
    for (torch::Tensor& parameter : model_->parameters()) {
      parameter.mutable_grad().mul_(1.0 / scale);
      if (!nonfinite && !torch::isfinite(parameter.grad()).all().item<bool>()) nonfinite = true;
    }
    apply = scaler_.Update(nonfinite) && apply;
    progress_.loss_scale = scaler_.scale();
    progress_.clean_steps = scaler_.clean_steps();
  }
  m->loss_scale = scale;
  m->applied = apply;

  // 5. The update.
  if (apply) optimizer_->Step(m->lr);
  std::vector<double> loss = {local_loss_sum};
  TESSERA_RETURN_IF_ERROR(AllReduceSum(&loss, comms_.main));
  m->update_s = Now() - start;
  m->images = static_cast<int64_t>(global_images);
  m->loss = global_images > 0 ? loss[0] / global_images : 0;
  return tessera::Status::Ok();
}

tessera::Status Trainer::Validate(EpochMetrics* metrics) {
  const int64_t per_rank = settings_.val_batch > 0 ? settings_.val_batch
                                                   : settings_.batches.GlobalBatch(progress_.epoch) / comms_.world;
  Batches batches = ValBatchesForRank(static_cast<int64_t>(index_.val.size()), per_rank, comms_.world, comms_.rank);
  if (settings_.max_val_batches > 0 && static_cast<int64_t>(batches.size()) > settings_.max_val_batches) {
    batches.resize(static_cast<size_t>(settings_.max_val_batches));
  }
  PipelineOptions options;
  options.train = false;
  options.crop_size = settings_.crop_size;
  options.resize_size = settings_.val_resize;
  options.decode_threads = settings_.decode_threads;
  options.prefetch_batches = settings_.prefetch_batches;
  BatchLoader loader(index_.val, std::move(batches), 0, options);

  // Every rank evaluates rank 0's model: after the epoch's last step each rank still
  // holds the batch-norm statistics of its own last batch.
  if (comms_.world > 1 && settings_.batch_norm) TESSERA_RETURN_IF_ERROR(BroadcastBuffers(*model_, comms_.main));
  model_->eval();
  torch::NoGradGuard no_grad;
  // loss sum, top-1 hits, top-5 hits, images, skipped
  std::vector<double> totals(5, 0.0);
  Batch batch;
  while (loader.Next(&batch)) {
    ReportSkipped(batch);
    totals[4] += static_cast<double>(batch.skipped.size());
    if (batch.count == 0) continue;
    torch::Tensor images = torch::from_blob(batch.pixels.data(), {batch.count, 3, settings_.crop_size, settings_.crop_size},
                                            torch::kFloat32).to(device_);
    torch::Tensor labels = torch::from_blob(batch.labels.data(), {batch.count}, torch::kInt64).to(device_);
    torch::Tensor logits;
    {
      AutocastScope autocast(settings_, device_.is_cuda());
      logits = model_->forward(images);
    }
    logits = logits.to(torch::kFloat32);
    totals[0] += torch::nn::functional::cross_entropy(
                     logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    torch::Tensor top = std::get<1>(logits.topk(k, 1));
    torch::Tensor hits = top.eq(labels.unsqueeze(1));
    totals[1] += hits.select(1, 0).sum().item<double>();
    totals[2] += hits.any(1).sum().item<double>();
    totals[3] += batch.count;
  }
  model_->train();
  TESSERA_RETURN_IF_ERROR(AllReduceSum(&totals, comms_.main));
  progress_.skipped_total += static_cast<int64_t>(totals[4]);
  if (totals[3] <= 0) return tessera::InvalidArgument("no validation image could be decoded");
  metrics->val_loss = totals[0] / totals[3];
  metrics->top1 = totals[1] / totals[3];
  metrics->top5 = totals[2] / totals[3];
  metrics->val_images = static_cast<int64_t>(totals[3]);
  return tessera::Status::Ok();
}

tessera::Status Trainer::SaveState() {
  if (!leader_) return tessera::Status::Ok();
  progress_.world = comms_.world;
  progress_.settings = DescribeSettings(settings_);
  return SaveCheckpoint(CheckpointPath(settings_), *model_, optimizer_->momentum_buffers(), progress_);
}

void Trainer::ReportSkipped(const Batch& batch) {
  const int kReported = 10;
  const char* newline = display_ != nullptr && display_->redraws_in_place() ? "\n" : "";
  for (const std::string& file : batch.skipped) {
    if (skipped_reported_ < kReported) {
      std::fprintf(stderr, "%strain_resnet: rank %d: skipped %s\n", newline, comms_.rank, file.c_str());
    } else if (skipped_reported_ == kReported) {
      std::fprintf(stderr, "%strain_resnet: rank %d: more files skipped; counts in steps.csv (skipped_total)\n",
                   newline, comms_.rank);
    }
    ++skipped_reported_;
  }
}

void Trainer::SteadyTotals::Add(const StepMetrics& m) {
  ++steps;
  images += m.images;
  step_s += m.step_s;
  data_s += m.data_s;
  compute_s += m.compute_s;
  exposed_s += m.exposed_comm_s;
  busy_s += m.comm_busy_s;
  update_s += m.update_s;
}

void Trainer::PrintSummary() const {
  const SteadyTotals& t = steady_;
  if (t.steps == 0 || t.step_s <= 0) return;
  const double n = static_cast<double>(t.steps);
  std::fprintf(stderr,
               "train_resnet: summary over %lld steady steps: %.2f images/s; per step %.3f s = data %.3f + "
               "forward/backward %.3f + exposed allreduce %.3f (%.1f%% of the step) + update %.3f; allreduce busy "
               "%.3f s, %.1f%% of it hidden behind backward\n",
               static_cast<long long>(t.steps), t.images / t.step_s, t.step_s / n, t.data_s / n, t.compute_s / n,
               t.exposed_s / n, 100 * t.exposed_s / t.step_s, t.update_s / n, t.busy_s / n,
               t.busy_s > 0 ? 100 * std::max(0.0, 1 - t.exposed_s / t.busy_s) : 100.0);
}

}  // namespace trainer
