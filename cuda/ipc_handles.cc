#include "cuda/ipc_handles.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "cuda/availability.h"
#include "cuda/device_buffers.h"

namespace tessera {
namespace cuda {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "cudaIpcMemHandle_t changed size");

constexpr unsigned char kMagic[4] = {'T', 'S', 'C', 'I'};
constexpr uint16_t kVersion = 1;

void PutLe(unsigned char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t GetLe(const unsigned char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace

void EncodeIpcBuffer(const IpcBuffer& buffer, unsigned char* out) {
  std::memcpy(out, kMagic, 4);
  PutLe(out + 4, kVersion, 2);
  PutLe(out + 6, 0, 2);
  std::memcpy(out + 8, buffer.handle, kIpcHandleBytes);
  PutLe(out + 72, buffer.offset, 8);
  PutLe(out + 80, buffer.bytes, 8);
  PutLe(out + 88, static_cast<uint32_t>(buffer.device), 4);
  PutLe(out + 92, static_cast<uint32_t>(buffer.pid), 4);
}

Status DecodeIpcBuffer(const unsigned char* in, size_t len, IpcBuffer* out) {
  const std::string what = "CUDA IPC record: ";
  if (in == nullptr || len != kIpcRecordBytes) {
    return InvalidArgument(what + std::to_string(len) + " bytes, expected " + std::to_string(kIpcRecordBytes));
  }
  if (std::memcmp(in, kMagic, 4) != 0) return InvalidArgument(what + "bad magic (not a tessera CUDA IPC record)");
  const uint64_t version = GetLe(in + 4, 2);
  if (version != kVersion) {
    return InvalidArgument(what + "version " + std::to_string(version) + ", this build reads version " +
                           std::to_string(kVersion));
  }
  if (GetLe(in + 6, 2) != 0) return InvalidArgument(what + "reserved field is not zero");
  IpcBuffer b;
  std::memcpy(b.handle, in + 8, kIpcHandleBytes);
  b.offset = GetLe(in + 72, 8);
  b.bytes = GetLe(in + 80, 8);
  b.device = static_cast<int32_t>(static_cast<uint32_t>(GetLe(in + 88, 4)));
  b.pid = static_cast<int32_t>(static_cast<uint32_t>(GetLe(in + 92, 4)));
  if (b.offset + b.bytes < b.offset) return InvalidArgument(what + "offset + bytes overflows");
  if (b.device < 0) return InvalidArgument(what + "negative device " + std::to_string(b.device));
  if (b.pid <= 0) return InvalidArgument(what + "pid " + std::to_string(b.pid) + " is not a process");
  *out = b;
  return Status::Ok();
}

Status ExportIpcBuffer(const void* device_ptr, size_t bytes, IpcBuffer* out) {
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("exporting a CUDA IPC buffer"));
  MemoryKind kind;
  int device;
  TESSERA_RETURN_IF_ERROR(ClassifyPointer(device_ptr, &kind, &device));
  if (kind != MemoryKind::kDevice) {
    return InvalidArgument(std::string("CUDA IPC export needs cudaMalloc'd device memory, not ") + MemoryKindName(kind) +
                           " memory");
  }
  // The handle names the whole allocation: find its start through the driver.
  std::string why;
  void* fn = DriverFunction("cuMemGetAddressRange", 12000, &why);
  if (fn == nullptr) return Status(Code::kCudaError, "CUDA IPC export: " + why);
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult r = reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn)(&base, &size, reinterpret_cast<CUdeviceptr>(device_ptr));
  if (r != CUDA_SUCCESS) return Status(Code::kCudaError, "cuMemGetAddressRange failed with CUresult " + std::to_string(r));
  const uint64_t offset = reinterpret_cast<uint64_t>(device_ptr) - base;
  if (offset + bytes > size) {
    return InvalidArgument("CUDA IPC export: " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                           " leave their " + std::to_string(size) + "-byte allocation");
  }
  cudaIpcMemHandle_t handle;
  TESSERA_RETURN_IF_ERROR(CudaCall(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)), "cudaIpcGetMemHandle"));
  IpcBuffer b;
  std::memcpy(b.handle, &handle, kIpcHandleBytes);
  b.offset = offset;
  b.bytes = bytes;
  b.device = device;
  b.pid = static_cast<int32_t>(getpid());
  *out = b;
  return Status::Ok();
}

Status IpcMapping::Open(const IpcBuffer& buffer, std::unique_ptr<IpcMapping>* out) {
  if (buffer.pid == static_cast<int32_t>(getpid())) {
    return InvalidArgument("CUDA IPC: the buffer was exported by this process (pid " + std::to_string(buffer.pid) +
                           "); use its pointer directly");
  }
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("opening a CUDA IPC buffer"));
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, buffer.handle, kIpcHandleBytes);
  void* base = nullptr;
  TESSERA_RETURN_IF_ERROR(CudaCall(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess),
                                   "cudaIpcOpenMemHandle (buffer of pid " + std::to_string(buffer.pid) + ", device " +
                                       std::to_string(buffer.device) + ")"));
  out->reset(new IpcMapping(base, buffer.offset, buffer.bytes));
  return Status::Ok();
}

IpcMapping::~IpcMapping() {
  (void)cudaIpcCloseMemHandle(base_);
  (void)cudaGetLastError();
}

}  // namespace cuda
}  // namespace tessera
