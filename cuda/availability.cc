#include "cuda/availability.h"

#include <cuda_runtime_api.h>

namespace tessera {
namespace cuda {
namespace {

Status Probe() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) return CudaCall(e, "no usable CUDA: cudaGetDeviceCount");
  if (devices <= 0) return Status(Code::kCudaError, "no usable CUDA: the driver reports no device");
  return Status::Ok();
}

}  // namespace

Status CudaUsable() {
  static const Status usable = Probe();  // thread-safe initialisation, once
  return usable;
}

std::string NoGpuReason() {
  const Status s = CudaUsable();
  return s.ok() ? std::string() : s.message();
}

Status CudaCall(int cuda_error, const std::string& what) {
  if (cuda_error == 0) return Status::Ok();
  const cudaError_t e = static_cast<cudaError_t>(cuda_error);
  (void)cudaGetLastError();
  return Status(Code::kCudaError, what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void* DriverFunction(const char* name, unsigned int cuda_version, std::string* why) {
  const Status usable = CudaUsable();
  if (!usable.ok()) {
    *why = usable.message();
    return nullptr;
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, cuda_version, cudaEnableDefault, &found);
  if (e != cudaSuccess) {
    *why = CudaCall(e, std::string("cudaGetDriverEntryPointByVersion(") + name + ")").message();
    return nullptr;
  }
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    *why = std::string("the CUDA driver has no ") + name + " for API version " + std::to_string(cuda_version) +
           (found == cudaDriverEntryPointVersionNotSufficent ? " (driver too old)" : "");
    return nullptr;
  }
  return fn;
}

DeviceGuard::DeviceGuard(int device) {
  status_ = CudaCall(cudaGetDevice(&previous_), "cudaGetDevice");
  if (!status_.ok()) {
    previous_ = -1;
    return;
  }
  if (previous_ != device) status_ = CudaCall(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  (void)cudaGetLastError();
}

}  // namespace cuda
}  // namespace tessera
