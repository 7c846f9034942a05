// GPUDirect RDMA: registering CUDA device memory with the NIC, so that RDMA moves data
// straight between GPU memory and the network with no copy through host memory.
//
// Two ways, tried in this order:
// 1. dma-buf: the CUDA driver exports the allocation as a dma-buf file descriptor
//    (cuMemGetHandleForAddressRange, CUDA 11.7+ with the open kernel modules) and
//    ibv_reg_dmabuf_mr registers it (Linux 5.12+, rdma-core 34+). Needs no extra module.
// 2. peer memory: ibv_reg_mr on the device pointer itself, which works when the
//    nvidia-peermem kernel module lets the RDMA stack pin GPU pages.
//
// The CUDA driver is not linked: libcuda.so.1 is opened with dlopen at run time, so
// tessera builds and runs without a driver and answers "no CUDA driver" (a
// SystemError starting with kNoCudaDriver) where there is none, as on the build machine.
// The code that names CUDA types is compiled only with TESSERA_GPUDIRECT defined (Bazel
// defines it unless built with --define=tessera_gpudirect=off); without it
// CudaDriver::Load answers "no CUDA driver: GPUDirect RDMA is not compiled in".
#ifndef TESSERA_TRANSPORT_IBVERBS_GPU_DIRECT_H_
#define TESSERA_TRANSPORT_IBVERBS_GPU_DIRECT_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace tessera {
namespace ibverbs {

constexpr char kNoCudaDriver[] = "no CUDA driver";
bool IsNoCudaDriver(const Status& status);

// Whether this build has the GPUDirect code (TESSERA_GPUDIRECT).
bool GpuDirectCompiled();

// The few CUDA driver functions GPUDirect needs, resolved from the driver library.
class CudaDriver {
 public:
  // Opens `library` (normally the driver, "libcuda.so.1"), resolves the functions and
  // calls cuInit(0). Fails with:
  // - SystemError "no CUDA driver: ..." when the library cannot be opened, lacks a
  //   function, or is the toolkit's stub library (CUDA_ERROR_STUB_LIBRARY);
  // - SystemError "no CUDA driver: GPUDirect RDMA is not compiled in" without
  //   TESSERA_GPUDIRECT;
  // - CudaError naming the CUDA error when cuInit fails otherwise (e.g. no device).
  static Status Load(const std::string& library, std::unique_ptr<CudaDriver>* out);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  // Whether `ptr` is device memory (cuPointerGetAttribute: CU_MEMORYTYPE_DEVICE). Host
  // memory unknown to CUDA is simply not device memory.
  bool IsDeviceMemory(const void* ptr) const;

  // The allocation holding `ptr`: its first byte and size (cuMemGetAddressRange).
  Status AllocationRange(const void* ptr, uintptr_t* base, size_t* size) const;

  // A dma-buf file descriptor for the whole allocation holding [ptr, ptr + len), and
  // ptr's offset into it. The caller closes the descriptor. CudaError if the driver
  // cannot export it (old driver, proprietary kernel module).
  Status ExportDmaBuf(const void* ptr, size_t len, int* fd, size_t* offset) const;

  // Whether this host can register device memory with a NIC at all, asked before any
  // memory exists (the rank summary carries the answer): OK when the driver sees a GPU
  // and either GPU 0 supports dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) or the
  // peer-memory module is loaded (PeerMemoryModuleLoaded). Otherwise the reason.
  Status CanRegisterDeviceMemory() const;

  struct Functions;  // defined in the .cc

 private:
  CudaDriver() = default;
  void* library_ = nullptr;
  std::unique_ptr<Functions> fn_;
};

// Whether the kernel module that lets the RDMA stack pin GPU pages (nvidia-peermem, or
// the older nv_peer_mem) is loaded, read from /sys under `sys_root` ("/sys").
bool PeerMemoryModuleLoaded(const std::string& sys_root);

enum class DeviceRegistrationPath { kDmaBuf, kPeerMemory };
const char* DeviceRegistrationPathName(DeviceRegistrationPath path);  // "dma-buf", "peer memory"

// Registers device memory [ptr, ptr + len) with `pd`: dma-buf first, peer memory as the
// fallback. The MR's addresses are the device pointer's (iova = ptr), so work requests
// use device addresses. SystemError naming both attempts when neither works.
Status RegisterDeviceMemory(ibv_pd* pd, const CudaDriver& cuda, void* ptr, size_t len, int access, ibv_mr** out,
                            DeviceRegistrationPath* path);

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_GPU_DIRECT_H_
