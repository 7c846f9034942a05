// Device buffers in collectives: what kind of memory a pointer is, and host staging of
// device buffers in the caller's stream order (the design is in cuda/stream_order.h and
// docs/cuda.md).
//
// A staged operation goes like this (the communicator's hooks, docs/cuda.md):
//   caller's thread:  Stage(request, stream) -> enqueues on the stream: device -> pinned
//                     copies of the inputs, a GPU-side write of the operation's number
//                     to the slot's input word, a GPU-side wait for the number, pinned
//                     -> device copies of the results, an event. Returns host pointers
//                     at once; the caller's thread never blocks on the GPU.
//   proxy thread:     WaitInput (reads the input word, bounded by a deadline), runs the
//                     host collective on the host pointers, Finish (publishes the
//                     number: the stream continues with the copies back).
// The proxy makes no CUDA call between WaitInput and Finish, nor in them: a stream waits
// on the GPU for it, and a thread of the program may hold the driver's locks while it
// waits for that stream (a synchronous cudaMemcpy on the legacy stream does; the proxy's
// next CUDA call then never returns; seen on an H100). CUDA asks the same of host
// functions on a stream (cudaLaunchHostFunc).
// Operations must be finished in the order they were staged (one proxy thread per
// stager, FIFO), which is what keeps every stream in issue order.
#ifndef TESSERA_CUDA_DEVICE_BUFFERS_H_
#define TESSERA_CUDA_DEVICE_BUFFERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "cuda/stream_order.h"

namespace tessera {
namespace cuda {

enum class MemoryKind {
  kHost,        // ordinary host memory, or any pointer when CUDA is not usable
  kPinnedHost,  // page-locked host memory (cudaHostAlloc / cudaHostRegister)
  kDevice,      // cudaMalloc'd device memory
  kManaged,     // cudaMallocManaged memory (staged like device memory)
};
const char* MemoryKindName(MemoryKind kind);  // "host", "pinned host", "device", "managed"

// What kind of memory p is, and its device (-1 for ordinary host memory). Without
// usable CUDA (cuda/availability.h) every pointer is kHost and no CUDA call is made.
// Thread-safe; does not block.
Status ClassifyPointer(const void* p, MemoryKind* kind, int* device);

// Device and managed memory go through pinned staging buffers; host memory of any kind
// is read and written in place by the host part of the operation.
inline bool IsStaged(MemoryKind kind) { return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged; }

// The calling thread's current CUDA device (kCudaError without usable CUDA).
Status CurrentDevice(int* device);

// Enqueues dst = src (`bytes`, any kind of memory) on `stream` (NULL: CUDA's legacy
// default stream) and returns at once.
Status CopyOnStream(void* dst, const void* src, size_t bytes, void* stream);

// Waits until everything enqueued on `stream` so far has finished (an event, polled):
// TimeoutError at `deadline`, RemoteError once *abort is true (abort may be null);
// `what` names the wait in errors.
Status WaitForStream(void* stream, const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what);

// The buffers of one operation on this rank, in bytes as the operation uses them here.
// Buffers may overlap as the in-place rules of tessera.h allow (one inside the other):
// they then share one staging buffer at the same relative offsets, so the host
// operation sees the same in-place relation.
struct StagingRequest {
  const void* send = nullptr;
  size_t send_bytes = 0;  // bytes the operation reads from send on this rank (0: none)
  void* recv = nullptr;
  size_t recv_bytes = 0;  // bytes it writes to recv on this rank (0: none, recv untouched)
  // PreMulSum's scalar when it is read at each call (tesseraScalarDevice), else null.
  const void* scalar = nullptr;
  size_t scalar_bytes = 0;
};

// *staged = whether any buffer of req is device or managed memory (always false without
// usable CUDA). Errors only if CUDA fails to answer about a pointer.
Status NeedsStaging(const StagingRequest& req, bool* staged);

// One staged operation: the pointers the host operation uses instead of the request's.
// A host-memory buffer keeps its own pointer; a buffer of 0 bytes becomes null (the host
// operation does not touch it, and must never see a device pointer).
struct StagedOp {
  uint32_t seq = 0;
  const void* host_send = nullptr;
  void* host_recv = nullptr;
  const void* host_scalar = nullptr;
  size_t slot = 0;
};

class DeviceStager {
 public:
  // At most this many pinned slots (operations staged and not yet copied back); beyond,
  // Stage waits for the oldest (bounded by the timeout).
  static constexpr size_t kMaxSlots = 16;

  // A stager for the streams of `device`. timeout_ms bounds Stage's wait for a free slot
  // and the destructor's wait for streams to leave the pinned buffers. kCudaError
  // without usable CUDA or when the driver lacks GPU-side stream waits.
  static Status Create(int device, int64_t timeout_ms, std::unique_ptr<DeviceStager>* out);

  // Releases every stream still waiting (their results are then undefined), waits up to
  // the timeout for the streams to finish with the pinned buffers, and frees them; if
  // they do not finish in time the buffers are leaked rather than freed under a copy.
  // The proxy thread must have stopped calling WaitInput/Finish.
  ~DeviceStager();
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  int device() const { return device_; }

  // Caller's thread: stages `req` on `stream` (a cudaStream_t of device(); nullptr is
  // the legacy default stream) as described at the top. Device buffers of another device
  // are InvalidArgument. On OK the operation must later be finished (Finish, or
  // ReleaseAll / destruction). A CUDA failure after the stream received the wait breaks
  // the stager: every waiting stream is released and later calls return that error.
  Status Stage(const StagingRequest& req, void* stream, StagedOp* out);

  // Caller's thread: stages the operations of one group (tesseraGroupStart/End) as one
  // unit, reqs[i] on streams[i]. They share one number, so every stream of the group
  // continues when the whole group is done. Each distinct stream gets one slot and, in
  // this order: the copies of all its requests' inputs, one write of the input word,
  // the GPU-side wait, the copies back, one done event. So two operations of the group on the same
  // stream never wait for each other (staging them one by one would: the second one's
  // inputs would queue behind the first one's wait). (*out)[i] is reqs[i]'s; the proxy
  // waits for every one's input, runs the group, and finishes every one (Finish of the
  // same number twice is fine). Arguments are checked before any stream receives work.
  // More than kMaxSlots distinct streams is InvalidUsage.
  Status StageGroup(const std::vector<StagingRequest>& reqs, const std::vector<void*>& streams,
                    std::vector<StagedOp>* out);

  // Proxy thread: waits until the stream has copied op's inputs to the host (its slot's
  // input word reached op.seq; no CUDA call). Bounded by `deadline`; returns RemoteError
  // promptly when *abort becomes true (abort may be null).
  Status WaitInput(const StagedOp& op, const Deadline& deadline, const std::atomic<bool>* abort);

  // Proxy thread: the host part of op is done, successfully or not: its stream may
  // continue (it copies the results back). Call it in staging order, also after failures.
  Status Finish(const StagedOp& op);

  // Releases every staged operation's stream now (abort).
  void ReleaseAll();

  // The first CUDA error that broke the stager, or OK.
  Status broken() const;

 private:
  struct Slot;
  DeviceStager(int device, int64_t timeout_ms);
  Status Break(const Status& s);  // mu_ held
  void Publish(uint32_t value);   // mu_ held
  // `reserved`: slots already chosen by the group being staged (never chosen again).
  Status ChooseAndPrepareSlot(size_t bytes, const std::vector<size_t>& reserved, std::unique_lock<std::mutex>* lock,
                              size_t* index);
  Status RefreshBusy();  // mu_ held

  const int device_;
  const int64_t timeout_ms_;
  void* wait_value_fn_ = nullptr;   // cuStreamWaitValue32
  void* write_value_fn_ = nullptr;  // cuStreamWriteValue32
  uint32_t* word_ = nullptr;       // the published number, pinned and mapped
  uint64_t word_device_ = 0;       // its device address
  mutable std::mutex mu_;
  CompletionOrder order_;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Pinned buffers of slots that grew, freed with the stager: cudaFreeHost waits for the
  // whole device, including streams that wait for the proxy, which needs mu_.
  std::vector<void*> retired_;
  Status broken_;
};

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_DEVICE_BUFFERS_H_
