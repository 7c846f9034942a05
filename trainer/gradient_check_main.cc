// gradient_check: the data-parallel gradient equals the single-process one.
//
// Run under `mpirun -np 2` (gradient_allreduce_test.sh). Every rank builds the same
// batch-norm-free ResNet (blocks 1,1,1,1, width 8) and the same 2B images. Reference:
// the gradient of the mean loss over all the images, computed by this process alone.
// Data parallel: rank r takes its share of the images, GradientBuckets allreduces the
// gradients over tessera during backward, each rank's loss being scaled by 1 / (images of
// the step). The two must agree within the tolerance of each case:
//
//   float32 on the wire         max |dp - ref| <= 1e-5 * max |ref|  (summation order only)
//   bfloat16 on the wire        ||dp - ref|| <= 8e-3 * ||ref||   (2 roundings of 2^-9)
//   float16 on the wire         ||dp - ref|| <= 1e-3 * ||ref||   (2 roundings of 2^-12)
//
// Cases also cover many small buckets (some must be sent while backward still runs),
// unequal shares (B and B-3 images, as when a rank skipped corrupt files) and a rank
// with no image at all. Every rank must end with bit-identical gradients. First of all,
// ranks that initialise their models differently must hold rank 0's parameters and
// batch-norm buffers, bit for bit, after BroadcastModuleState.
//
// Staleness 1 (double buffering): 6 SGD-momentum steps, each on new images. The
// data-parallel model must follow the reference that applies, at step t, the
// single-process gradient of step t-1 (computed at its own weights of step t-1), and
// none at step 1: bit for bit in a single process, within 1e-5 of the weights' total
// movement on 2 ranks (summation order); and it must be far (over 100 times that) from
// the reference that applies step t's own gradient. Half-way, the pending gradient is
// taken out (PendingGradients), the buckets rebuilt and the gradient put back
// (SetPendingGradients), as a resume or a shrink does.
//
// Abandon (what a survivor does after a lost rank, --elastic): a pending gradient whose
// allreduce finished is kept; one whose allreduce cannot finish (rank 1 never joins it)
// is dropped once rank 0 revokes the communicator, promptly. Runs last: it revokes the
// gradient communicator.
// Prints one line per case and rank; exits 1 if any check fails.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"
#include "trainer/data_parallel.h"
#include "trainer/optimizer.h"
#include "trainer/resnet.h"

namespace {

using trainer::WireType;

struct Case {
  const char* name;
  double bucket_bytes;
  WireType wire;
  int short_by;  // images fewer on the last rank
  bool need_overlap;
};

constexpr int kPerRank = 4;  // B
constexpr int kSize = 32;
constexpr int kClasses = 10;

trainer::ResNet MakeModel() {
  trainer::ResNetOptions options;
  options.blocks = {1, 1, 1, 1};
  options.width = 8;
  options.num_classes = kClasses;
  options.batch_norm = false;
  torch::manual_seed(1);
  return trainer::ResNet(options);
}

std::vector<torch::Tensor> Gradients(trainer::ResNet& model) {
  std::vector<torch::Tensor> gradients;
  for (const torch::Tensor& parameter : model->parameters()) gradients.push_back(parameter.grad().clone());
  return gradients;
}

torch::Tensor Flat(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& tensor : tensors) parts.push_back(tensor.reshape(-1).to(torch::kFloat64));
  return torch::cat(parts);
}

// Whether `values` holds the same bits on every rank of comm (a hash compared by max/min).
bool SameOnEveryRank(const torch::Tensor& values, tesseraComm_t comm) {
  torch::Tensor bits = values.to(torch::kFloat32).contiguous();
  const int32_t* words = static_cast<const int32_t*>(bits.data_ptr());
  uint64_t hash = 0;
  for (int64_t i = 0; i < bits.numel(); ++i) hash = hash * 31 + static_cast<uint32_t>(words[i]);
  int64_t checksum[2] = {static_cast<int64_t>(hash >> 1), -static_cast<int64_t>(hash >> 1)};
  if (tesseraAllReduce(checksum, checksum, 2, tesseraInt64, tesseraMax, comm, nullptr) != tesseraSuccess) return false;
  return checksum[0] == -checksum[1];
}

// Ranks start from identical weights: each rank initialises a ResNet with batch norm from
// its own seed, BroadcastModuleState makes every parameter and buffer rank 0's.
bool CheckIdenticalStart(int rank, int world, tesseraComm_t comm) {
  trainer::ResNetOptions options;
  options.blocks = {1, 1, 1, 1};
  options.width = 8;
  options.num_classes = kClasses;
  torch::manual_seed(100 + rank);
  trainer::ResNet model(options);
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor buffer : model->buffers()) {
      if (buffer.is_floating_point()) buffer.uniform_(0.5, 1.5);  // running statistics differ too
    }
  }
  std::vector<torch::Tensor> state = model->parameters();
  for (const torch::Tensor& buffer : model->buffers()) state.push_back(buffer);
  const torch::Tensor before = Flat(state);
  const bool same_before = SameOnEveryRank(before, comm);
  tessera::Status status = trainer::BroadcastModuleState(*model, comm);
  const torch::Tensor after = Flat(state);
  const bool same_after = status.ok() && SameOnEveryRank(after, comm);
  const bool rank0_kept = rank != 0 || before.equal(after);
  const bool ok = status.ok() && same_after && rank0_kept && (world == 1 || !same_before);
  std::printf("rank %d case identical start: %zu tensors %s before the broadcast, %s after%s: %s\n", rank,
              state.size(), same_before ? "identical" : "different", same_after ? "identical" : "DIFFERENT",
              status.ok() ? "" : (" (" + status.message() + ")").c_str(), ok ? "OK" : "FAIL");
  return ok;
}

// One SGD-momentum step of `model` on `images` (all ranks' images of the step): the
// single-process gradient, applied at once (stale = false) or one step late.
struct ReferenceRun {
  trainer::ResNet model = MakeModel();
  trainer::MomentumOptimizer optimizer{model->parameters(), trainer::OptimizerOptions()};
  std::vector<torch::Tensor> held;  // the gradient waiting to be applied (stale)

  void Step(const torch::Tensor& images, const torch::Tensor& labels, bool stale, double lr) {
    model->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images), labels,
                                         torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
        .div(images.size(0))
        .backward();
    std::vector<torch::Tensor> fresh = Gradients(model);
    std::vector<torch::Tensor> apply = stale ? held : fresh;
    held = fresh;
    if (apply.empty()) return;
    std::vector<torch::Tensor> parameters = model->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].mutable_grad() = apply[i];
    optimizer.Step(lr);
  }
};

bool CheckStaleUpdates(int rank, int world, tesseraComm_t gradient_comm) {
  constexpr int kSteps = 6;
  constexpr double kLr = 0.1;
  ReferenceRun stale, fresh;
  trainer::ResNet model = MakeModel();
  trainer::MomentumOptimizer optimizer(model->parameters(), trainer::OptimizerOptions());
  auto buckets = std::make_unique<trainer::GradientBuckets>(model->parameters(), 64 * 1024, WireType::kFloat32,
                                                           /*staleness=*/1, gradient_comm);
  const torch::Tensor start = Flat(model->parameters());
  double error = 0, movement = 0, distance_to_fresh = 0;
  bool first_step_still = false, exact = true;
  tessera::Status status;
  for (int step = 1; step <= kSteps && status.ok(); ++step) {
    torch::manual_seed(10 + step);
    torch::Tensor images = torch::randn({kPerRank * world, 3, kSize, kSize});
    torch::Tensor labels = torch::randint(kClasses, {kPerRank * world}, torch::kInt64);
    stale.Step(images, labels, /*stale=*/true, kLr);
    fresh.Step(images, labels, /*stale=*/false, kLr);

    buckets->Begin();
    torch::nn::functional::cross_entropy(model->forward(images.narrow(0, rank * kPerRank, kPerRank)),
                                         labels.narrow(0, rank * kPerRank, kPerRank),
                                         torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
        .div(kPerRank * world)
        .backward();
    double exposed = 0, busy = 0;
    bool have_gradient = false;
    status = buckets->Finish(&exposed, &busy, &have_gradient);
    if (status.ok() && have_gradient) optimizer.Step(kLr);
    if (step == 1) first_step_still = !have_gradient && Flat(model->parameters()).equal(start);
    if (status.ok() && step == kSteps / 2) {  // through PendingGradients, as a resume does
      status = buckets->WaitPending();
      torch::Tensor pending = buckets->PendingGradients();
      buckets = std::make_unique<trainer::GradientBuckets>(model->parameters(), 64 * 1024, WireType::kFloat32, 1,
                                                           gradient_comm);
      buckets->SetPendingGradients(pending);
    }
    const torch::Tensor now = Flat(model->parameters()), expected = Flat(stale.model->parameters());
    exact = exact && now.equal(expected);
    error = std::max(error, (now - expected).abs().max().item<double>());
    movement = (expected - start).abs().max().item<double>();
    distance_to_fresh = (now - Flat(fresh.model->parameters())).abs().max().item<double>();
  }
  const double bound = world == 1 ? 0 : 1e-5 * movement;
  const bool ok = status.ok() && first_step_still && (world == 1 ? exact : error <= bound) &&
                  distance_to_fresh > 100 * 1e-5 * movement;
  std::printf("rank %d case staleness 1: step 1 %s; error against step t-1's gradient %.3g (bound %.3g, %s), "
              "distance to step t's %.3g, movement %.3g%s: %s\n",
              rank, first_step_still ? "applied nothing" : "CHANGED THE WEIGHTS", error, bound,
              exact ? "bit for bit" : "not bit for bit", distance_to_fresh, movement,
              status.ok() ? "" : (" (" + status.message() + ")").c_str(), ok ? "OK" : "FAIL");
  return ok;
}

// One backward of `model` on this rank's images into `buckets`, and Finish.
tessera::Status StaleStep(trainer::ResNet& model, trainer::GradientBuckets* buckets, int rank) {
  torch::manual_seed(50);
  torch::Tensor images = torch::randn({kPerRank * 2, 3, kSize, kSize});
  torch::Tensor labels = torch::randint(kClasses, {kPerRank * 2}, torch::kInt64);
  buckets->Begin();
  torch::nn::functional::cross_entropy(model->forward(images.narrow(0, rank * kPerRank, kPerRank)),
                                       labels.narrow(0, rank * kPerRank, kPerRank))
      .backward();
  double exposed = 0, busy = 0;
  bool have_gradient = false;
  return buckets->Finish(&exposed, &busy, &have_gradient);
}

bool CheckAbandon(int rank, int world, tesseraComm_t gradient_comm) {
  trainer::ResNet model = MakeModel();
  bool kept = false, dropped = true;
  double seconds = 0;
  tessera::Status status;
  {
    trainer::GradientBuckets buckets(model->parameters(), 64 * 1024, WireType::kFloat32, 1, gradient_comm);
    status = StaleStep(model, &buckets, rank);
    if (status.ok()) status = buckets.WaitPending();
    kept = status.ok() && buckets.Abandon() && buckets.has_pending() && buckets.PendingGradients().defined();
  }
  if (rank == 0 && world > 1 && status.ok()) {
    trainer::GradientBuckets buckets(model->parameters(), 64 * 1024, WireType::kFloat32, 1, gradient_comm);
    status = StaleStep(model, &buckets, rank);  // its allreduce waits for rank 1, which never comes
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    tesseraCommRevoke(gradient_comm, 0);
    dropped = !buckets.Abandon() && !buckets.has_pending();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const bool ok = status.ok() && kept && dropped && seconds < 2;
  std::printf("rank %d case abandon: a reduced pending gradient %s; one cut short %s%s (%.3f s): %s\n", rank,
              kept ? "kept" : "LOST", dropped ? "dropped" : "KEPT", world > 1 && rank == 0 ? "" : " (not tried)",
              seconds, ok ? "OK" : "FAIL");
  if (!status.ok()) std::printf("rank %d case abandon: %s\n", rank, status.message().c_str());
  return ok;
}

}  // namespace

int main() {
  torch::set_num_threads(1);
  tesseraComm_t main_comm = nullptr, gradient_comm = nullptr;
  if (tesseraCommInitFromEnv(&main_comm) != tesseraSuccess) {
    std::fprintf(stderr, "gradient_check: tesseraCommInitFromEnv failed: %s\n", tesseraGetLastError(nullptr));
    return 1;
  }
  int rank = 0, world = 1;
  tesseraCommUserRank(main_comm, &rank);
  tesseraCommCount(main_comm, &world);
  if (tesseraCommSplit(main_comm, 0, rank, &gradient_comm, nullptr) != tesseraSuccess) {
    std::fprintf(stderr, "gradient_check: tesseraCommSplit failed: %s\n", tesseraGetLastError(main_comm));
    return 1;
  }

  const std::vector<Case> cases = {
      {"float32, one bucket", 1e12, WireType::kFloat32, 0, false},
      {"float32, 64 KiB buckets", 64 * 1024, WireType::kFloat32, 0, true},
      {"float32, unequal shares", 64 * 1024, WireType::kFloat32, 3, true},
      {"float32, a rank without images", 64 * 1024, WireType::kFloat32, kPerRank, false},
      {"bfloat16 wire", 64 * 1024, WireType::kBfloat16, 0, true},
      {"float16 wire", 64 * 1024, WireType::kFloat16, 0, true},
  };
  int failures = CheckIdenticalStart(rank, world, main_comm) ? 0 : 1;
  for (const Case& c : cases) {
    // The images of every rank, known to all.
    torch::manual_seed(2);
    torch::Tensor images = torch::randn({kPerRank * world, 3, kSize, kSize});
    torch::Tensor labels = torch::randint(kClasses, {kPerRank * world}, torch::kInt64);
    const int last_count = world > 1 ? kPerRank - c.short_by : kPerRank;
    const int total = kPerRank * (world - 1) + last_count;
    const int my_count = rank == world - 1 ? last_count : kPerRank;

    // Reference: this process alone, the mean loss over all `total` images.
    trainer::ResNet model = MakeModel();
    auto loss_of = [&](int first, int count) {
      return torch::nn::functional::cross_entropy(
          model->forward(images.narrow(0, first, count)), labels.narrow(0, first, count),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    };
    (loss_of(0, total) / total).backward();
    torch::Tensor reference = Flat(Gradients(model));

    // Data parallel over tessera.
    tessera::Status status = trainer::BroadcastModuleState(*model, main_comm);
    int launched_early = 0, bucket_count = 0;
    torch::Tensor parallel;
    {
      trainer::GradientBuckets buckets(model->parameters(), c.bucket_bytes, c.wire, /*staleness=*/0, gradient_comm);
      bucket_count = buckets.bucket_count();
      buckets.Begin();
      if (my_count > 0) (loss_of(rank * kPerRank, my_count) / total).backward();
      double exposed = 0, busy = 0;
      bool have_gradient = false;
      if (status.ok()) status = buckets.Finish(&exposed, &busy, &have_gradient);
      launched_early = buckets.launched_during_backward();
      if (status.ok()) parallel = Flat(Gradients(model));
    }
    if (!status.ok()) {
      std::printf("rank %d case %s: FAIL: %s\n", rank, c.name, status.message().c_str());
      ++failures;
      continue;
    }

    double error = 0, bound = 0;
    if (c.wire == WireType::kFloat32) {
      error = (parallel - reference).abs().max().item<double>();
      bound = 1e-5 * reference.abs().max().item<double>();
    } else {
      error = (parallel - reference).norm().item<double>();
      bound = (c.wire == WireType::kBfloat16 ? 8e-3 : 1e-3) * reference.norm().item<double>();
    }
    // Bit-identical on every rank.
    const bool identical = SameOnEveryRank(parallel, main_comm);

    bool ok = error <= bound && identical && (!c.need_overlap || world == 1 || launched_early > 0);
    std::printf("rank %d case %s: error %.3g, bound %.3g, %d buckets, %d sent during backward, %s across ranks: %s\n",
                rank, c.name, error, bound, bucket_count, launched_early, identical ? "identical" : "DIFFERENT",
                ok ? "OK" : "FAIL");
    if (!ok) ++failures;
  }
  if (!CheckStaleUpdates(rank, world, gradient_comm)) ++failures;
  if (!CheckAbandon(rank, world, gradient_comm)) ++failures;
  tesseraCommDestroy(gradient_comm);
  tesseraCommDestroy(main_comm);
  std::printf("rank %d: %s\n", rank, failures == 0 ? "all cases OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}
