#include "cuda/device_buffers.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "base/poll.h"
#include "cuda/availability.h"

namespace tessera {
namespace cuda {

struct DeviceStager::Slot {
  void* host = nullptr;  // pinned; null while capacity is 0
  size_t capacity = 0;
  // The number of the last operation whose inputs the stream copied to the host: pinned
  // and mapped, written by the stream (cuStreamWriteValue32), read by the proxy.
  uint32_t* input_word = nullptr;
  uint64_t input_word_device = 0;
  cudaEvent_t done = nullptr;  // recorded after the copies back
  bool busy = false;            // `done` recorded and not yet seen complete
  uint32_t last_seq = 0;
};

namespace {

constexpr size_t kAlign = 64;  // staging offsets: a cache line, and 16-byte vector loads

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool Contains(const void* outer, size_t outer_bytes, const void* inner, size_t inner_bytes) {
  const uintptr_t o = reinterpret_cast<uintptr_t>(outer), i = reinterpret_cast<uintptr_t>(inner);
  return i >= o && i + inner_bytes <= o + outer_bytes;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// Classifies one buffer of a request (none when it has no bytes).
Status Classify(const void* p, size_t bytes, MemoryKind* kind, int* device) {
  *kind = MemoryKind::kHost;
  *device = -1;
  if (p == nullptr || bytes == 0) return Status::Ok();
  return ClassifyPointer(p, kind, device);
}

// Where each staged buffer lives inside the slot.
struct Layout {
  bool send = false, recv = false, scalar = false;  // which buffers are staged
  size_t send_at = 0, recv_at = 0, scalar_at = 0;
  size_t bytes = 0;
};

// Staged buffers one after the other; a send inside recv, or a recv inside send (the
// in-place forms), share the outer buffer's region at their relative offset.
Status PlanLayout(const StagingRequest& req, bool send, bool recv, bool scalar, Layout* out) {
  Layout l;
  l.send = send;
  l.recv = recv;
  l.scalar = scalar;
  if (send && recv && Overlap(req.send, req.send_bytes, req.recv, req.recv_bytes)) {
    if (Contains(req.recv, req.recv_bytes, req.send, req.send_bytes)) {
      l.send_at = static_cast<const char*>(req.send) - static_cast<const char*>(req.recv);
      l.bytes = AlignUp(req.recv_bytes);
    } else if (Contains(req.send, req.send_bytes, req.recv, req.recv_bytes)) {
      l.recv_at = static_cast<const char*>(req.recv) - static_cast<const char*>(req.send);
      l.bytes = AlignUp(req.send_bytes);
    } else {
      return InvalidArgument("sendbuff and recvbuff overlap without one containing the other");
    }
  } else {
    if (send) {
      l.send_at = l.bytes;
      l.bytes = AlignUp(l.bytes + req.send_bytes);
    }
    if (recv) {
      l.recv_at = l.bytes;
      l.bytes = AlignUp(l.bytes + req.recv_bytes);
    }
  }
  if (scalar) {
    l.scalar_at = l.bytes;
    l.bytes = AlignUp(l.bytes + req.scalar_bytes);
  }
  *out = l;
  return Status::Ok();
}

Status CheckDevice(const char* name, MemoryKind kind, int buffer_device, int device) {
  if (kind == MemoryKind::kDevice && buffer_device != device) {
    return InvalidArgument(std::string(name) + " is memory of CUDA device " + std::to_string(buffer_device) +
                           ", the communicator's device is " + std::to_string(device));
  }
  return Status::Ok();
}

}  // namespace

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kPinnedHost: return "pinned host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
  }
  return "unknown";
}

Status ClassifyPointer(const void* p, MemoryKind* kind, int* device) {
  *kind = MemoryKind::kHost;
  *device = -1;
  if (p == nullptr || !CudaUsable().ok()) return Status::Ok();
  cudaPointerAttributes attr;
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e == cudaErrorInvalidValue) {  // drivers before CUDA 11 said so for host memory
    (void)cudaGetLastError();
    return Status::Ok();
  }
  TESSERA_RETURN_IF_ERROR(CudaCall(e, "cudaPointerGetAttributes"));
  switch (attr.type) {
    case cudaMemoryTypeUnregistered: return Status::Ok();
    case cudaMemoryTypeHost: *kind = MemoryKind::kPinnedHost; break;
    case cudaMemoryTypeDevice: *kind = MemoryKind::kDevice; break;
    case cudaMemoryTypeManaged: *kind = MemoryKind::kManaged; break;
  }
  *device = attr.device;
  return Status::Ok();
}

Status CurrentDevice(int* device) {
  TESSERA_RETURN_IF_ERROR(CudaUsable());
  return CudaCall(cudaGetDevice(device), "cudaGetDevice");
}

Status CopyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  TESSERA_RETURN_IF_ERROR(CudaUsable());
  return CudaCall(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                  "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes on the caller's stream");
}

Status WaitForStream(void* stream, const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what) {
  cudaEvent_t event = nullptr;
  TESSERA_RETURN_IF_ERROR(CudaCall(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what + ": cudaEventCreate"));
  Status s = CudaCall(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), what + ": cudaEventRecord");
  if (s.ok()) {
    s = PollUntil(
        [&](bool* done) {
          const cudaError_t e = cudaEventQuery(event);
          *done = e == cudaSuccess;
          return *done || e == cudaErrorNotReady ? Status::Ok() : CudaCall(e, what + ": cudaEventQuery");
        },
        deadline, abort, what, "the stream did not finish its earlier work within the timeout");
  }
  (void)cudaEventDestroy(event);
  return s;
}

Status NeedsStaging(const StagingRequest& req, bool* staged) {
  *staged = false;
  const void* buffers[3] = {req.send, req.recv, req.scalar};
  const size_t bytes[3] = {req.send_bytes, req.recv_bytes, req.scalar_bytes};
  for (int i = 0; i < 3; ++i) {
    MemoryKind kind;
    int device;
    TESSERA_RETURN_IF_ERROR(Classify(buffers[i], bytes[i], &kind, &device));
    if (IsStaged(kind)) *staged = true;
  }
  return Status::Ok();
}

namespace {

// A pinned, mapped 32-bit word holding `initial`, and its device address: what streams
// write or wait for on the GPU and the host reads or writes.
Status AllocateWord(uint32_t initial, const std::string& what, uint32_t** word, uint64_t* on_device) {
  void* p = nullptr;
  TESSERA_RETURN_IF_ERROR(
      CudaCall(cudaHostAlloc(&p, kAlign, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc (" + what + ")"));
  __atomic_store_n(static_cast<uint32_t*>(p), initial, __ATOMIC_RELEASE);
  void* device = nullptr;
  const Status s = CudaCall(cudaHostGetDevicePointer(&device, p, 0), "cudaHostGetDevicePointer (" + what + ")");
  if (!s.ok()) {
    (void)cudaFreeHost(p);
    return s;
  }
  *word = static_cast<uint32_t*>(p);
  *on_device = reinterpret_cast<uint64_t>(device);
  return Status::Ok();
}

}  // namespace

DeviceStager::DeviceStager(int device, int64_t timeout_ms) : device_(device), timeout_ms_(timeout_ms) {}

Status DeviceStager::Create(int device, int64_t timeout_ms, std::unique_ptr<DeviceStager>* out) {
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("staging device buffers"));
  std::unique_ptr<DeviceStager> s(new DeviceStager(device, timeout_ms));
  std::string why;
  s->wait_value_fn_ = DriverFunction("cuStreamWaitValue32", 12000, &why);
  if (s->wait_value_fn_ != nullptr) s->write_value_fn_ = DriverFunction("cuStreamWriteValue32", 12000, &why);
  if (s->write_value_fn_ == nullptr) {
    return Status(Code::kCudaError,
                  "staging device buffers needs GPU-side stream memory operations (cuStreamWaitValue32, "
                  "cuStreamWriteValue32): " + why);
  }
  DeviceGuard guard(device);
  TESSERA_RETURN_IF_ERROR(guard.status());
  TESSERA_RETURN_IF_ERROR(AllocateWord(s->order_.published(), "stream order word", &s->word_, &s->word_device_));
  *out = std::move(s);
  return Status::Ok();
}

DeviceStager::~DeviceStager() {
  std::lock_guard<std::mutex> lock(mu_);
  if (word_ != nullptr) Publish(order_.ReleaseAll());
  // Streams may still be copying into or out of the slots: wait (bounded), else leak.
  const Deadline deadline = Deadline::AfterMs(timeout_ms_);
  bool idle = true;
  for (const auto& slot : slots_) {
    if (!slot->busy) continue;
    cudaError_t e;
    while ((e = cudaEventQuery(slot->done)) == cudaErrorNotReady && !deadline.Expired()) usleep(1000);
    if (e != cudaSuccess) idle = false;
  }
  (void)cudaGetLastError();
  if (!idle) return;  // leaked: freeing memory a copy may still use would corrupt it
  for (const auto& slot : slots_) {
    if (slot->host != nullptr) (void)cudaFreeHost(slot->host);
    if (slot->input_word != nullptr) (void)cudaFreeHost(slot->input_word);
    if (slot->done != nullptr) (void)cudaEventDestroy(slot->done);
  }
  for (void* host : retired_) (void)cudaFreeHost(host);
  if (word_ != nullptr) (void)cudaFreeHost(word_);
  (void)cudaGetLastError();
}

Status DeviceStager::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void DeviceStager::Publish(uint32_t value) { __atomic_store_n(word_, value, __ATOMIC_RELEASE); }

Status DeviceStager::Break(const Status& s) {
  if (broken_.ok()) broken_ = s.Annotate("CUDA staging is broken");
  Publish(order_.ReleaseAll());
  return broken_;
}

void DeviceStager::ReleaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  Publish(order_.ReleaseAll());
}

Status DeviceStager::RefreshBusy() {
  for (const auto& slot : slots_) {
    if (!slot->busy) continue;
    const cudaError_t e = cudaEventQuery(slot->done);
    if (e == cudaSuccess) {
      slot->busy = false;
    } else if (e != cudaErrorNotReady) {
      return CudaCall(e, "cudaEventQuery (staging slot)");
    }
  }
  return Status::Ok();
}

// Picks (allocating or growing if needed) a slot of at least `bytes`. Waiting for a busy
// slot happens with the lock released, so the proxy can finish operations meanwhile.
Status DeviceStager::ChooseAndPrepareSlot(size_t bytes, const std::vector<size_t>& reserved,
                                          std::unique_lock<std::mutex>* lock, size_t* index) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms_);
  for (;;) {
    TESSERA_RETURN_IF_ERROR(RefreshBusy());
    std::vector<SlotState> states;
    for (const auto& slot : slots_) states.push_back(SlotState{slot->capacity, slot->busy, slot->last_seq});
    // A slot reserved by this group looks busy and newest: never reused, never waited for.
    for (size_t r : reserved) states[r] = SlotState{states[r].capacity, true, order_.NextToIssue()};
    const SlotChoice choice = ChooseSlot(states, bytes, kMaxSlots, order_.NextToIssue());
    if (choice.action == SlotAction::kWaitFor) {
      cudaEvent_t done = slots_[choice.index]->done;
      lock->unlock();
      cudaError_t e;
      while ((e = cudaEventQuery(done)) == cudaErrorNotReady && !deadline.Expired()) usleep(100);
      lock->lock();
      if (e == cudaErrorNotReady) {
        return TimeoutError("all " + std::to_string(kMaxSlots) +
                            " staging buffers stayed in use by earlier operations' streams for the timeout");
      }
      TESSERA_RETURN_IF_ERROR(CudaCall(e, "cudaEventQuery (staging slot)"));
      continue;
    }
    DeviceGuard guard(device_);
    TESSERA_RETURN_IF_ERROR(guard.status());
    if (choice.action == SlotAction::kAllocate) {
      std::unique_ptr<Slot> slot(new Slot());
      TESSERA_RETURN_IF_ERROR(
          AllocateWord(order_.published(), "a staging slot's input word", &slot->input_word, &slot->input_word_device));
      const Status s = CudaCall(cudaEventCreateWithFlags(&slot->done, cudaEventDisableTiming), "cudaEventCreate");
      if (!s.ok()) {
        (void)cudaFreeHost(slot->input_word);
        return s;
      }
      slots_.push_back(std::move(slot));
    } else if (choice.action == SlotAction::kGrow) {
      Slot* slot = slots_[choice.index].get();
      if (slot->host != nullptr) retired_.push_back(slot->host);  // see retired_
      slot->host = nullptr;
      slot->capacity = 0;
    }
    Slot* slot = slots_[choice.index].get();
    if (choice.action != SlotAction::kReuse && choice.bytes > 0) {
      TESSERA_RETURN_IF_ERROR(CudaCall(cudaHostAlloc(&slot->host, choice.bytes, cudaHostAllocPortable),
                                       "cudaHostAlloc of a " + std::to_string(choice.bytes) + "-byte staging buffer"));
      slot->capacity = choice.bytes;
    }
    *index = choice.index;
    return Status::Ok();
  }
}

Status DeviceStager::Stage(const StagingRequest& req, void* stream, StagedOp* out) {
  std::vector<StagedOp> ops;
  TESSERA_RETURN_IF_ERROR(StageGroup({req}, {stream}, &ops));
  *out = ops[0];
  return Status::Ok();
}

Status DeviceStager::StageGroup(const std::vector<StagingRequest>& reqs, const std::vector<void*>& streams,
                                std::vector<StagedOp>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  TESSERA_RETURN_IF_ERROR(broken_);
  if (streams.size() != reqs.size()) return InternalError("StageGroup: one stream per request");
  // Check every request and lay out each stream's share before any stream gets work.
  struct Part {
    void* stream;
    std::vector<size_t> requests;  // indices into reqs
    std::vector<Layout> layouts;   // offsets within the part's slot
    size_t bytes = 0;
    size_t slot = 0;
  };
  std::vector<Part> parts;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const StagingRequest& req = reqs[i];
    MemoryKind send_kind, recv_kind, scalar_kind;
    int send_dev, recv_dev, scalar_dev;
    TESSERA_RETURN_IF_ERROR(Classify(req.send, req.send_bytes, &send_kind, &send_dev));
    TESSERA_RETURN_IF_ERROR(Classify(req.recv, req.recv_bytes, &recv_kind, &recv_dev));
    TESSERA_RETURN_IF_ERROR(Classify(req.scalar, req.scalar_bytes, &scalar_kind, &scalar_dev));
    TESSERA_RETURN_IF_ERROR(CheckDevice("sendbuff", send_kind, send_dev, device_));
    TESSERA_RETURN_IF_ERROR(CheckDevice("recvbuff", recv_kind, recv_dev, device_));
    TESSERA_RETURN_IF_ERROR(CheckDevice("the PreMulSum scalar", scalar_kind, scalar_dev, device_));
    Layout layout;
    TESSERA_RETURN_IF_ERROR(PlanLayout(req, IsStaged(send_kind), IsStaged(recv_kind), IsStaged(scalar_kind), &layout));
    auto part = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.stream == streams[i]; });
    if (part == parts.end()) {
      if (parts.size() == kMaxSlots) {
        return InvalidUsage("a group may use at most " + std::to_string(kMaxSlots) + " distinct CUDA streams");
      }
      parts.push_back(Part{streams[i], {}, {}, 0, 0});
      part = parts.end() - 1;
    }
    layout.send_at += part->bytes;
    layout.recv_at += part->bytes;
    layout.scalar_at += part->bytes;
    part->bytes += layout.bytes;
    part->requests.push_back(i);
    part->layouts.push_back(layout);
  }
  std::vector<size_t> reserved;
  for (Part& part : parts) {
    TESSERA_RETURN_IF_ERROR(ChooseAndPrepareSlot(part.bytes, reserved, &lock, &part.slot));
    TESSERA_RETURN_IF_ERROR(broken_);  // the lock was released while waiting for a slot
    reserved.push_back(part.slot);
  }

  // From here on the streams receive work: a failure breaks the stager.
  const uint32_t seq = order_.NextToIssue();
  const std::string what = "staging operation " + std::to_string(seq) + ": ";
  const auto wait_value = reinterpret_cast<PFN_cuStreamWaitValue32_v11070>(wait_value_fn_);
  const auto write_value = reinterpret_cast<PFN_cuStreamWriteValue32_v11070>(write_value_fn_);
  bool committed = false;
  out->assign(reqs.size(), StagedOp());
  for (const Part& part : parts) {
    Slot* slot = slots_[part.slot].get();
    char* host = static_cast<char*>(slot->host);
    const cudaStream_t s = static_cast<cudaStream_t>(part.stream);
    for (size_t k = 0; k < part.requests.size(); ++k) {
      const StagingRequest& req = reqs[part.requests[k]];
      const Layout& l = part.layouts[k];
      if (l.send) {
        Status st = CudaCall(cudaMemcpyAsync(host + l.send_at, req.send, req.send_bytes, cudaMemcpyDeviceToHost, s),
                             what + "cudaMemcpyAsync of sendbuff to the host");
        if (!st.ok()) return Break(st);
      }
      if (l.scalar) {
        Status st = CudaCall(cudaMemcpyAsync(host + l.scalar_at, req.scalar, req.scalar_bytes, cudaMemcpyDeviceToHost, s),
                             what + "cudaMemcpyAsync of the scalar to the host");
        if (!st.ok()) return Break(st);
      }
    }
    // The default flags fence the write behind the copies before it.
    CUresult r = write_value(reinterpret_cast<CUstream>(part.stream), static_cast<CUdeviceptr>(slot->input_word_device),
                             seq, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS) {
      return Break(Status(Code::kCudaError, what + "cuStreamWriteValue32 failed with CUresult " + std::to_string(r)));
    }
    r = wait_value(reinterpret_cast<CUstream>(part.stream), static_cast<CUdeviceptr>(word_device_), seq,
                                  CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
      return Break(Status(Code::kCudaError, what + "cuStreamWaitValue32 failed with CUresult " + std::to_string(r)));
    }
    if (!committed) order_.CommitIssue();  // once a stream waits for seq, seq must be finished
    committed = true;
    for (size_t k = 0; k < part.requests.size(); ++k) {
      const StagingRequest& req = reqs[part.requests[k]];
      const Layout& l = part.layouts[k];
      if (l.recv) {
        const Status st = CudaCall(cudaMemcpyAsync(req.recv, host + l.recv_at, req.recv_bytes, cudaMemcpyHostToDevice, s),
                      what + "cudaMemcpyAsync of the results to recvbuff");
        if (!st.ok()) return Break(st);
      }
      StagedOp& op = (*out)[part.requests[k]];
      op.seq = seq;
      op.slot = part.slot;
      op.host_send = l.send ? host + l.send_at : req.send_bytes > 0 ? req.send : nullptr;
      op.host_recv = l.recv ? static_cast<void*>(host + l.recv_at) : req.recv_bytes > 0 ? req.recv : nullptr;
      op.host_scalar = l.scalar ? host + l.scalar_at : req.scalar_bytes > 0 ? req.scalar : nullptr;
    }
    const Status st = CudaCall(cudaEventRecord(slot->done, s), what + "cudaEventRecord (results copied back)");
    if (!st.ok()) return Break(st);
    slot->busy = true;
    slot->last_seq = seq;
  }
  return Status::Ok();
}

Status DeviceStager::WaitInput(const StagedOp& op, const Deadline& deadline, const std::atomic<bool>* abort) {
  const uint32_t* input_word;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(broken_);
    if (op.slot >= slots_.size()) return InternalError("WaitInput: no staging slot " + std::to_string(op.slot));
    input_word = slots_[op.slot]->input_word;
  }
  const std::string what = "waiting for the stream to reach staged operation " + std::to_string(op.seq);
  return PollUntil(
      [&](bool* done) {
        *done = SequenceReached(__atomic_load_n(input_word, __ATOMIC_ACQUIRE), op.seq);
        return Status::Ok();
      },
      deadline, abort, what, "the stream did not get there within the timeout");
}

Status DeviceStager::Finish(const StagedOp& op) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t publish = 0;
  const Status s = order_.Finish(op.seq, &publish);
  Publish(publish);
  return s;
}

}  // namespace cuda
}  // namespace tessera
