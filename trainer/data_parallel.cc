// Broadcast of the initial model and bucketed, overlapped gradient allreduce
// (see data_parallel.h).
#include "trainer/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

tessera::Status TesseraType(torch::ScalarType type, tesseraDataType_t* out) {
  switch (type) {
    case torch::kFloat32: *out = tesseraFloat32; return tessera::Status::Ok();
    case torch::kFloat64: *out = tesseraFloat64; return tessera::Status::Ok();
    case torch::kBFloat16: *out = tesseraBfloat16; return tessera::Status::Ok();
    case torch::kFloat16: *out = tesseraFloat16; return tessera::Status::Ok();
    case torch::kInt64: *out = tesseraInt64; return tessera::Status::Ok();
    case torch::kInt32: *out = tesseraInt32; return tessera::Status::Ok();
    default: return tessera::InvalidArgument(std::string("no tessera type for ") + c10::toString(type));
  }
}

}  // namespace

tessera::Status BroadcastTensors(const std::vector<torch::Tensor>& tensors, tesseraComm_t comm, int root) {
  std::map<torch::ScalarType, std::vector<torch::Tensor>> by_type;
  for (const torch::Tensor& tensor : tensors) by_type[tensor.scalar_type()].push_back(tensor);
  torch::NoGradGuard no_grad;
  for (auto& entry : by_type) {
    std::vector<torch::Tensor> flat_parts;
    for (const torch::Tensor& tensor : entry.second) flat_parts.push_back(tensor.detach().to(torch::kCPU).reshape(-1));
    torch::Tensor flat = torch::cat(flat_parts).contiguous();
    tesseraDataType_t type = tesseraFloat32;
    TESSERA_RETURN_IF_ERROR(TesseraType(entry.first, &type));
    TESSERA_RETURN_IF_ERROR(TesseraCall(
        tesseraBroadcast(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(flat.numel()), type, root, comm, nullptr),
        comm, "tesseraBroadcast of the model state"));
    int64_t offset = 0;
    for (torch::Tensor tensor : entry.second) {
      tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
  return tessera::Status::Ok();
}

tessera::Status TesseraCall(tesseraResult_t result, tesseraComm_t comm, const char* operation) {
  if (result == tesseraSuccess) return tessera::Status::Ok();
  return tessera::Status(static_cast<tessera::Code>(result), std::string(operation) + " failed (" +
                                                                 tesseraGetErrorString(result) +
                                                                 "): " + tesseraGetLastError(comm));
}

tessera::Status BroadcastModuleState(torch::nn::Module& module, tesseraComm_t comm, int root) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (const torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  return BroadcastTensors(tensors, comm, root);
}

tessera::Status BroadcastBuffers(torch::nn::Module& module, tesseraComm_t comm, int root) {
  return BroadcastTensors(module.buffers(), comm, root);
}

tessera::Status AllReduceSum(std::vector<double>* values, tesseraComm_t comm) {
  return TesseraCall(tesseraAllReduce(values->data(), values->data(), values->size(), tesseraFloat64, tesseraSum,
                                      comm, nullptr),
                     comm, "tesseraAllReduce of step statistics");
}

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, double bucket_bytes, WireType wire,
                                 int staleness, tesseraComm_t comm)
    : parameters_(std::move(parameters)), wire_(wire), staleness_(staleness), comm_(comm) {
  location_.resize(parameters_.size());
  // Boundaries are planned from the input side: the bucket that holds the first layers
  // is sent last, when backward has nothing left to hide it behind, so it is kept small
  // (kTailBucketBytes); the others hold about bucket_bytes each, and the output-side one
  // takes the remainder (it is sent first, overlapping the rest of backward).
  const double kTailBucketBytes = 1024.0 * 1024.0;
  std::vector<std::vector<int>> groups(1);
  double group_bytes = 0, limit = std::min(bucket_bytes, kTailBucketBytes);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    double bytes = static_cast<double>(parameters_[i].numel()) * sizeof(float);
    if (!groups.back().empty() && group_bytes + bytes > limit) {
      groups.emplace_back();
      group_bytes = 0;
      limit = bucket_bytes;
    }
    groups.back().push_back(static_cast<int>(i));
    group_bytes += bytes;
  }
  // Launch order: output side first; inside a bucket, parameters in reverse order.
  for (auto group = groups.rbegin(); group != groups.rend(); ++group) {
    BucketPlan bucket;
    for (auto parameter = group->rbegin(); parameter != group->rend(); ++parameter) {
      location_[*parameter] = {static_cast<int>(plan_.size()), static_cast<int>(bucket.parameters.size())};
      bucket.parameters.push_back(*parameter);
      bucket.offsets.push_back(bucket.elements);
      bucket.elements += parameters_[*parameter].numel();
    }
    plan_.push_back(std::move(bucket));
  }
  for (int set = 0; set < (staleness_ > 0 ? 2 : 1); ++set) {
    for (const BucketPlan& bucket : plan_) sets_[set].flat.push_back(torch::zeros({bucket.elements}, torch::kFloat32));
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    int index = static_cast<int>(i);
    hook_ids_.push_back(parameters_[i].register_hook([this, index](torch::Tensor gradient) {
      OnGradient(index, gradient);
    }));
  }
  thread_ = std::thread([this] { CommunicationLoop(); });
  Begin();
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].remove_hook(hook_ids_[i]);
}

void GradientBuckets::Begin(int micro_batches) {
  for (torch::Tensor& parameter : parameters_) parameter.mutable_grad().reset();
  std::lock_guard<std::mutex> lock(mutex_);
  micro_batches_ = std::max(1, micro_batches);
  micro_batch_ = 0;
  StepBuffers& set = sets_[current_];
  set.missing.clear();
  for (const BucketPlan& bucket : plan_) set.missing.push_back(static_cast<int>(bucket.parameters.size()));
  // Gradients that never arrive count as zero.
  set.earlier.resize(plan_.size());
  for (size_t b = 0; b < plan_.size(); ++b) {
    set.earlier[b].resize(static_cast<size_t>(micro_batches_ - 1));
    for (torch::Tensor& part : set.earlier[b]) part = torch::zeros({plan_[b].elements}, torch::kFloat32);
  }
  set.arrived.assign(parameters_.size(), false);
  set.launched = 0;
  set.done = 0;
  set.error = tessera::Status::Ok();
  launched_during_backward_ = 0;
}

void GradientBuckets::BeginMicroBatch(int index) {
  for (torch::Tensor& parameter : parameters_) parameter.mutable_grad().reset();
  std::lock_guard<std::mutex> lock(mutex_);
  micro_batch_ = index;
}

void GradientBuckets::OnGradient(int parameter, const torch::Tensor& gradient) {
  auto [b, slot] = location_[parameter];
  bool again = true;
  torch::Tensor flat;
  int set;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    set = current_;
    if (micro_batch_ < micro_batches_ - 1) {
      // An earlier micro-batch's gradient: kept apart (added to zeros), nothing sent.
      flat = sets_[set].earlier[b][static_cast<size_t>(micro_batch_)];
    } else if (b < sets_[set].launched) {
      if (error_.ok()) {
        error_ = tessera::InternalError("a second gradient of parameter " + std::to_string(parameter) +
                                        " arrived after its bucket was sent (one backward per step)");
      }
      return;
    } else {
      again = sets_[set].arrived[parameter];
      flat = sets_[set].flat[b];
    }
  }
  // The bucket is not launched, so the communication thread does not touch it: copy
  // without holding the lock.
  torch::NoGradGuard no_grad;
  torch::Tensor slice = flat.narrow(0, plan_[b].offsets[slot], parameters_[parameter].numel());
  torch::Tensor flat_gradient = gradient.detach().reshape(-1).to(torch::kCPU, torch::kFloat32);
  if (again) {
    slice.add_(flat_gradient);
    return;
  }
  slice.copy_(flat_gradient);
  std::lock_guard<std::mutex> lock(mutex_);
  sets_[set].arrived[parameter] = true;
  if (--sets_[set].missing[b] == 0) LaunchReadyLocked(set);
}

void GradientBuckets::LaunchReadyLocked(int set) {
  StepBuffers& buffers = sets_[set];
  bool queued = false;
  while (buffers.launched < bucket_count() && buffers.missing[buffers.launched] == 0) {
    queue_.emplace_back(set, buffers.launched++);
    queued = true;
  }
  if (queued) work_.notify_one();
}

void GradientBuckets::LaunchAllLocked(int set) {
  StepBuffers& buffers = sets_[set];
  // Gradients that never arrived (no image on this rank, unused parameters) are zero.
  for (int b = buffers.launched; b < bucket_count(); ++b) {
    const BucketPlan& bucket = plan_[b];
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      int parameter = bucket.parameters[slot];
      if (buffers.arrived[parameter]) continue;
      buffers.flat[b].narrow(0, bucket.offsets[slot], parameters_[parameter].numel()).zero_();
      buffers.arrived[parameter] = true;
    }
    buffers.missing[b] = 0;
  }
  LaunchReadyLocked(set);
}

// Each allreduce is bounded by TESSERA_TIMEOUT_MS, so this wait is bounded too.
tessera::Status GradientBuckets::WaitDoneLocked(std::unique_lock<std::mutex>& lock, int set) {
  finished_.wait(lock, [this, set] { return sets_[set].done == bucket_count(); });
  return sets_[set].error;
}

void GradientBuckets::PointGradientsAt(int set) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto [b, slot] = location_[i];
    torch::Tensor reduced = sets_[set].flat[b].narrow(0, plan_[b].offsets[slot], parameters_[i].numel());
    reduced = reduced.view(parameters_[i].sizes());
    parameters_[i].mutable_grad() = parameters_[i].is_cuda() ? reduced.to(parameters_[i].device()) : reduced;
  }
}

tessera::Status GradientBuckets::Finish(double* exposed_s, double* busy_s, bool* have_gradient) {
  const double start = Now();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!error_.ok()) return error_;
  launched_during_backward_ = sets_[current_].launched;
  LaunchAllLocked(current_);
  const int apply = staleness_ == 0 ? current_ : pending_;
  tessera::Status status = apply >= 0 ? WaitDoneLocked(lock, apply) : tessera::Status::Ok();
  *exposed_s = Now() - start;
  *busy_s = busy_s_;
  busy_s_ = 0;
  if (!status.ok()) return status;
  if (staleness_ > 0) {
    pending_ = current_;
    current_ ^= 1;
  }
  lock.unlock();
  *have_gradient = apply >= 0;
  if (apply >= 0) PointGradientsAt(apply);
  return tessera::Status::Ok();
}

tessera::Status GradientBuckets::WaitPending() {
  std::unique_lock<std::mutex> lock(mutex_);
  return pending_ >= 0 ? WaitDoneLocked(lock, pending_) : tessera::Status::Ok();
}

torch::Tensor GradientBuckets::PendingGradients() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_ >= 0 ? torch::cat(sets_[pending_].flat) : torch::Tensor();
}

void GradientBuckets::SetPendingGradients(const torch::Tensor& flat) {
  if (staleness_ == 0) return;  // nothing is ever pending
  std::lock_guard<std::mutex> lock(mutex_);
  if (!flat.defined()) {
    pending_ = -1;
    return;
  }
  pending_ = current_ ^ 1;
  StepBuffers& set = sets_[pending_];
  int64_t offset = 0;
  for (int b = 0; b < bucket_count(); ++b) {
    set.flat[b].copy_(flat.narrow(0, offset, plan_[b].elements));
    offset += plan_[b].elements;
  }
  set.missing.assign(plan_.size(), 0);
  set.arrived.assign(parameters_.size(), true);
  set.launched = set.done = bucket_count();
  set.error = tessera::Status::Ok();
}

bool GradientBuckets::Abandon() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (error_.ok()) error_ = tessera::RemoteError("abandoned after a failure");
  // Buckets still queued are given up without a call; the allreduce in progress ends
  // at once on the revoked communicator (or completes).
  finished_.wait(lock, [this] { return queue_.empty() && !reducing_; });
  const bool kept = pending_ >= 0 && sets_[pending_].done == bucket_count() && sets_[pending_].error.ok();
  if (!kept) pending_ = -1;
  return kept;
}

void GradientBuckets::CommunicationLoop() {
  while (true) {
    std::pair<int, int> item;
    tessera::Status failed_before;
    torch::Tensor flat;
    std::vector<torch::Tensor> earlier;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      item = queue_.front();
      queue_.pop_front();
      failed_before = error_;
      flat = sets_[item.first].flat[item.second];
      if (!sets_[item.first].earlier.empty()) earlier = sets_[item.first].earlier[item.second];
      reducing_ = true;
    }
    // After a failure the remaining buckets are only marked done: their step has failed.
    const double start = Now();
    tessera::Status status = failed_before.ok() ? Reduce(flat, earlier) : failed_before;
    const double busy = Now() - start;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!status.ok()) {
        if (error_.ok()) error_ = status.Annotate("gradient bucket " + std::to_string(item.second));
        if (sets_[item.first].error.ok()) sets_[item.first].error = error_;
      }
      ++sets_[item.first].done;
      busy_s_ += busy;
      reducing_ = false;
    }
    finished_.notify_all();
  }
}

tessera::Status GradientBuckets::Reduce(const torch::Tensor& flat, const std::vector<torch::Tensor>& earlier) {
  torch::NoGradGuard no_grad;
  if (comm_ == nullptr) {  // one process: only the micro-batches to add
    for (const torch::Tensor& part : earlier) flat.add_(part);
    return tessera::Status::Ok();
  }
  const size_t count = static_cast<size_t>(flat.numel());
  const bool bf16 = wire_ == WireType::kBfloat16;
  const torch::ScalarType type = wire_ == WireType::kFloat32 ? torch::kFloat32 : bf16 ? torch::kBFloat16 : torch::kFloat16;
  std::vector<torch::Tensor> parts = {flat.to(type)};  // flat itself for float32
  for (const torch::Tensor& part : earlier) parts.push_back(part.to(type));
  std::vector<const void*> pointers;
  for (const torch::Tensor& part : parts) pointers.push_back(part.data_ptr());
  const tesseraDataType_t tessera_type =
      wire_ == WireType::kFloat32 ? tesseraFloat32 : bf16 ? tesseraBfloat16 : tesseraFloat16;
  void* result = parts[0].data_ptr();
  const tesseraResult_t r =
      parts.size() == 1
          ? tesseraAllReduce(result, result, count, tessera_type, tesseraSum, comm_, nullptr)
          : tesseraAllReduceParts(pointers.data(), static_cast<int>(pointers.size()), result, count, tessera_type,
                                  tesseraSum, comm_, nullptr);
  TESSERA_RETURN_IF_ERROR(TesseraCall(r, comm_, "allreduce of a gradient bucket"));
  if (wire_ != WireType::kFloat32) flat.copy_(parts[0]);
  return tessera::Status::Ok();
}

}  // namespace trainer
