#include "transport/ibverbs/gpu_direct.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifdef TESSERA_GPUDIRECT
#include <cuda.h>
#endif

namespace tessera {
namespace ibverbs {

bool IsNoCudaDriver(const Status& status) {
  return status.code() == Code::kSystemError && status.message().rfind(kNoCudaDriver, 0) == 0;
}

bool PeerMemoryModuleLoaded(const std::string& sys_root) {
  for (const char* path : {"/module/nvidia_peermem", "/module/nv_peer_mem", "/kernel/mm/memory_peers/nv_mem/version"}) {
    if (::access((sys_root + path).c_str(), F_OK) == 0) return true;
  }
  return false;
}

const char* DeviceRegistrationPathName(DeviceRegistrationPath path) {
  return path == DeviceRegistrationPath::kDmaBuf ? "dma-buf" : "peer memory";
}

#ifdef TESSERA_GPUDIRECT

bool GpuDirectCompiled() { return true; }

// Typed pointers to the driver functions, named after them. cuMemGetAddressRange is
// the _v2 entry point that cuda.h maps the name to.
struct CudaDriver::Functions {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_get_attribute = nullptr;
  decltype(&::cuMemGetAddressRange) mem_get_address_range = nullptr;
  // Optional: absent from drivers older than CUDA 11.7 (then only peer memory works).
  decltype(&::cuMemGetHandleForAddressRange) mem_get_handle_for_address_range = nullptr;
  // For CanRegisterDeviceMemory.
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
};

namespace {

std::string CudaErrorText(const CudaDriver::Functions& fn, CUresult r) {
  const char* text = nullptr;
  if (fn.get_error_string != nullptr && fn.get_error_string(r, &text) == CUDA_SUCCESS && text != nullptr) {
    return std::string(text) + " (" + std::to_string(static_cast<int>(r)) + ")";
  }
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

template <typename F>
bool Resolve(void* library, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  return *out != nullptr;
}

}  // namespace

Status CudaDriver::Load(const std::string& library, std::unique_ptr<CudaDriver>* out) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return SystemError(std::string(kNoCudaDriver) + ": cannot load " + library + " (" +
                       (why != nullptr ? why : "unknown dlopen error") + "); GPUDirect RDMA is unavailable");
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->library_ = handle;  // closed by the destructor from here on
  d->fn_ = std::make_unique<Functions>();
  Functions& fn = *d->fn_;
  const char* missing = nullptr;
  if (!Resolve(handle, "cuInit", &fn.init)) missing = "cuInit";
  if (!Resolve(handle, "cuGetErrorString", &fn.get_error_string)) missing = "cuGetErrorString";
  if (!Resolve(handle, "cuPointerGetAttribute", &fn.pointer_get_attribute)) missing = "cuPointerGetAttribute";
  if (!Resolve(handle, "cuMemGetAddressRange_v2", &fn.mem_get_address_range)) missing = "cuMemGetAddressRange_v2";
  Resolve(handle, "cuMemGetHandleForAddressRange", &fn.mem_get_handle_for_address_range);
  if (!Resolve(handle, "cuDeviceGetCount", &fn.device_get_count)) missing = "cuDeviceGetCount";
  if (!Resolve(handle, "cuDeviceGet", &fn.device_get)) missing = "cuDeviceGet";
  if (!Resolve(handle, "cuDeviceGetAttribute", &fn.device_get_attribute)) missing = "cuDeviceGetAttribute";
  if (missing != nullptr) {
    return SystemError(std::string(kNoCudaDriver) + ": " + library + " has no " + missing +
                       " (not a CUDA driver library?)");
  }
  const CUresult r = fn.init(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    return SystemError(std::string(kNoCudaDriver) + ": " + library +
                       " is the CUDA toolkit's stub library, not a driver");
  }
  if (r != CUDA_SUCCESS) return Status(Code::kCudaError, "cuInit: " + CudaErrorText(fn, r));
  *out = std::move(d);
  return Status::Ok();
}

CudaDriver::~CudaDriver() {
  if (library_ != nullptr) dlclose(library_);
}

bool CudaDriver::IsDeviceMemory(const void* ptr) const {
  unsigned int type = 0;
  const CUresult r =
      fn_->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(ptr));
  return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

Status CudaDriver::AllocationRange(const void* ptr, uintptr_t* base, size_t* size) const {
  CUdeviceptr b = 0;
  size_t s = 0;
  const CUresult r = fn_->mem_get_address_range(&b, &s, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) return Status(Code::kCudaError, "cuMemGetAddressRange: " + CudaErrorText(*fn_, r));
  *base = static_cast<uintptr_t>(b);
  *size = s;
  return Status::Ok();
}

Status CudaDriver::CanRegisterDeviceMemory() const {
  int count = 0;
  CUresult r = fn_->device_get_count(&count);
  if (r != CUDA_SUCCESS) return Status(Code::kCudaError, "cuDeviceGetCount: " + CudaErrorText(*fn_, r));
  if (count == 0) return SystemError("the CUDA driver sees no GPU");
  CUdevice device = 0;
  int dma_buf = 0;
  r = fn_->device_get(&device, 0);
  if (r == CUDA_SUCCESS && fn_->mem_get_handle_for_address_range != nullptr) {
    r = fn_->device_get_attribute(&dma_buf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device);
    if (r != CUDA_SUCCESS) dma_buf = 0;
  }
  if (dma_buf != 0 || PeerMemoryModuleLoaded("/sys")) return Status::Ok();
  return SystemError("GPU 0 does not support dma-buf and the nvidia-peermem module is not loaded");
}

Status CudaDriver::ExportDmaBuf(const void* ptr, size_t len, int* fd, size_t* offset) const {
  if (fn_->mem_get_handle_for_address_range == nullptr) {
    return Status(Code::kCudaError, "this CUDA driver has no cuMemGetHandleForAddressRange (needs CUDA 11.7+)");
  }
  uintptr_t base = 0;
  size_t size = 0;
  TESSERA_RETURN_IF_ERROR(AllocationRange(ptr, &base, &size));
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p < base || p + len > base + size) {
    return InvalidArgument("device range of " + std::to_string(len) + " bytes crosses the end of its allocation");
  }
  int handle = -1;
  const CUresult r = fn_->mem_get_handle_for_address_range(&handle, static_cast<CUdeviceptr>(base), size,
                                                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS) return Status(Code::kCudaError, "cuMemGetHandleForAddressRange: " + CudaErrorText(*fn_, r));
  *fd = handle;
  *offset = p - base;
  return Status::Ok();
}

Status RegisterDeviceMemory(ibv_pd* pd, const CudaDriver& cuda, void* ptr, size_t len, int access, ibv_mr** out,
                            DeviceRegistrationPath* path) {
  std::string dmabuf_failure;
  int fd = -1;
  size_t offset = 0;
  Status exported = cuda.ExportDmaBuf(ptr, len, &fd, &offset);
  if (exported.ok()) {
    ibv_mr* mr = ibv_reg_dmabuf_mr(pd, offset, len, reinterpret_cast<uint64_t>(ptr), fd, access);
    const int err = errno;
    ::close(fd);  // the registration keeps its own reference to the buffer
    if (mr != nullptr) {
      *out = mr;
      *path = DeviceRegistrationPath::kDmaBuf;
      return Status::Ok();
    }
    dmabuf_failure = std::string("ibv_reg_dmabuf_mr: ") + std::strerror(err);
  } else {
    dmabuf_failure = exported.message();
  }
  ibv_mr* mr = ibv_reg_mr(pd, ptr, len, access);
  if (mr != nullptr) {
    *out = mr;
    *path = DeviceRegistrationPath::kPeerMemory;
    return Status::Ok();
  }
  return SystemError("GPUDirect RDMA cannot register " + std::to_string(len) +
                     " bytes of device memory: dma-buf: " + dmabuf_failure +
                     "; peer memory: ibv_reg_mr: " + std::strerror(errno) + " (is the nvidia-peermem module loaded?)");
}

#else  // !TESSERA_GPUDIRECT

bool GpuDirectCompiled() { return false; }

struct CudaDriver::Functions {};

namespace {
Status NotCompiled() {
  return SystemError(std::string(kNoCudaDriver) +
                     ": GPUDirect RDMA is not compiled in (built with --define=tessera_gpudirect=off)");
}
}  // namespace

Status CudaDriver::Load(const std::string& library, std::unique_ptr<CudaDriver>* out) {
  (void)library;
  (void)out;
  return NotCompiled();
}

CudaDriver::~CudaDriver() = default;

bool CudaDriver::IsDeviceMemory(const void* ptr) const {
  (void)ptr;
  return false;
}

Status CudaDriver::AllocationRange(const void* ptr, uintptr_t* base, size_t* size) const {
  (void)ptr, (void)base, (void)size;
  return NotCompiled();
}

Status CudaDriver::CanRegisterDeviceMemory() const { return NotCompiled(); }

Status CudaDriver::ExportDmaBuf(const void* ptr, size_t len, int* fd, size_t* offset) const {
  (void)ptr, (void)len, (void)fd, (void)offset;
  return NotCompiled();
}

Status RegisterDeviceMemory(ibv_pd* pd, const CudaDriver& cuda, void* ptr, size_t len, int access, ibv_mr** out,
                            DeviceRegistrationPath* path) {
  (void)pd, (void)cuda, (void)ptr, (void)len, (void)access, (void)out, (void)path;
  return NotCompiled();
}

#endif  // TESSERA_GPUDIRECT

}  // namespace ibverbs
}  // namespace tessera
