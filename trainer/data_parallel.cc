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

// Broadcasts `tensors` from rank 0 in place: one flat buffer per dtype.
tessera::Status BroadcastTensors(const std::vector<torch::Tensor>& tensors, tesseraComm_t comm) {
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
        tesseraBroadcast(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(flat.numel()), type, 0, comm, nullptr),
        comm, "tesseraBroadcast of the model state"));
    int64_t offset = 0;
    for (torch::Tensor tensor : entry.second) {
      tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
  return tessera::Status::Ok();
}

}  // namespace

tessera::Status TesseraCall(tesseraResult_t result, tesseraComm_t comm, const char* operation) {
  if (result == tesseraSuccess) return tessera::Status::Ok();
  return tessera::Status(static_cast<tessera::Code>(result), std::string(operation) + " failed (" +
                                                                 tesseraGetErrorString(result) +
                                                                 "): " + tesseraGetLastError(comm));
}

tessera::Status BroadcastModuleState(torch::nn::Module& module, tesseraComm_t comm) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (const torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  return BroadcastTensors(tensors, comm);
}

tessera::Status BroadcastBuffers(torch::nn::Module& module, tesseraComm_t comm) {
  return BroadcastTensors(module.buffers(), comm);
}

tessera::Status AllReduceSum(std::vector<double>* values, tesseraComm_t comm) {
  return TesseraCall(tesseraAllReduce(values->data(), values->data(), values->size(), tesseraFloat64, tesseraSum,
                                      comm, nullptr),
                     comm, "tesseraAllReduce of step statistics");
}

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, double bucket_bytes, WireType wire,
                                 tesseraComm_t comm)
    : parameters_(std::move(parameters)), wire_(wire), comm_(comm) {
  location_.resize(parameters_.size());
  arrived_.assign(parameters_.size(), false);
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
    Bucket bucket;
    int64_t elements = 0;
    for (auto parameter = group->rbegin(); parameter != group->rend(); ++parameter) {
      location_[*parameter] = {static_cast<int>(buckets_.size()), static_cast<int>(bucket.parameters.size())};
      bucket.parameters.push_back(*parameter);
      bucket.offsets.push_back(elements);
      elements += parameters_[*parameter].numel();
    }
    bucket.flat = torch::zeros({elements}, torch::kFloat32);
    buckets_.push_back(std::move(bucket));
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
  for (Bucket& bucket : buckets_) {
    // Gradients that never arrive count as zero.
    bucket.earlier.resize(static_cast<size_t>(micro_batches_ - 1));
    for (torch::Tensor& part : bucket.earlier) part = torch::zeros_like(bucket.flat);
    bucket.missing = static_cast<int>(bucket.parameters.size());
    bucket.launched = false;
    bucket.done = false;
  }
  arrived_.assign(parameters_.size(), false);
  next_launch_ = 0;
  done_count_ = 0;
  launched_during_backward_ = 0;
  busy_s_ = 0;
}

void GradientBuckets::BeginMicroBatch(int index) {
  for (torch::Tensor& parameter : parameters_) parameter.mutable_grad().reset();
  std::lock_guard<std::mutex> lock(mutex_);
  micro_batch_ = index;
}

void GradientBuckets::OnGradient(int parameter, const torch::Tensor& gradient) {
  auto [b, slot] = location_[parameter];
  Bucket& bucket = buckets_[b];
  if (micro_batch_ < micro_batches_ - 1) {  // an earlier micro-batch: kept apart, nothing sent
    torch::NoGradGuard no_grad;
    bucket.earlier[micro_batch_].narrow(0, bucket.offsets[slot], parameters_[parameter].numel())
        .add_(gradient.detach().reshape(-1).to(torch::kCPU, torch::kFloat32));
    return;
  }
  bool again;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bucket.launched) {
      if (error_.ok()) {
        error_ = tessera::InternalError("a second gradient of parameter " + std::to_string(parameter) +
                                        " arrived after its bucket was sent (one backward per step)");
      }
      return;
    }
    again = arrived_[parameter];
  }
  // The bucket is not launched, so the communication thread does not touch it: copy
  // without holding the lock.
  torch::NoGradGuard no_grad;
  torch::Tensor slice = bucket.flat.narrow(0, bucket.offsets[slot], parameters_[parameter].numel());
  torch::Tensor flat_gradient = gradient.detach().reshape(-1).to(torch::kCPU, torch::kFloat32);
  if (again) {
    slice.add_(flat_gradient);
    return;
  }
  slice.copy_(flat_gradient);
  std::lock_guard<std::mutex> lock(mutex_);
  arrived_[parameter] = true;
  if (--bucket.missing == 0) LaunchReadyLocked();
}

void GradientBuckets::LaunchReadyLocked() {
  bool queued = false;
  while (next_launch_ < static_cast<int>(buckets_.size()) && buckets_[next_launch_].missing == 0) {
    buckets_[next_launch_].launched = true;
    queue_.push_back(next_launch_++);
    queued = true;
  }
  if (queued) work_.notify_one();
}

tessera::Status GradientBuckets::Finish(double* exposed_s, double* busy_s) {
  const double start = Now();
  std::unique_lock<std::mutex> lock(mutex_);
  launched_during_backward_ = next_launch_;
  // Gradients that never arrived (no image on this rank, unused parameters) are zero.
  for (Bucket& bucket : buckets_) {
    if (bucket.launched) continue;
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      int parameter = bucket.parameters[slot];
      if (arrived_[parameter]) continue;
      bucket.flat.narrow(0, bucket.offsets[slot], parameters_[parameter].numel()).zero_();
      arrived_[parameter] = true;
    }
    bucket.missing = 0;
  }
  LaunchReadyLocked();
  // Each allreduce is bounded by TESSERA_TIMEOUT_MS, so this wait is bounded too.
  finished_.wait(lock, [this] { return done_count_ == static_cast<int>(buckets_.size()); });
  *exposed_s = Now() - start;
  *busy_s = busy_s_;
  if (!error_.ok()) return error_;
  lock.unlock();

  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto [b, slot] = location_[i];
    torch::Tensor reduced = buckets_[b].flat.narrow(0, buckets_[b].offsets[slot], parameters_[i].numel());
    reduced = reduced.view(parameters_[i].sizes());
    parameters_[i].mutable_grad() = parameters_[i].is_cuda() ? reduced.to(parameters_[i].device()) : reduced;
  }
  return tessera::Status::Ok();
}

void GradientBuckets::CommunicationLoop() {
  while (true) {
    int index;
    bool failed_before;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      index = queue_.front();
      queue_.pop_front();
      failed_before = !error_.ok();
    }
    // After a failure the remaining buckets are only marked done: the step has failed.
    const double start = Now();
    tessera::Status status = failed_before ? tessera::Status::Ok() : Reduce(&buckets_[index]);
    const double busy = Now() - start;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!status.ok() && error_.ok()) error_ = status.Annotate("gradient bucket " + std::to_string(index));
      buckets_[index].done = true;
      ++done_count_;
      busy_s_ += busy;
    }
    finished_.notify_all();
  }
}

// One allreduce per bucket, of its micro-batches as parts (the last one's in `flat`, which
// receives the result).
tessera::Status GradientBuckets::Reduce(Bucket* bucket) {
  torch::NoGradGuard no_grad;
  if (comm_ == nullptr) {  // one process: only the micro-batches to add
    for (const torch::Tensor& part : bucket->earlier) bucket->flat.add_(part);
    return tessera::Status::Ok();
  }
  const size_t count = static_cast<size_t>(bucket->flat.numel());
  const bool bf16 = wire_ == WireType::kBfloat16;
  const torch::ScalarType type = wire_ == WireType::kFloat32 ? torch::kFloat32 : bf16 ? torch::kBFloat16 : torch::kFloat16;
  std::vector<torch::Tensor> parts = {bucket->flat.to(type)};  // flat itself for float32
  for (const torch::Tensor& part : bucket->earlier) parts.push_back(part.to(type));
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
  if (wire_ != WireType::kFloat32) bucket->flat.copy_(parts[0]);
  return tessera::Status::Ok();
}

}  // namespace trainer
