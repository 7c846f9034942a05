// CudaDeviceEngine: the DeviceEngine (device/device_engine.h) of the CUDA
// build, for device-resident collectives over the cuda_ipc transport.
//  - Export: cudaMalloc'd slots, described by the 96-byte CUDA IPC record of
//    cuda/ipc_handles.h; Map: cudaIpcOpenMemHandle of a peer's record.
//  - Streams: non-blocking CUDA streams; Copy is cudaMemcpyAsync (cudaMemcpyDefault, so
//    a peer's mapped memory is reached directly), Reduce/Scale/Divide are the kernels of
//    cuda/reduce_kernels.h; Record/Done are pooled CUDA events and cudaEventQuery.
//  - IsDeviceMemory: cudaMalloc'd memory of the engine's device (not managed memory).
//  - Allocate: scratch from a pool that only grows; blocks are freed with the engine.
//    cudaFree waits for the whole device, and a staged call's stream waits (on the GPU)
//    for the call that would free its scratch: freeing during a call deadlocks.
// Every call runs with the engine's device current (cuda::DeviceGuard) and never
// changes the caller's. Compiled in every build; never run here (no GPU): the host
// engine (host_device_engine.h) runs the same protocol in the tests.
#ifndef TESSERA_CUDA_CUDA_DEVICE_ENGINE_H_
#define TESSERA_CUDA_CUDA_DEVICE_ENGINE_H_

#include <memory>

#include "device/device_engine.h"

namespace tessera {
namespace cuda {

struct ScratchPool;  // cuda_device_engine.cc

class CudaDeviceEngine : public DeviceEngine {
 public:
  // An engine for `device`, its kernels loaded (LoadKernels). kCudaError without usable
  // CUDA (cuda/availability.h).
  static Status Create(int device, std::unique_ptr<CudaDeviceEngine>* out);

  const char* name() const override { return "cuda"; }
  int device() const { return device_; }
  Status Export(size_t bytes, std::unique_ptr<ExportedMemory>* out) override;
  Status Map(const std::string& record, int peer_pid, std::unique_ptr<MappedMemory>* out) override;
  Status Allocate(size_t bytes, std::shared_ptr<void>* out) override;
  Status CreateStream(std::unique_ptr<DeviceStream>* out) override;
  bool IsDeviceMemory(const void* p, size_t bytes) const override;
  // cudaDeviceFlushGPUDirectRDMAWrites (to the owner), unless the device orders remote
  // writes itself (cudaDevAttrGPUDirectRDMAWritesOrdering) or cannot flush them.
  Status FlushRemoteWrites() override;

 private:
  explicit CudaDeviceEngine(int device);
  const int device_;
  std::shared_ptr<ScratchPool> scratch_;  // shared with the blocks handed out
  int flush_ = -1;  // -1: not asked yet; 0: nothing to do; 1: flush
};

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_CUDA_DEVICE_ENGINE_H_
