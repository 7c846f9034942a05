// DevicePath (device_path.h): device buffers and CUDA streams in the communicator's calls.
// One source, two builds: without TESSERA_WITH_CUDA the CPU answers at the end of this
// file (nothing staged, streams refused); with it, the staged path:
//
//   caller's thread (Submit)              proxy thread (one task per call or group part)
//   classify every buffer and scalar      WaitInput for every staged operation
//   StageGroup: copies to pinned memory,  copy device PreMulSum scalars to their cells
//     a GPU-side wait, copies back        run the host operations as one group (run)
//   post the task, return                 Finish: every stream of the call continues
//
// A device-resident batch (ChooseDeviceResident) stages nothing but the ordering (no
// copies), and its task runs Communicator::RunGroupOnDevice on the device buffers,
// creating the CUDA engine and the cuda_ipc links on the first one.
#include "comm/device_path.h"

#include <string>

#include "comm/async_worker.h"
#include "comm/communicator.h"

#ifdef TESSERA_WITH_CUDA
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "base/deadline.h"
#include "base/settings.h"
#include "cuda/availability.h"
#include "cuda/cuda_device_engine.h"
#include "cuda/device_buffers.h"
#endif

namespace tessera {

OperationBytes BytesOf(const Operation& op, int rank, int nranks) {
  const size_t n = op.count * SizeOf(op.type), all = n * static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  switch (op.kind) {
    case OpKind::kAllReduce: return {n, n};
    case OpKind::kBroadcast: return {root ? n : 0, n};
    case OpKind::kReduce: return {n, root ? n : 0};
    case OpKind::kAllGather: return {n, all};
    case OpKind::kReduceScatter: return {all, n};
    case OpKind::kAlltoAll: return {all, all};
    case OpKind::kGather: return {n, root ? all : 0};
    case OpKind::kScatter: return {root ? all : 0, n};
    case OpKind::kSend: return {n, 0};
    case OpKind::kRecv: return {0, n};
  }
  return {};
}

namespace {

// Whether is_device(buffer, bytes) holds for every buffer the operations use on `rank`.
template <typename IsDevice>
bool EveryBufferIs(const std::vector<Operation>& ops, int rank, int nranks, IsDevice is_device) {
  for (const Operation& op : ops) {
    const OperationBytes bytes = BytesOf(op, rank, nranks);
    if (bytes.send > 0 && !is_device(op.send, bytes.send)) return false;
    if (bytes.recv > 0 && !is_device(op.recv, bytes.recv)) return false;
  }
  return true;
}

}  // namespace

bool RunsOnDevice(const std::vector<Operation>& ops, int rank, int nranks, const DeviceEngine& engine) {
  return EveryBufferIs(ops, rank, nranks, [&](const void* p, size_t n) { return engine.IsDeviceMemory(p, n); });
}

#ifndef TESSERA_WITH_CUDA

// --- The CPU build: nothing is staged ------------------------------------------------

struct DevicePath::State {};

DevicePath::DevicePath() = default;
DevicePath::~DevicePath() = default;

Status DevicePath::CheckStream(const void* stream) {
  if (stream != nullptr) return InvalidArgument("stream must be NULL on this CPU build");
  return Status::Ok();
}

Status DevicePath::Submit(const DeviceBatch&, bool* taken) {
  *taken = false;
  return Status::Ok();
}

Status DevicePath::CreatePreMulSum(Communicator* comm, const void* scalar, DataType type, bool read_now, int* op) {
  return comm->CreatePreMulSum(scalar, type, read_now, op);
}

Status DevicePath::DestroyRedOp(Communicator* comm, int op) { return comm->DestroyRedOp(op); }

Status DevicePath::WaitForHostBuffers() { return Status::Ok(); }
void DevicePath::WaitIdle() {}
void DevicePath::Abort() {}
Status DevicePath::async_error() const { return Status::Ok(); }

#else  // TESSERA_WITH_CUDA

// --- The CUDA build --------------------------------------------------------------------

namespace {

// A PreMulSum scalar in device memory: the communicator reads `cell`, a host copy that
// the proxy fills from the staged scalar before each call that uses the operator.
struct DeviceScalar {
  const void* device = nullptr;
  size_t bytes = 0;
  std::unique_ptr<double> cell;  // 8 bytes: room for any datatype
};

// Whether `p` (of `bytes`, 0: unused) is device or managed memory; *device its device.
Status IsDeviceMemory(const void* p, size_t bytes, bool* staged, int* device) {
  *staged = false;
  if (p == nullptr || bytes == 0) return Status::Ok();
  cuda::MemoryKind kind;
  int dev = -1;
  TESSERA_RETURN_IF_ERROR(cuda::ClassifyPointer(p, &kind, &dev));
  *staged = cuda::IsStaged(kind);
  if (*staged && *device < 0) *device = dev;
  return Status::Ok();
}

// Whether a batch runs device-resident (device_path.h): the communicator allows it and
// every operation's buffers are device memory of `device`. A batch that does not is
// staged whole.
bool ChooseDeviceResident(const DeviceBatch& batch, int device) {
  if (batch.comm == nullptr || device < 0 || !batch.comm->device_resident_possible()) return false;
  DeviceEngine* engine = batch.comm->device_engine();
  if (engine != nullptr) return RunsOnDevice(batch.ops, batch.rank, batch.nranks, *engine);
  // Before the first device-resident call there is no engine yet: the same rule, asking
  // CUDA directly.
  return EveryBufferIs(batch.ops, batch.rank, batch.nranks, [device](const void* p, size_t) {
    cuda::MemoryKind kind;
    int dev = -1;
    return cuda::ClassifyPointer(p, &kind, &dev).ok() && kind == cuda::MemoryKind::kDevice && dev == device;
  });
}

// The proxy's part of a device-resident batch: the links on first use, then the run.
Status RunDeviceResident(Communicator* comm, int device, const std::vector<Operation>& ops) {
  if (comm->device_engine() == nullptr) {
    std::unique_ptr<cuda::CudaDeviceEngine> engine;
    TESSERA_RETURN_IF_ERROR(cuda::CudaDeviceEngine::Create(device, &engine));
    TESSERA_RETURN_IF_ERROR(comm->EnableDeviceLinks(std::move(engine)));
  }
  return comm->RunGroupOnDevice(ops);
}

}  // namespace

struct DevicePath::State {
  mutable std::mutex mu;
  int64_t timeout_ms = 0;
  std::unique_ptr<cuda::DeviceStager> stager;  // created by the first staged call
  std::unique_ptr<AsyncWorker> proxy;          // a blocking communicator's proxy thread
  std::atomic<bool> aborted{false};
  Status failed;                               // sticky: staged work that could not run
  std::map<int, DeviceScalar> scalars;         // PreMulSum operators with device scalars
  std::map<int, int> uses;                     // operator -> queued staged calls using it
  std::map<int, Communicator*> destroying;     // destroyed while in use: after those calls
  std::shared_ptr<Status> host_result;         // see WaitForHostBuffers

  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (failed.ok()) failed = s;
  }

  // After a task: forgets its uses of operators and destroys those waiting for it.
  void ReleaseUses(const std::vector<int>& ops) {
    std::vector<std::pair<int, Communicator*>> ready;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int op : ops) {
        if (--uses[op] > 0) continue;
        uses.erase(op);
        auto it = destroying.find(op);
        if (it == destroying.end()) continue;
        ready.push_back(*it);
        destroying.erase(it);
        scalars.erase(op);
      }
    }
    for (auto& [op, comm] : ready) (void)comm->DestroyRedOp(op);  // known to exist
  }
};

DevicePath::DevicePath() : state_(new State()) {}

DevicePath::~DevicePath() {
  state_->proxy.reset();   // runs what is queued: each part is bounded by the timeout
  state_->stager.reset();  // releases every stream, waits for them (bounded), frees
}

Status DevicePath::CheckStream(const void* stream) {
  if (stream == nullptr) return Status::Ok();
  const Status usable = cuda::CudaUsable();
  if (!usable.ok()) return InvalidArgument("stream must be NULL: this process cannot use CUDA (" + usable.message() + ")");
  return Status::Ok();
}

Status DevicePath::Submit(const DeviceBatch& batch, bool* taken) {
  *taken = !cuda::CudaUsable().ok() ? false : true;  // without CUDA no device memory exists
  if (!*taken) return Status::Ok();
  State& st = *state_;
  const size_t n = batch.ops.size();
  if (batch.streams.size() != n) return InternalError("DevicePath::Submit: one stream per operation");

  // Which operations are staged: a stream, or a device buffer or scalar.
  std::vector<cuda::StagingRequest> reqs;
  std::vector<void*> streams;
  std::vector<size_t> staged_index;  // reqs[k] is batch.ops[staged_index[k]]
  struct Cell {
    size_t request;  // index into reqs
    double* cell;    // where the communicator reads the scalar
    size_t bytes;
  };
  std::vector<Cell> cells;
  bool host_on_null = false, staged_on_null = false, any_stream = false;
  int device = -1;
  for (size_t i = 0; i < n; ++i) {
    const Operation& op = batch.ops[i];
    const OperationBytes bytes = BytesOf(op, batch.rank, batch.nranks);
    cuda::StagingRequest req;
    req.send = op.send;
    req.send_bytes = bytes.send;
    req.recv = op.recv;
    req.recv_bytes = bytes.recv;
    double* cell = nullptr;
    if (IsReduction(op.kind)) {
      std::lock_guard<std::mutex> lock(st.mu);
      auto it = st.scalars.find(op.op);
      if (it != st.scalars.end()) {
        req.scalar = it->second.device;
        req.scalar_bytes = it->second.bytes;
        cell = it->second.cell.get();
      }
    }
    bool send_dev = false, recv_dev = false, scalar_dev = false;
    TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.send, req.send_bytes, &send_dev, &device).Annotate("sendbuff"));
    TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.recv, req.recv_bytes, &recv_dev, &device).Annotate("recvbuff"));
    TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.scalar, req.scalar_bytes, &scalar_dev, &device).Annotate("scalar"));
    const bool on_device = send_dev || recv_dev || scalar_dev;
    if (batch.streams[i] != nullptr) any_stream = true;
    if (batch.streams[i] == nullptr && !on_device) {
      host_on_null = true;
      continue;
    }
    if (batch.streams[i] == nullptr) staged_on_null = true;
    if (cell != nullptr) cells.push_back({reqs.size(), cell, req.scalar_bytes});
    reqs.push_back(req);
    streams.push_back(batch.streams[i]);
    staged_index.push_back(i);
  }

  if (reqs.empty()) {
    // Host work on the NULL stream: as on the CPU build, after the staged calls queued
    // before it (a blocking communicator's proxy; a worker keeps the order itself).
    AsyncWorker* proxy = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      proxy = st.proxy.get();
    }
    if (batch.worker == nullptr && proxy != nullptr) proxy->WaitIdle();
    std::lock_guard<std::mutex> lock(st.mu);
    *taken = !st.failed.ok();
    return st.failed;
  }

  if (staged_on_null && any_stream) {
    return InvalidUsage(
        "a group cannot stage device buffers on the NULL stream (CUDA's legacy default stream) beside other "
        "streams: the legacy stream's implicit synchronisation would wait for the group itself; pass the stream");
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    TESSERA_RETURN_IF_ERROR(st.failed);
  }
  if (!st.stager) {
    if (device < 0) TESSERA_RETURN_IF_ERROR(cuda::CurrentDevice(&device));
    Settings settings;
    TESSERA_RETURN_IF_ERROR(Settings::FromEnvironment(&settings));
    std::unique_ptr<cuda::DeviceStager> stager;
    TESSERA_RETURN_IF_ERROR(cuda::DeviceStager::Create(device, settings.timeout_ms, &stager));
    std::lock_guard<std::mutex> lock(st.mu);
    st.timeout_ms = settings.timeout_ms;
    st.stager = std::move(stager);
  }
  AsyncWorker* proxy = batch.worker;
  if (proxy == nullptr) {
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.proxy) st.proxy.reset(new AsyncWorker());
    proxy = st.proxy.get();
  }

  // Device-resident: the streams get only the ordering (input event, GPU-side wait,
  // done event); the collective runs on the device buffers themselves.
  device = st.stager->device();
  const bool resident = ChooseDeviceResident(batch, device);
  if (resident) {
    for (cuda::StagingRequest& req : reqs) {
      req.send_bytes = 0;
      req.recv_bytes = 0;
    }
  }
  std::vector<cuda::StagedOp> staged;
  Status s = st.stager->StageGroup(reqs, streams, &staged);
  if (!s.ok()) {
    // A bad argument leaves nothing behind; anything else means this rank misses a call
    // that its peers make, so later calls must fail too.
    if (s.code() != Code::kInvalidArgument && s.code() != Code::kInvalidUsage) st.Fail(s);
    return s;
  }
  std::vector<Operation> host_ops = batch.ops;
  for (size_t k = 0; k < staged.size() && !resident; ++k) {
    host_ops[staged_index[k]].send = staged[k].host_send;
    host_ops[staged_index[k]].recv = staged[k].host_recv;
  }
  std::vector<int> custom_ops;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    for (const Operation& op : batch.ops) {
      if (IsReduction(op.kind) && op.op >= kNumRedOps) {
        ++st.uses[op.op];
        custom_ops.push_back(op.op);
      }
    }
  }

  State* state = &st;
  auto run = batch.run;
  Communicator* comm = batch.comm;
  auto task = [state, staged, host_ops, cells, custom_ops, run, resident, comm, device]() -> Status {
    const Deadline deadline = Deadline::AfterMs(state->timeout_ms);
    Status ready;
    for (const cuda::StagedOp& op : staged) {
      ready = state->stager->WaitInput(op, deadline, &state->aborted);
      if (!ready.ok()) break;
    }
    if (ready.ok()) {
      for (const Cell& c : cells) std::memcpy(c.cell, staged[c.request].host_scalar, c.bytes);
    } else {
      state->Fail(ready);
    }
    // A device-resident run reports through `run` too (an empty group after it).
    Status result = resident ? run(ready.ok() ? RunDeviceResident(comm, device, host_ops) : ready, {})
                             : run(ready, host_ops);
    for (const cuda::StagedOp& op : staged) {
      const Status f = state->stager->Finish(op);
      if (!f.ok() && result.ok()) result = f;
    }
    state->ReleaseUses(custom_ops);
    return result;
  };
  if (batch.worker != nullptr) {
    proxy->Post(task);
    return Status(Code::kInProgress, "staged on the communicator's worker");
  }
  if (!host_on_null) {
    proxy->Post(task);
    return Status::Ok();
  }
  // A host operation on the NULL stream completes before the call returns: the caller
  // waits in WaitForHostBuffers (after GroupEnd has handed every communicator its part).
  auto result = std::make_shared<Status>(RemoteError("the communicator was aborted before the call ran"));
  proxy->Post([task, result] {
    *result = task();
    return *result;
  });
  std::lock_guard<std::mutex> lock(st.mu);
  st.host_result = result;
  return Status::Ok();
}

Status DevicePath::WaitForHostBuffers() {
  std::shared_ptr<Status> result;
  AsyncWorker* proxy = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    result.swap(state_->host_result);
    proxy = state_->proxy.get();
  }
  if (result == nullptr || proxy == nullptr) return Status::Ok();
  proxy->WaitIdle();
  return *result;
}

Status DevicePath::CreatePreMulSum(Communicator* comm, const void* scalar, DataType type, bool read_now, int* op) {
  bool on_device = false;
  int device = -1;
  if (cuda::CudaUsable().ok()) TESSERA_RETURN_IF_ERROR(IsDeviceMemory(scalar, SizeOf(type), &on_device, &device));
  if (!on_device) return comm->CreatePreMulSum(scalar, type, read_now, op);
  if (read_now) {
    return InvalidArgument("scalar is device memory, but residence tesseraScalarHostImmediate says host memory");
  }
  DeviceScalar d;
  d.device = scalar;
  d.bytes = SizeOf(type);
  d.cell.reset(new double(0));
  TESSERA_RETURN_IF_ERROR(comm->CreatePreMulSum(d.cell.get(), type, false, op));
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->scalars[*op] = std::move(d);
  return Status::Ok();
}

Status DevicePath::DestroyRedOp(Communicator* comm, int op) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->uses.count(op) != 0) {
      if (state_->destroying.count(op) != 0) {
        return InvalidArgument("op " + std::to_string(op) + " was already destroyed");
      }
      state_->destroying[op] = comm;
      return Status::Ok();
    }
  }
  TESSERA_RETURN_IF_ERROR(comm->DestroyRedOp(op));
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->scalars.erase(op);
  return Status::Ok();
}

void DevicePath::WaitIdle() {
  AsyncWorker* proxy = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    proxy = state_->proxy.get();
  }
  if (proxy != nullptr) proxy->WaitIdle();
}

void DevicePath::Abort() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->aborted.store(true);
  if (state_->proxy) state_->proxy->DropPending();
  if (state_->stager) state_->stager->ReleaseAll();
}

Status DevicePath::async_error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->failed.ok()) return state_->failed;
  if (!state_->proxy) return Status::Ok();
  const Status s = state_->proxy->state();
  return s.code() == Code::kInProgress ? Status::Ok() : s;
}

#endif  // TESSERA_WITH_CUDA

}  // namespace tessera
