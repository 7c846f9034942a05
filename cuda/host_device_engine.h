// HostDeviceEngine: a DeviceEngine (device/device_engine.h) whose "device"
// is this host, so that the cuda_ipc link protocol and the device-resident collectives
// run in CI across real processes on a machine without a GPU.
//
// What it stands in for, one for one:
//  - device memory (cudaMalloc)          -> host memory it allocated (Allocate), tracked;
//  - exported slots (cudaIpcGetMemHandle) -> a POSIX shared-memory object; the record is
//    its name and size;
//  - mapping (cudaIpcOpenMemHandle)      -> mmap of that object in the peer process;
//  - streams and kernels                  -> a queue of host copies and host reducers
//    (elementwise/) that runs when an event is queried;
//  - events (cudaEventRecord/Query)       -> tickets; Options::polls_before_done makes
//    each one answer "not done" that many times first, as a busy GPU would.
// Like the GPU, it refuses memory it does not know: every pointer a stream is handed
// must lie in this engine's allocations or mappings, so an algorithm that slips a host
// buffer (a std::vector, a host memcpy target) into a device-resident call fails the
// tests here instead of crashing on a GPU. A reducer without its type (Reducer::typed)
// is refused too, as the CUDA engine must pick a kernel from it.
//
// What it cannot stand in for: CUDA's own errors, peer access between devices, and the
// timing of real copies and kernels. Those are compiled, never run (docs/cuda.md).
#ifndef TESSERA_CUDA_HOST_DEVICE_ENGINE_H_
#define TESSERA_CUDA_HOST_DEVICE_ENGINE_H_

#include <memory>
#include <string>

#include "device/device_engine.h"

namespace tessera {

class HostDeviceEngine : public DeviceEngine {
 public:
  struct Options {
    int polls_before_done = 0;  // Done answers false this many times per ticket first
  };
  explicit HostDeviceEngine(const Options& options);
  ~HostDeviceEngine() override;

  const char* name() const override { return "host"; }
  Status Export(size_t bytes, std::unique_ptr<ExportedMemory>* out) override;
  Status Map(const std::string& record, int peer_pid, std::unique_ptr<MappedMemory>* out) override;
  Status Allocate(size_t bytes, std::shared_ptr<void>* out) override;
  Status CreateStream(std::unique_ptr<DeviceStream>* out) override;
  bool IsDeviceMemory(const void* p, size_t bytes) const override;

  struct Ranges;  // the memory it knows (defined in the .cc)

 private:
  Options options_;
  std::shared_ptr<Ranges> ranges_;  // shared with streams and allocations
};

}  // namespace tessera

#endif  // TESSERA_CUDA_HOST_DEVICE_ENGINE_H_
