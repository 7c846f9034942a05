// CUDA IPC between ranks on one host: a rank exports a device buffer as a fixed-size
// record (EncodeIpcBuffer), the record travels to its local peers through the
// rendezvous like any other bytes (DecodeIpcBuffer checks it on arrival), and a peer
// maps the buffer into its own address space (IpcMapping) to read or reduce from it
// directly with the kernels of cuda/reduce_kernels.h.
//
// Record layout (kIpcRecordBytes = 96, little-endian):
//   0  magic "TSCI"        4  version (u16) = 1      6  reserved (u16) = 0
//   8  cudaIpcMemHandle_t of the allocation (64 bytes)
//   72 offset of the buffer in the allocation (u64)   80 buffer bytes (u64)
//   88 device of the exporting rank (i32)             92 pid of the exporting rank (i32)
#ifndef TESSERA_CUDA_IPC_HANDLES_H_
#define TESSERA_CUDA_IPC_HANDLES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"

namespace tessera {
namespace cuda {

constexpr size_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
constexpr size_t kIpcRecordBytes = 96;

struct IpcBuffer {
  unsigned char handle[kIpcHandleBytes] = {};  // the allocation's cudaIpcMemHandle_t
  uint64_t offset = 0;  // of the buffer from the start of the allocation
  uint64_t bytes = 0;
  int32_t device = 0;   // the exporter's device (for locality checks and messages)
  int32_t pid = 0;      // the exporter's process (a process cannot map its own handles)
};

// Writes exactly kIpcRecordBytes to `out`.
void EncodeIpcBuffer(const IpcBuffer& buffer, unsigned char* out);

// Parses a record of `len` bytes. InvalidArgument naming the problem for a wrong length,
// magic, version or reserved field, an offset + bytes that overflows, a negative
// device or a non-positive pid. Needs no CUDA.
Status DecodeIpcBuffer(const unsigned char* in, size_t len, IpcBuffer* out);

// Describes `bytes` of device memory at `device_ptr` (cudaMalloc'd, not managed or
// pool memory) for export. kCudaError without usable CUDA; InvalidArgument for host or
// managed memory, or a range that leaves its allocation.
Status ExportIpcBuffer(const void* device_ptr, size_t bytes, IpcBuffer* out);

// A peer's buffer mapped into this process on the current device, unmapped by the
// destructor. A handle may be open only once per process: callers keep one mapping per
// peer buffer and reuse it.
class IpcMapping {
 public:
  // InvalidArgument for a buffer this process exported itself; kCudaError without
  // usable CUDA or when the driver refuses (e.g. no peer access between the devices).
  static Status Open(const IpcBuffer& buffer, std::unique_ptr<IpcMapping>* out);
  ~IpcMapping();
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;

  void* data() const { return static_cast<char*>(base_) + offset_; }
  size_t bytes() const { return bytes_; }

 private:
  IpcMapping(void* base, uint64_t offset, uint64_t bytes) : base_(base), offset_(offset), bytes_(bytes) {}
  void* base_;
  uint64_t offset_;
  uint64_t bytes_;
};

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_IPC_HANDLES_H_
