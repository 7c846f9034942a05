// The training loop (see trainer.h).
#include "trainer/trainer.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "base/hash.h"

namespace trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Turns autocast on (computing in `type`) or off for CUDA or the CPU. libtorch 2.4 replaced
// the per-device functions (set_enabled, set_cpu_enabled, ...) with ones that take the
// device type; Debian's libtorch is 1.13, a CUDA machine's usually newer.
void SetAutocast(bool cuda, bool enabled, at::ScalarType type) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  const at::DeviceType device = cuda ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, type);
#else
  if (cuda) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(type);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(type);
  }
#endif
}

// Autocast for the forward pass, restored (and its cast cache cleared, so that updated
// weights are cast afresh) when the scope ends.
class AutocastScope {
 public:
  AutocastScope(const TrainSettings& settings, bool cuda) : cuda_(cuda) {
    enabled_ = settings.precision != Precision::kFloat32;
    if (!enabled_) return;
    type_ = settings.precision == Precision::kFloat16 ? at::kHalf : at::kBFloat16;
    SetAutocast(cuda_, true, type_);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    SetAutocast(cuda_, false, type_);
  }

 private:
  bool cuda_;
  bool enabled_;
  at::ScalarType type_ = at::kFloat;
};

std::string CheckpointPath(const TrainSettings& settings) { return settings.out_dir + "/checkpoint.pt"; }

// A failure --elastic survives: a peer died, stopped answering or revoked.
bool LostPeer(const tessera::Status& s) {
  return s.code() == tessera::Code::kRemoteError || s.code() == tessera::Code::kTimeout;
}

// The progress as numbers, for a broadcast (int64 counts are exact in a double).
std::vector<double> EncodeProgress(const TrainProgress& p) {
  return {static_cast<double>(p.epoch), static_cast<double>(p.step_in_epoch), static_cast<double>(p.global_step),
          p.loss_scale, static_cast<double>(p.clean_steps), p.epoch_loss_sum, static_cast<double>(p.epoch_images),
          p.epoch_seconds, static_cast<double>(p.skipped_total), static_cast<double>(p.epoch_position),
          static_cast<double>(p.epoch_span), p.pending ? 1.0 : 0.0, p.pending_scale,
          static_cast<double>(p.pending_images)};
}

void DecodeProgress(const std::vector<double>& v, TrainProgress* p) {
  p->epoch = static_cast<int>(v[0]);
  p->step_in_epoch = static_cast<int64_t>(v[1]);
  p->global_step = static_cast<int64_t>(v[2]);
  p->loss_scale = v[3];
  p->clean_steps = static_cast<int64_t>(v[4]);
  p->epoch_loss_sum = v[5];
  p->epoch_images = static_cast<int64_t>(v[6]);
  p->epoch_seconds = v[7];
  p->skipped_total = static_cast<int64_t>(v[8]);
  p->epoch_position = static_cast<int64_t>(v[9]);
  p->epoch_span = static_cast<int64_t>(v[10]);
  p->pending = v[11] != 0;
  p->pending_scale = v[12];
  p->pending_images = static_cast<int64_t>(v[13]);
}

// FNV-1a over the bytes of every parameter and buffer: equal hashes, equal weights.
uint64_t WeightsHash(torch::nn::Module& module) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (const torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  uint64_t hash = tessera::kFnv1aBasis;
  for (const torch::Tensor& tensor : tensors) {
    const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    hash = tessera::Fnv1a(cpu.data_ptr(), cpu.nbytes(), hash);
  }
  return hash;
}

}  // namespace

Trainer::Trainer(const TrainSettings& settings, const Communicators& comms)
    : settings_(settings),
      comms_(comms),
      launch_world_(comms.world),
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
                                               settings_.wire_type, settings_.staleness, comms_.gradients);
  progress_.loss_scale = scaler_.scale();
  progress_.clean_steps = scaler_.clean_steps();

  TESSERA_RETURN_IF_ERROR(Resume());
  if (leader()) {
    bool fresh = progress_.global_step == 0 && progress_.step_in_epoch == 0 && progress_.epoch == 0;
    TESSERA_RETURN_IF_ERROR(OpenMetrics(fresh));
    std::fprintf(stderr,
                 "train_resnet: %d rank(s), %lld parameters, %d gradient buckets, %zu classes, %zu train / %zu val "
                 "images%s\n  %s\n",
                 comms_.world, static_cast<long long>(ParameterCount(*model_)), buckets_->bucket_count(),
                 settings_.synthetic ? static_cast<size_t>(classes) : index_.classes.size(), index_.train.size(),
                 index_.val.size(), settings_.synthetic ? " (synthetic data)" : "", DescribeSettings(settings_).c_str());
  }
  return tessera::Status::Ok();
}

tessera::Status Trainer::OpenMetrics(bool fresh) {
  TESSERA_RETURN_IF_ERROR(log_.Open(settings_.out_dir, fresh ? -1 : progress_.global_step, progress_.epoch));
  if (display_ == nullptr) display_ = std::make_unique<ProgressDisplay>(settings_.progress, settings_.epochs, stderr);
  return tessera::Status::Ok();
}

tessera::Status Trainer::Resume() {
  // Rank 0 alone reads the checkpoint; the state reaches the others by broadcast, so
  // the output directory need not be shared.
  double loaded = 0;  // 1 resumed, -1 failed
  tessera::Status load_status;
  torch::Tensor pending;
  const std::string path = CheckpointPath(settings_);
  if (leader() && settings_.resume && std::filesystem::exists(path)) {
    load_status = LoadCheckpoint(path, *model_, &optimizer_->momentum_buffers(), &pending, &progress_);
    if (load_status.ok() && progress_.pending && settings_.staleness == 0) {
      load_status = tessera::InvalidArgument("checkpoint " + path + " holds a gradient waiting to be applied (it was "
                                             "written with --staleness=1): resume with --staleness=1");
    }
    loaded = load_status.ok() ? 1 : -1;
    if (load_status.ok()) {
      std::fprintf(stderr, "train_resnet: resuming from %s at epoch %d, step %lld (global step %lld)\n", path.c_str(),
                   progress_.epoch + 1, static_cast<long long>(progress_.step_in_epoch),
                   static_cast<long long>(progress_.global_step));
      if (progress_.epoch_position < 0) {  // written before positions were saved
        progress_.epoch_position = progress_.step_in_epoch * GlobalBatch(progress_.epoch);
      }
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
  if (comms_.world > 1) {
    TESSERA_RETURN_IF_ERROR(TesseraCall(tesseraBroadcast(&loaded, &loaded, 1, tesseraFloat64, 0, comms_.main, nullptr),
                                        comms_.main, "tesseraBroadcast of the checkpoint's outcome"));
  }
  if (loaded < 0) {
    return leader() ? load_status : tessera::InvalidArgument("rank 0 could not load the checkpoint " + path);
  }
  // Identical start on every rank: rank 0's progress, weights, buffers and momentum.
  return BroadcastState(0, &pending);
}

tessera::Status Trainer::BroadcastState(int root, torch::Tensor* pending) {
  std::vector<double> header = EncodeProgress(progress_);
  const bool taker = comms_.rank != root && comms_.world > 1;
  if (taker) state_valid_ = false;  // until the whole state has arrived
  if (comms_.world > 1) {
    TESSERA_RETURN_IF_ERROR(TesseraCall(tesseraBroadcast(header.data(), header.data(), header.size(), tesseraFloat64,
                                                         root, comms_.main, nullptr),
                                        comms_.main, "tesseraBroadcast of the training progress"));
  }
  TrainProgress progress = progress_;
  DecodeProgress(header, &progress);
  if (comms_.world > 1) {
    TESSERA_RETURN_IF_ERROR(BroadcastModuleState(*model_, comms_.main, root));
    TESSERA_RETURN_IF_ERROR(BroadcastTensors(optimizer_->momentum_buffers(), comms_.main, root));
    if (progress.pending) {
      if (taker) *pending = torch::empty({ParameterCount(*model_)}, torch::kFloat32);
      TESSERA_RETURN_IF_ERROR(BroadcastTensors({*pending}, comms_.main, root));
    }
  }
  progress_ = progress;
  scaler_.Restore(progress_.loss_scale, static_cast<int>(progress_.clean_steps));
  buckets_->SetPendingGradients(progress_.pending ? *pending : torch::Tensor());
  state_valid_ = true;
  return tessera::Status::Ok();
}

int64_t Trainer::GlobalBatch(int epoch) const {
  const int64_t scheduled = settings_.batches.GlobalBatch(epoch);
  if (settings_.elastic_batch == ElasticBatch::kGlobal || comms_.world == launch_world_) return scheduled;
  return scheduled / launch_world_ * comms_.world;  // the per-rank batch of the launch
}

int64_t Trainer::TrainImages() const {
  return settings_.synthetic ? settings_.synthetic_images : static_cast<int64_t>(index_.train.size());
}

int64_t Trainer::LaterSteps(int epoch) const {
  int64_t steps = 0;
  for (int e = epoch + 1; e < settings_.epochs; ++e) {
    const int64_t global_batch = GlobalBatch(e);
    steps += EpochSpan(TrainImages(), global_batch, settings_.max_steps_per_epoch) / global_batch;
  }
  return steps;
}

tessera::Status Trainer::Run() {
  TESSERA_RETURN_IF_ERROR(Setup());
  if (settings_.stop_after_steps > 0 && progress_.global_step >= settings_.stop_after_steps) {
    if (leader()) std::fprintf(stderr, "train_resnet: already at step %lld, nothing to do\n", static_cast<long long>(progress_.global_step));
    return tessera::Status::Ok();
  }
  if (progress_.epoch >= settings_.epochs) {
    if (leader()) {
      std::fprintf(stderr, "train_resnet: the checkpoint in %s already ends epoch %d of %d: nothing to train "
                   "(raise --epochs to go on, or --resume=0 to start afresh)\n",
                   settings_.out_dir.c_str(), progress_.epoch, settings_.epochs);
    }
    return tessera::Status::Ok();
  }
  while (progress_.epoch < settings_.epochs) {
    bool stopped = false;
    tessera::Status status = TrainEpoch(progress_.epoch, &stopped);
    while (!status.ok() && settings_.elastic && LostPeer(status)) status = Recover(status);
    if (!status.ok()) return status;
    if (stopped) {
      if (leader()) {
        std::fprintf(stderr, "train_resnet: stopped after global step %lld (--stop_after_steps); checkpoint in %s\n",
                     static_cast<long long>(progress_.global_step), CheckpointPath(settings_).c_str());
      }
      break;
    }
  }
  if (leader()) {
    PrintSummary();
    std::fprintf(stderr, "train_resnet: final weights hash %016llx (FNV-1a of every parameter and buffer)\n",
                 static_cast<unsigned long long>(WeightsHash(*model_)));
  }
  return tessera::Status::Ok();
}

tessera::Status Trainer::TrainEpoch(int epoch, bool* stopped) {
  const int64_t global_batch = GlobalBatch(epoch);
  if (progress_.epoch_span == 0) {
    progress_.epoch_span = EpochSpan(TrainImages(), global_batch, settings_.max_steps_per_epoch);
  }
  const int64_t span = progress_.epoch_span;
  if (span == 0) {
    return tessera::InvalidArgument("epoch " + std::to_string(epoch + 1) + ": global batch " +
                                    std::to_string(global_batch) + " is larger than the " +
                                    std::to_string(TrainImages()) + " training images");
  }
  const int64_t left = StepsLeft(span, progress_.epoch_position, global_batch);
  const Batches batches = TrainBatchesForRank(EpochPermutation(TrainImages(), settings_.seed, epoch),
                                              progress_.epoch_position, span, global_batch, comms_.world, comms_.rank);
  std::unique_ptr<BatchLoader> loader = settings_.synthetic ? nullptr : TrainLoader(epoch, batches);
  for (int64_t k = 0; k < left; ++k) {
    const double start = Now();
    StepInput input;
    TESSERA_RETURN_IF_ERROR(ReadStep(loader.get(), batches[static_cast<size_t>(k)], &input));
    StepMetrics metrics;
    metrics.data_s = Now() - start;
    metrics.steps_in_epoch = progress_.step_in_epoch + left - k;
    const TrainProgress before = progress_;
    TESSERA_RETURN_IF_ERROR(TrainStep(input, epoch, global_batch, &metrics)
                                .Annotate("step " + std::to_string(progress_.step_in_epoch + 1) + " of epoch " +
                                          std::to_string(epoch + 1)));
    metrics.step_s = Now() - start;
    EndStep(metrics, std::min(global_batch, span - progress_.epoch_position), left - k - 1);
    if (settings_.staleness > 0) pending_start_ = before;
    const bool stop = settings_.stop_after_steps > 0 && progress_.global_step >= settings_.stop_after_steps;
    const bool periodic = settings_.checkpoint_every > 0 && progress_.global_step % settings_.checkpoint_every == 0;
    if (stop || (periodic && k + 1 < left)) TESSERA_RETURN_IF_ERROR(SaveState());
    if (stop) {
      *stopped = true;
      return tessera::Status::Ok();
    }
  }
  loader.reset();
  return EndEpoch(epoch);
}

std::unique_ptr<BatchLoader> Trainer::TrainLoader(int epoch, const Batches& batches) const {
  PipelineOptions options;
  options.train = true;
  options.crop_size = settings_.crop_size;
  options.min_crop_area = settings_.min_crop_area;
  options.seed = settings_.seed;
  options.epoch = epoch;
  options.decode_threads = settings_.decode_threads;
  options.prefetch_batches = settings_.prefetch_batches;
  return std::make_unique<BatchLoader>(index_.train, batches, 0, options);
}

tessera::Status Trainer::ReadStep(BatchLoader* loader, const std::vector<int64_t>& ids, StepInput* input) {
  for (int64_t id : ids) {
    input->id_sum += static_cast<double>(id);
    input->id_sq_sum += static_cast<double>(id) * static_cast<double>(id);
  }
  if (settings_.synthetic) {
    const int64_t count = static_cast<int64_t>(ids.size());
    if (!synthetic_images_.defined() || synthetic_images_.size(0) != count) {
      torch::manual_seed(settings_.seed + 1000 + comms_.rank);
      synthetic_images_ = torch::randn({count, 3, settings_.crop_size, settings_.crop_size});
      synthetic_labels_ = torch::randint(settings_.synthetic_classes, {count}, torch::kInt64);
    }
    input->images = synthetic_images_;
    input->labels = synthetic_labels_;
    input->count = static_cast<int>(count);
    return tessera::Status::Ok();
  }
  Batch& batch = input->batch;
  if (!loader->Next(&batch)) return tessera::InternalError("the input pipeline ended before the epoch");
  ReportSkipped(batch);
  input->count = batch.count;
  input->skipped = static_cast<int>(batch.skipped.size());
  input->images = torch::from_blob(batch.pixels.data(), {batch.count, 3, settings_.crop_size, settings_.crop_size},
                                   torch::kFloat32);
  input->labels = torch::from_blob(batch.labels.data(), {batch.count}, torch::kInt64);
  return tessera::Status::Ok();
}

void Trainer::EndStep(const StepMetrics& step, int64_t positions, int64_t steps_left) {
  StepMetrics metrics = step;
  progress_.step_in_epoch += 1;
  progress_.global_step += 1;
  progress_.epoch_position += positions;
  progress_.epoch_loss_sum += metrics.loss;
  progress_.epoch_images += metrics.images;
  progress_.epoch_seconds += metrics.step_s;
  metrics.global_step = progress_.global_step;
  metrics.step = progress_.step_in_epoch;
  metrics.skipped_total = progress_.skipped_total;
  if (metrics.step > 2 || metrics.steps_in_epoch <= 2) steady_.Add(metrics);
  recovery_.last_step = metrics;
  if (leader()) {
    int64_t remaining = steps_left + LaterSteps(metrics.epoch);
    if (settings_.stop_after_steps > 0) remaining = std::min(remaining, settings_.stop_after_steps - progress_.global_step);
    log_.AddStep(metrics);
    display_->Step(metrics, std::max<int64_t>(remaining, 0));
  }
  NoteRecovered(metrics);
}

tessera::Status Trainer::EndEpoch(int epoch) {
  EpochMetrics metrics;
  metrics.epoch = epoch;
  metrics.train_loss = progress_.epoch_loss_sum / static_cast<double>(std::max<int64_t>(progress_.step_in_epoch, 1));
  metrics.images_per_s = progress_.epoch_seconds > 0 ? progress_.epoch_images / progress_.epoch_seconds : 0;
  metrics.seconds = progress_.epoch_seconds;
  const bool last = epoch + 1 == settings_.epochs;
  if (!settings_.synthetic && settings_.val_every > 0 && ((epoch + 1) % settings_.val_every == 0 || last)) {
    TESSERA_RETURN_IF_ERROR(Validate(&metrics).Annotate("validation after epoch " + std::to_string(epoch + 1)));
  }
  metrics.skipped_total = progress_.skipped_total;
  progress_.epoch = epoch + 1;
  progress_.step_in_epoch = 0;
  progress_.epoch_position = 0;
  progress_.epoch_span = 0;
  progress_.epoch_loss_sum = 0;
  progress_.epoch_images = 0;
  progress_.epoch_seconds = 0;
  // The row first: a checkpoint that fails (a lost rank, --elastic) steps back into the
  // epoch at most, and the reopened log then drops the row.
  if (leader()) {
    log_.AddEpoch(metrics);
    display_->EndEpoch(metrics);
    PrintStraggler(epoch);
    if (settings_.plot) {
      tessera::Status plotted = log_.Plot();
      if (!plotted.ok()) std::fprintf(stderr, "train_resnet: no plot: %s\n", plotted.message().c_str());
    }
  }
  return SaveState();
}

tessera::Status Trainer::TrainStep(const StepInput& input, int epoch, int64_t global_batch, StepMetrics* m) {
  m->epoch = epoch;
  m->global_batch = global_batch;
  m->world = comms_.world;
  m->lr = settings_.lr.At(epoch + static_cast<double>(progress_.epoch_position) / progress_.epoch_span, global_batch);

  // 1. One model everywhere (rank 0's BN statistics) and the global image count.
  double start = Now();
  if (comms_.world > 1 && settings_.batch_norm) TESSERA_RETURN_IF_ERROR(BroadcastBuffers(*model_, comms_.main));
  std::vector<double> counts = {static_cast<double>(input.count), static_cast<double>(input.skipped), input.id_sum,
                                input.id_sq_sum};
  TESSERA_RETURN_IF_ERROR(AllReduceSum(&counts, comms_.main));
  const double global_images = counts[0];
  m->image_id_sum = counts[2];
  m->image_id_sq_sum = counts[3];

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
    local_loss_sum += ForwardBackward(input.images.narrow(0, first, n), input.labels.narrow(0, first, n),
                                      scale / global_images);
  }
  m->compute_s = Now() - start;

  // 4. The step's loss (the ranks meet here), then the gradient to apply: this step's,
  // or with staleness 1 the previous step's.
  start = Now();
  std::vector<double> loss = {local_loss_sum};
  TESSERA_RETURN_IF_ERROR(AllReduceSum(&loss, comms_.main));
  double waited = 0;
  bool have_gradient = false;
  TESSERA_RETURN_IF_ERROR(buckets_->Finish(&waited, &m->comm_busy_s, &have_gradient));
  m->exposed_comm_s = Now() - start;

  // 5. The update.
  start = Now();
  if (settings_.staleness > 0) {
    ApplyGradient(have_gradient, progress_.pending_scale, static_cast<double>(progress_.pending_images), m);
    progress_.pending = true;
    progress_.pending_scale = scale;
    progress_.pending_images = static_cast<int64_t>(global_images);
  } else {
    ApplyGradient(have_gradient, scale, global_images, m);
  }
  m->update_s = Now() - start;
  m->loss_scale = scale;
  m->images = static_cast<int64_t>(global_images);
  m->loss = global_images > 0 ? loss[0] / global_images : 0;
  progress_.skipped_total += static_cast<int64_t>(counts[1]);
  return tessera::Status::Ok();
}

// Forward under autocast and backward of (sum of the label-smoothed losses) x factor;
// returns the sum.
double Trainer::ForwardBackward(const torch::Tensor& images_in, const torch::Tensor& labels_in, double factor) {
  torch::Tensor images = images_in.to(device_, /*non_blocking=*/true);
  torch::Tensor labels = labels_in.to(device_, /*non_blocking=*/true);
  torch::Tensor logits;
  {
    AutocastScope autocast(settings_, device_.is_cuda());
    logits = model_->forward(images);
  }
  torch::Tensor loss_sum = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat32), labels,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(settings_.label_smoothing));
  (loss_sum * factor).backward();
  return loss_sum.item<double>();
}

// Applies the reduced gradient in .grad, computed with loss scale `scale` over `images`
// images; with loss scaling, unscales it and skips the update on inf/NaN (all ranks see
// the same reduced gradient, so they all decide alike).
void Trainer::ApplyGradient(bool have_gradient, double scale, double images, StepMetrics* m) {
  bool apply = have_gradient && images > 0;
  if (have_gradient && settings_.loss_scaling) {
    const bool nonfinite = UnscaleGradients(scale);
    apply = scaler_.Update(nonfinite) && apply;
    progress_.loss_scale = scaler_.scale();
    progress_.clean_steps = scaler_.clean_steps();
  }
  m->applied = apply;
  if (apply) optimizer_->Step(m->lr);
}

// Divides every gradient by `scale`; whether one held inf or NaN, read once. On a GPU one
// multi-tensor kernel does both (the one torch's GradScaler uses); a kernel or two per
// parameter cost 12-16 ms a step for ResNet-50's 161 (H100, against 3-5 ms for the
// whole fp32 update).
bool Trainer::UnscaleGradients(double scale) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (torch::Tensor& parameter : model_->parameters()) {
    if (parameter.grad().defined()) grads.push_back(parameter.mutable_grad());
  }
  if (grads.empty()) return false;
  if (device_.is_cuda()) {
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
    torch::Tensor found = torch::zeros({1}, options);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, torch::full({1}, 1.0 / scale, options));
    return found.item<float>() != 0.0f;
  }
  torch::Tensor finite;  // torch 1.13 has the fused kernel for CUDA only
  for (torch::Tensor& grad : grads) {
    grad.mul_(1.0 / scale);
    torch::Tensor mine = torch::isfinite(grad).all();
    finite = finite.defined() ? finite.logical_and(mine) : mine;
  }
  return !finite.item<bool>();
}

tessera::Status Trainer::Validate(EpochMetrics* metrics) {
  const int64_t per_rank = settings_.val_batch > 0
                               ? settings_.val_batch
                               : std::max<int64_t>(1, GlobalBatch(progress_.epoch) / comms_.world);
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
  if (!leader()) return tessera::Status::Ok();
  torch::Tensor pending;
  if (progress_.pending) {  // the gradient in flight is saved reduced
    TESSERA_RETURN_IF_ERROR(buckets_->WaitPending().Annotate("the allreduce of the gradient to checkpoint"));
    pending = buckets_->PendingGradients();
  }
  progress_.world = comms_.world;
  progress_.settings = DescribeSettings(settings_);
  return SaveCheckpoint(CheckpointPath(settings_), *model_, optimizer_->momentum_buffers(), pending, progress_);
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

void Trainer::PrintStraggler(int epoch) const {
  if (comms_.world < 2) return;
  // A rank late to a step is waited on in the step's first collective: on `main` (the
  // buffers' broadcast, the statistics) or on `gradients` (the first bucket).
  double stalled = 0;
  for (tesseraComm_t comm : {comms_.main, comms_.gradients}) {
    tesseraHealth_t h = TESSERA_HEALTH_INITIALIZER;
    if (comm == nullptr || tesseraCommGetHealth(comm, &h, nullptr, 0) != tesseraSuccess) continue;
    if (h.straggler >= 0) {
      std::fprintf(stderr, "train_resnet: epoch %d: straggler: %s\n", epoch + 1, h.verdict);
      return;
    }
    stalled += h.stalledSeconds;
  }
  std::fprintf(stderr, "train_resnet: epoch %d: no straggler (rank %d stalled %.1f s waiting on peers)\n", epoch + 1,
               comms_.rank, stalled);
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
