// DeviceEngine: the memory operations behind device-resident collectives, as one small
// interface with two implementations.
//  - cuda::CudaDeviceEngine (cuda/cuda_device_engine.h): device memory, CUDA IPC,
//    cudaMemcpyAsync and the kernels of cuda/reduce_kernels.h on CUDA streams, CUDA
//    events. Compiled in every build, never run here (no GPU).
//  - HostDeviceEngine (host_device_engine.h): "device memory" is host memory (shared
//    memory for what peers map), the kernels are the host reducers, and work waits in
//    a queue until its event is queried, like a stream. It runs the cuda_ipc link
//    protocol and the device-resident collectives in CI across real processes.
//
// Work is asynchronous: a DeviceStream enqueues copies and kernels, Record returns a
// ticket for everything enqueued so far, and Done says (without blocking) whether the
// work up to a ticket has finished. Nothing may read a result before its ticket is done.
//
// Thread-safety: an engine and its streams are used by one thread at a time (the
// communicator's proxy thread, or the caller's thread for a blocking call).
#ifndef TESSERA_DEVICE_DEVICE_ENGINE_H_
#define TESSERA_DEVICE_DEVICE_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "base/status.h"
#include "base/types.h"
#include "elementwise/reducer.h"

namespace tessera {

// Device memory this rank allocated for a peer to write into (a link's staging slots).
// record() describes it for the peer's MapPeer; it travels over the pair's control path.
class ExportedMemory {
 public:
  virtual ~ExportedMemory() = default;
  virtual void* data() const = 0;
  virtual size_t bytes() const = 0;
  virtual const std::string& record() const = 0;  // at most kMaxExportRecordBytes
  // The peer has mapped it: drop whatever names it (the memory stays while mapped).
  virtual void PeerMapped() {}
};

// A peer's exported memory mapped into this process; unmapped by the destructor.
class MappedMemory {
 public:
  virtual ~MappedMemory() = default;
  virtual void* data() const = 0;
  virtual size_t bytes() const = 0;
};

// An in-order queue of asynchronous device work (a CUDA stream).
class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // dst = src for `bytes` (device memory, a peer's mapped memory included).
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // dst = a op b for `count` elements, per reducer.type/op (reducer.typed must be set).
  virtual Status Reduce(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) = 0;
  // PreMulSum: dst = scalar * src in `type` (half types computed in float32, rounded
  // once). `scalar` is one host value of `type`, read now.
  virtual Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) = 0;
  // avg: data /= divisor (integers truncate; half types in float32, rounded once).
  virtual Status Divide(DataType type, void* data, size_t count, int divisor) = 0;
  // A ticket for everything enqueued so far (tickets grow by one per Record).
  virtual Status Record(uint64_t* ticket) = 0;
  // Whether the work up to `ticket` has finished. Never blocks.
  virtual Status Done(uint64_t ticket, bool* done) = 0;
  // Waits (polling Done) until everything enqueued has finished, bounded by `deadline`
  // and `abort`; `what` names the operation in errors.
  Status Drain(const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what);
};

class DeviceEngine {
 public:
  static constexpr size_t kMaxExportRecordBytes = 120;

  virtual ~DeviceEngine() = default;
  virtual const char* name() const = 0;  // "cuda", "host"

  // Device memory for a peer to write into, and its record.
  virtual Status Export(size_t bytes, std::unique_ptr<ExportedMemory>* out) = 0;
  // Maps a peer's record (from process `peer_pid`).
  virtual Status Map(const std::string& record, int peer_pid, std::unique_ptr<MappedMemory>* out) = 0;
  // Temporary device memory, freed when the last owner lets go.
  virtual Status Allocate(size_t bytes, std::shared_ptr<void>* out) = 0;
  virtual Status CreateStream(std::unique_ptr<DeviceStream>* out) = 0;
  // Whether every byte of [p, p + bytes) is device memory this engine's kernels can
  // reach (its own, or a peer's mapped). Used to choose the device-resident path.
  virtual bool IsDeviceMemory(const void* p, size_t bytes) const = 0;
  // Makes data that a NIC wrote into this engine's memory (GPUDirect RDMA) visible to
  // work enqueued after this call returns. Called by the ibverbs GPUDirect link before
  // it launches kernels on pieces that arrived. The CUDA engine calls
  // cudaDeviceFlushGPUDirectRDMAWrites where the device needs it; memory the CPU wrote
  // needs nothing (the host engine).
  virtual Status FlushRemoteWrites() { return Status::Ok(); }
};

}  // namespace tessera

#endif  // TESSERA_DEVICE_DEVICE_ENGINE_H_
