// CudaDeviceEngine (cuda_device_engine.h): device memory, CUDA IPC, streams, kernels and
// events behind the DeviceEngine interface. Compiled, never run here (no GPU).
#include "cuda/cuda_device_engine.h"

#include <cuda_runtime_api.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/availability.h"
#include "cuda/device_buffers.h"
#include "cuda/ipc_handles.h"
#include "cuda/reduce_kernels.h"

namespace tessera {
namespace cuda {

// Released scratch blocks by size, kept for the next call; all freed with the pool.
struct ScratchPool {
  explicit ScratchPool(int d) : device(d) {}
  ~ScratchPool() {
    DeviceGuard guard(device);
    for (const auto& block : capacity) (void)cudaFree(block.first);
    (void)cudaGetLastError();
  }
  const int device;
  std::mutex mu;
  std::multimap<size_t, void*> free;  // capacity -> block
  std::map<void*, size_t> capacity;   // every block -> its capacity
};

namespace {

// A free block of at least `bytes` and at most twice that, else a new one (sizes rounded
// up to a power of two, so that calls of similar sizes share blocks). The block goes back
// to the pool when the last holder releases it.
Status AllocateScratch(const std::shared_ptr<ScratchPool>& pool, size_t bytes, std::shared_ptr<void>* out) {
  size_t rounded = 256;
  while (rounded < bytes) rounded *= 2;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    auto it = pool->free.lower_bound(rounded);
    if (it != pool->free.end() && it->first <= 2 * rounded) {
      p = it->second;
      pool->free.erase(it);
    }
  }
  if (p == nullptr) {
    DeviceGuard guard(pool->device);
    TESSERA_RETURN_IF_ERROR(guard.status());
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaMalloc(&p, rounded), "cudaMalloc of " + std::to_string(rounded) + " bytes"));
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->capacity[p] = rounded;
  }
  *out = std::shared_ptr<void>(p, [pool](void* q) {
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->free.emplace(pool->capacity[q], q);
  });
  return Status::Ok();
}

class CudaExported : public ExportedMemory {
 public:
  CudaExported(int device, void* ptr, size_t bytes, std::string record)
      : device_(device), ptr_(ptr), bytes_(bytes), record_(std::move(record)) {}
  ~CudaExported() override {
    DeviceGuard guard(device_);
    (void)cudaFree(ptr_);
    (void)cudaGetLastError();
  }
  void* data() const override { return ptr_; }
  size_t bytes() const override { return bytes_; }
  const std::string& record() const override { return record_; }

 private:
  const int device_;
  void* const ptr_;
  const size_t bytes_;
  const std::string record_;
};

class CudaMapped : public MappedMemory {
 public:
  CudaMapped(int device, std::unique_ptr<IpcMapping> mapping) : device_(device), mapping_(std::move(mapping)) {}
  ~CudaMapped() override {
    DeviceGuard guard(device_);
    mapping_.reset();
  }
  void* data() const override { return mapping_->data(); }
  size_t bytes() const override { return mapping_->bytes(); }

 private:
  const int device_;
  std::unique_ptr<IpcMapping> mapping_;
};

class CudaStream : public DeviceStream {
 public:
  CudaStream(int device, cudaStream_t stream, std::shared_ptr<ScratchPool> scratch)
      : device_(device), stream_(stream), scratch_(std::move(scratch)) {}
  ~CudaStream() override {
    DeviceGuard guard(device_);
    // Destroying a stream with work queued is allowed: CUDA releases it once done.
    (void)cudaStreamDestroy(stream_);
    for (const Pending& p : pending_) (void)cudaEventDestroy(p.event);
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
    (void)cudaGetLastError();
  }

  Status Copy(void* dst, const void* src, size_t bytes) override {
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    return CudaCall(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync (cuda_ipc)");
  }

  Status Reduce(const Reducer& r, void* dst, const void* a, const void* b, size_t count) override {
    if (!r.typed) return InvalidArgument("CUDA device engine: a reducer without its type and operator (Reducer::typed)");
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    return LaunchReduce(r.type, r.op, dst, a, b, count, stream_);
  }

  Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) override {
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    if (!IsHalf(type)) return LaunchScale(type, scalar, false, src, dst, count, stream_);
    // Half types: scaled into float32, then rounded once into dst.
    if (wide_count_ < count) {
      TESSERA_RETURN_IF_ERROR(CudaCall(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (growing the scale buffer)"));
      wide_.reset();
      wide_count_ = 0;
      TESSERA_RETURN_IF_ERROR(AllocateScratch(scratch_, count * sizeof(float), &wide_));
      wide_count_ = count;
    }
    float* wide = static_cast<float*>(wide_.get());
    TESSERA_RETURN_IF_ERROR(LaunchScale(type, scalar, false, src, wide, count, stream_));
    return LaunchNarrowHalf(type, wide, dst, count, stream_);
  }

  Status Divide(DataType type, void* data, size_t count, int divisor) override {
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    return LaunchDivide(type, data, count, divisor, stream_);
  }

  Status Record(uint64_t* ticket) override {
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    cudaEvent_t e = nullptr;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      TESSERA_RETURN_IF_ERROR(CudaCall(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    }
    const Status s = CudaCall(cudaEventRecord(e, stream_), "cudaEventRecord (cuda_ipc)");
    if (!s.ok()) {
      free_.push_back(e);
      return s;
    }
    *ticket = ++recorded_;
    pending_.push_back({*ticket, e});
    return Status::Ok();
  }

  Status Done(uint64_t ticket, bool* done) override {
    // A stream's events complete in order: retire from the oldest.
    while (ticket > completed_ && !pending_.empty()) {
      const cudaError_t q = cudaEventQuery(pending_.front().event);
      if (q == cudaErrorNotReady) break;
      TESSERA_RETURN_IF_ERROR(CudaCall(q, "cudaEventQuery (cuda_ipc)"));
      completed_ = pending_.front().ticket;
      free_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    *done = ticket <= completed_;
    return Status::Ok();
  }

 private:
  struct Pending {
    uint64_t ticket;
    cudaEvent_t event;
  };
  const int device_;
  cudaStream_t stream_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  uint64_t recorded_ = 0, completed_ = 0;
  std::shared_ptr<ScratchPool> scratch_;
  std::shared_ptr<void> wide_;  // float32 room for PreMulSum of half types
  size_t wide_count_ = 0;
};

}  // namespace

Status CudaDeviceEngine::Create(int device, std::unique_ptr<CudaDeviceEngine>* out) {
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("CUDA device engine"));
  {
    // Loaded now, before any stream waits for a call that launches them (reduce_kernels.h).
    DeviceGuard guard(device);
    TESSERA_RETURN_IF_ERROR(guard.status());
    TESSERA_RETURN_IF_ERROR(LoadKernels().Annotate("CUDA device engine"));
  }
  out->reset(new CudaDeviceEngine(device));
  return Status::Ok();
}

Status CudaDeviceEngine::Export(size_t bytes, std::unique_ptr<ExportedMemory>* out) {
  DeviceGuard guard(device_);
  TESSERA_RETURN_IF_ERROR(guard.status());
  void* p = nullptr;
  TESSERA_RETURN_IF_ERROR(CudaCall(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes of slots"));
  IpcBuffer ipc;
  const Status s = ExportIpcBuffer(p, bytes, &ipc);
  if (!s.ok()) {
    (void)cudaFree(p);
    return s;
  }
  std::string record(kIpcRecordBytes, '\0');
  EncodeIpcBuffer(ipc, reinterpret_cast<unsigned char*>(&record[0]));
  out->reset(new CudaExported(device_, p, bytes, std::move(record)));
  return Status::Ok();
}

Status CudaDeviceEngine::Map(const std::string& record, int peer_pid, std::unique_ptr<MappedMemory>* out) {
  IpcBuffer ipc;
  TESSERA_RETURN_IF_ERROR(DecodeIpcBuffer(reinterpret_cast<const unsigned char*>(record.data()), record.size(), &ipc));
  if (ipc.pid != peer_pid) {
    return InvalidArgument("CUDA IPC record of pid " + std::to_string(ipc.pid) + " from the peer with pid " +
                           std::to_string(peer_pid));
  }
  DeviceGuard guard(device_);
  TESSERA_RETURN_IF_ERROR(guard.status());
  std::unique_ptr<IpcMapping> mapping;
  TESSERA_RETURN_IF_ERROR(IpcMapping::Open(ipc, &mapping));
  out->reset(new CudaMapped(device_, std::move(mapping)));
  return Status::Ok();
}

Status CudaDeviceEngine::FlushRemoteWrites() {
  if (flush_ == 0) return Status::Ok();  // called per progress round: no device switch when nothing to do
  DeviceGuard guard(device_);
  TESSERA_RETURN_IF_ERROR(guard.status());
  if (flush_ < 0) {
    int ordering = 0, options = 0;
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, device_),
                                     "cudaDeviceGetAttribute (GPUDirect RDMA write ordering)"));
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaDeviceGetAttribute(&options, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device_),
                                     "cudaDeviceGetAttribute (GPUDirect RDMA flush options)"));
    // A device that orders remote writes for its own context needs no flush.
    flush_ = ordering < cudaGPUDirectRDMAWritesOrderingOwner && (options & cudaFlushGPUDirectRDMAWritesOptionHost) ? 1 : 0;
  }
  if (flush_ == 0) return Status::Ok();
  return CudaCall(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                    cudaFlushGPUDirectRDMAWritesToOwner),
                  "cudaDeviceFlushGPUDirectRDMAWrites");
}

CudaDeviceEngine::CudaDeviceEngine(int device) : device_(device), scratch_(std::make_shared<ScratchPool>(device)) {}

Status CudaDeviceEngine::Allocate(size_t bytes, std::shared_ptr<void>* out) {
  return AllocateScratch(scratch_, bytes, out);
}

Status CudaDeviceEngine::CreateStream(std::unique_ptr<DeviceStream>* out) {
  DeviceGuard guard(device_);
  TESSERA_RETURN_IF_ERROR(guard.status());
  cudaStream_t s = nullptr;
  TESSERA_RETURN_IF_ERROR(CudaCall(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate (cuda_ipc)"));
  out->reset(new CudaStream(device_, s, scratch_));
  return Status::Ok();
}

bool CudaDeviceEngine::IsDeviceMemory(const void* p, size_t bytes) const {
  (void)bytes;  // the allocation's extent is the caller's contract, as in NCCL
  MemoryKind kind;
  int device = -1;
  return ClassifyPointer(p, &kind, &device).ok() && kind == MemoryKind::kDevice && device == device_;
}

}  // namespace cuda
}  // namespace tessera
