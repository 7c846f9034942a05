// Whether CUDA can be used in this process, and CUDA errors as Status. Every CUDA path
// of tessera asks CudaUsable() first, so a process without a driver (libcuda.so.1
// absent, as on the build machines) or without a device gets a clean kCudaError answer
// instead of a crash, and no CUDA call is made on its behalf beyond the first probe.
#ifndef TESSERA_CUDA_AVAILABILITY_H_
#define TESSERA_CUDA_AVAILABILITY_H_

#include <string>

#include "base/status.h"

namespace tessera {
namespace cuda {

// OK when the CUDA runtime finds a driver and at least one device; otherwise a
// Code::kCudaError status saying why, e.g. "no usable CUDA: cudaGetDeviceCount:
// cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime
// version". Probed once per process, on the first call; thread-safe; never blocks
// longer than the driver's own initialisation.
Status CudaUsable();

// "" when a GPU is usable, else why not: tests skip their GPU-only parts with
// GTEST_SKIP() << "skipped: no GPU (" << NoGpuReason() << ")" (cuda/gpu_test.h).
std::string NoGpuReason();

// OK for cudaSuccess (0); else Code::kCudaError "<what>: <error name>: <error string>".
// Clears the calling thread's last CUDA error, so it does not resurface later.
Status CudaCall(int cuda_error, const std::string& what);

// A CUDA driver API function (e.g. "cuStreamWaitValue32") for the given API version
// (e.g. 12000), reached through the runtime, so tessera never links libcuda itself.
// Null with *why set when CUDA is unusable or the driver lacks the function.
void* DriverFunction(const char* name, unsigned int cuda_version, std::string* why);

// Makes `device` current on the calling thread for the guard's lifetime, then restores
// the previous device, so tessera never changes the caller's current device. status()
// says whether switching worked.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_AVAILABILITY_H_
