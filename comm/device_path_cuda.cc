// The device path of the CUDA build (device_path.h). Submit takes three steps:
//
//   1. classify  every buffer and scalar: host, or device/managed memory (and its
//                device); which operations are staged; the NULL-stream rule
//   2. plan      host (nothing staged: the C API runs it), alone (one rank: a copy on
//                the stream, RunsAlone), device-resident (ChooseDeviceResident), or
//                staged (then the stager and proxy exist)
//   3. enqueue   staged: StageGroup on the streams, one task to the proxy; a batch with
//                a host operation on the NULL stream makes the call wait for it.
//                device-resident: RunResident on the caller's thread
//
//   caller's thread (Submit)              proxy thread (one task per call or group part)
//   StageGroup: copies to pinned memory,  WaitInput for every staged operation
//     the input word, a GPU-side wait,    copy device PreMulSum scalars to their cells
//     copies back                         run the operations as one group on the
//   post the task, return                 communicator, report the result
//                                         Finish: every stream of the call continues
// The proxy makes no CUDA call while it runs a task (cuda/device_buffers.h says why).
//
// A device-resident batch stages nothing: the caller's thread runs the earlier staged
// calls out (WaitIdle), waits until its streams reach the call, reads device PreMulSum
// scalars, and runs Communicator::RunGroupOnDevice on the device buffers, over the
// engine and device links that Attach gave the communicator at its creation.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/deadline.h"
#include "base/log.h"
#include "comm/async_worker.h"
#include "comm/communicator.h"
#include "comm/device_path.h"
#include "cuda/availability.h"
#include "cuda/cuda_device_engine.h"
#include "cuda/device_buffers.h"

namespace tessera {
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

// Whether any buffer of `req`, or its scalar, is device or managed memory: then the
// operation is staged. The first device found becomes *device.
Status AnyOnDevice(const cuda::StagingRequest& req, int* device, bool* on_device) {
  bool send = false, recv = false, scalar = false;
  TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.send, req.send_bytes, &send, device).Annotate("sendbuff"));
  TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.recv, req.recv_bytes, &recv, device).Annotate("recvbuff"));
  TESSERA_RETURN_IF_ERROR(IsDeviceMemory(req.scalar, req.scalar_bytes, &scalar, device).Annotate("scalar"));
  *on_device = send || recv || scalar;
  return Status::Ok();
}

// A staged device scalar: the proxy copies it into `cell` before the run.
struct ScalarCell {
  size_t request;  // index into Classified::requests
  double* cell;    // where the communicator reads the scalar
  size_t bytes;
};

// Step 1, classify: the staged operations of a batch (a stream, or a device or managed
// buffer or scalar), and whether host operations on the NULL stream sit beside them.
struct Classified {
  std::vector<cuda::StagingRequest> requests;
  std::vector<void*> streams;  // streams[k] is requests[k]'s
  std::vector<size_t> index;   // requests[k] is batch.ops[index[k]]
  std::vector<ScalarCell> cells;
  bool host_on_null = false;  // then the call completes before it returns
  int device = -1;            // the device of the first device buffer or scalar; -1: none
};

// Step 2, plan: how a batch runs.
enum class Route {
  kHost,      // nothing staged: the C API runs it, as on the CPU build
  kAlone,     // one rank: each operation is a copy on its stream (RunsAlone)
  kStaged,    // through pinned host memory, the host collective on the proxy
  kResident,  // on the device buffers themselves, on the caller's thread (RunResident)
};
struct Plan {
  Route route = Route::kHost;
  AsyncWorker* proxy = nullptr;  // the thread that runs the batch
  std::vector<size_t> sources;   // kAlone: AloneSources's answer
};

// Step 3, enqueue: what the proxy needs to run a staged batch.
struct ProxyBatch {
  std::vector<cuda::StagedOp> staged;  // StageGroup's answer, one per request
  std::vector<Operation> ops;          // with the pinned buffers in place
  std::vector<ScalarCell> cells;
  std::vector<int> custom_ops;  // PreMulSum operators it uses (DestroyRedOp waits)
  std::function<void(const Status&)> report;
};

// A one-rank batch as copies (RunsAlone): for each request, the request whose sendbuff
// its recvbuff receives: itself for a collective, for a receive the send it pairs with
// (the k-th receive gets the k-th send, as NCCL matches a rank's sends to itself), none
// for a send. False when the sends and receives do not pair up (number, bytes, stream).
constexpr size_t kNoSource = SIZE_MAX;
bool AloneSources(const DeviceBatch& batch, const Classified& c, std::vector<size_t>* sources) {
  std::vector<size_t> sends, recvs;
  sources->assign(c.requests.size(), kNoSource);
  for (size_t k = 0; k < c.requests.size(); ++k) {
    const OpKind kind = batch.ops[c.index[k]].kind;
    if (kind == OpKind::kSend) {
      sends.push_back(k);
    } else if (kind == OpKind::kRecv) {
      recvs.push_back(k);
    } else {
      (*sources)[k] = k;
    }
  }
  if (sends.size() != recvs.size()) return false;
  for (size_t i = 0; i < sends.size(); ++i) {
    if (c.requests[sends[i]].send_bytes != c.requests[recvs[i]].recv_bytes) return false;
    if (c.streams[sends[i]] != c.streams[recvs[i]]) return false;
    (*sources)[recvs[i]] = sends[i];
  }
  return true;
}

// A communicator of one rank, blocking, every operation staged: each collective's result
// is its input (PreMulSum aside), and each receive gets its paired send, so the call is
// copies on its streams, as NCCL makes it, rather than a round trip through pinned host
// memory and the proxy. *sources: AloneSources's answer.
bool RunsAlone(const DeviceBatch& batch, const Classified& c, std::vector<size_t>* sources) {
  if (batch.nranks != 1 || batch.worker != nullptr || c.host_on_null || !c.cells.empty()) return false;
  for (const Operation& op : batch.ops) {
    if (!op.parts.empty()) return false;
    if (IsReduction(op.kind) && op.op >= kNumRedOps) return false;
  }
  return AloneSources(batch, c, sources);
}

// Whether a batch runs device-resident (device_path.h): a blocking communicator's batch
// that may wait on the caller's thread, the communicator has its engine and device links
// (DevicePath::Attach), and every operation's buffers are device memory of that engine.
// A batch that does not is staged whole.
bool ChooseDeviceResident(Communicator* comm, const DeviceBatch& batch) {
  if (batch.worker != nullptr || !batch.may_block) return false;
  if (comm == nullptr || comm->device_engine() == nullptr) return false;
  return RunsOnDevice(batch.ops, batch.rank, batch.nranks, *comm->device_engine());
}

// Whether this rank can run device-resident calls: usable CUDA and an engine on the
// current device (*engine).
Status CreateEngine(std::unique_ptr<cuda::CudaDeviceEngine>* engine) {
  TESSERA_RETURN_IF_ERROR(cuda::CudaUsable());
  int device = -1;
  TESSERA_RETURN_IF_ERROR(cuda::CurrentDevice(&device));
  return cuda::CudaDeviceEngine::Create(device, engine);
}

// Classify, plan, enqueue (the steps above).
class CudaDevicePath final : public DevicePath {
 public:
  CudaDevicePath(const std::atomic<Communicator*>* comm, int64_t timeout_ms) : comm_(comm), timeout_ms_(timeout_ms) {}
  ~CudaDevicePath() override;

  Status Submit(const DeviceBatch& batch, bool* handled) override;
  Status WaitForHostBuffers() override;
  Status CreatePreMulSum(Communicator* comm, const void* scalar, DataType type, bool read_now, int* op) override;
  Status DestroyRedOp(Communicator* comm, int op) override;
  void WaitIdle() override;
  void Abort() override;
  Status async_error() const override;

 private:
  Communicator* Comm() const { return comm_ == nullptr ? nullptr : comm_->load(std::memory_order_acquire); }

  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = s;
  }

  // Step 1 (Submit's caller thread).
  cuda::StagingRequest RequestOf(const Operation& op, const DeviceBatch& batch, double** cell);
  Status Classify(const DeviceBatch& batch, Classified* c);
  // Step 2.
  Status PlanBatch(const DeviceBatch& batch, const Classified& c, Plan* plan);
  Status CopyAlone(const Classified& c, const std::vector<size_t>& sources);
  Status StartStager(int device);
  AsyncWorker* ProxyFor(AsyncWorker* worker);
  Status AfterQueued(const DeviceBatch& batch, bool* handled);
  // Step 3.
  Status Enqueue(const DeviceBatch& batch, const Classified& c, const Plan& plan);
  Status Stage(const DeviceBatch& batch, const Classified& c, ProxyBatch* b);
  Status RunResident(const DeviceBatch& batch, const Classified& c);
  std::vector<int> AddUses(const std::vector<Operation>& ops);
  Status Post(const DeviceBatch& batch, const Classified& c, const Plan& plan, std::function<Status()> task);
  // The proxy thread.
  Status RunOnProxy(const ProxyBatch& b);
  Status WaitInputs(const ProxyBatch& b);
  Status RunBatch(const ProxyBatch& b);
  void WaitForProxy();
  void ReleaseUses(const std::vector<int>& ops);

  const std::atomic<Communicator*>* const comm_;  // read when used (DevicePath::Create)
  const int64_t timeout_ms_;                       // the communicator's settings
  mutable std::mutex mu_;
  std::unique_ptr<cuda::DeviceStager> stager_;  // created by the first staged call
  std::unique_ptr<AsyncWorker> proxy_;          // a blocking communicator's proxy thread
  std::atomic<bool> aborted_{false};
  Status failed_;                               // sticky: staged work that could not run
  std::map<int, DeviceScalar> scalars_;         // PreMulSum operators with device scalars
  std::map<int, int> uses_;                     // operator -> queued staged calls using it
  std::map<int, Communicator*> destroying_;     // destroyed while in use: after those calls
  std::shared_ptr<Status> host_result_;         // see WaitForHostBuffers
};

// --- Step 1: classify -------------------------------------------------------------------

// The request for one operation: the bytes it uses on this rank and, for a PreMulSum
// operator with a device scalar, the scalar and the host cell the communicator reads.
cuda::StagingRequest CudaDevicePath::RequestOf(const Operation& op, const DeviceBatch& batch, double** cell) {
  const OperationBytes bytes = BytesOf(op, batch.rank, batch.nranks);
  cuda::StagingRequest req;
  req.send = op.send;
  req.send_bytes = bytes.send;
  req.recv = op.recv;
  req.recv_bytes = bytes.recv;
  *cell = nullptr;
  if (!IsReduction(op.kind)) return req;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = scalars_.find(op.op);
  if (it == scalars_.end()) return req;
  req.scalar = it->second.device;
  req.scalar_bytes = it->second.bytes;
  *cell = it->second.cell.get();
  return req;
}

// Which operations are staged, and the NULL-stream rule: a group cannot stage on the
// NULL stream beside other streams.
Status CudaDevicePath::Classify(const DeviceBatch& batch, Classified* c) {
  bool staged_on_null = false, any_stream = false;
  for (size_t i = 0; i < batch.ops.size(); ++i) {
    double* cell = nullptr;
    const cuda::StagingRequest req = RequestOf(batch.ops[i], batch, &cell);
    bool on_device = false;
    TESSERA_RETURN_IF_ERROR(AnyOnDevice(req, &c->device, &on_device));
    void* stream = batch.streams[i];
    if (!batch.ops[i].parts.empty() && (stream != nullptr || on_device)) {
      return InvalidArgument("tesseraAllReduceParts takes host buffers on the NULL stream");
    }
    if (stream != nullptr) any_stream = true;
    if (stream == nullptr && !on_device) {
      c->host_on_null = true;
      continue;
    }
    if (stream == nullptr) staged_on_null = true;
    if (cell != nullptr) c->cells.push_back({c->requests.size(), cell, req.scalar_bytes});
    c->requests.push_back(req);
    c->streams.push_back(stream);
    c->index.push_back(i);
  }
  if (staged_on_null && any_stream) {
    return InvalidUsage(
        "a group cannot stage device buffers on the NULL stream (CUDA's legacy default stream) beside other "
        "streams: the legacy stream's implicit synchronisation would wait for the group itself; pass the stream");
  }
  return Status::Ok();
}

// --- Step 2: plan -----------------------------------------------------------------------

// Host when nothing is staged; otherwise, once staged work has not failed before, one
// rank alone, device-resident, or staged (then the stager and the proxy exist).
Status CudaDevicePath::PlanBatch(const DeviceBatch& batch, const Classified& c, Plan* plan) {
  if (c.requests.empty()) {
    plan->route = Route::kHost;
    return Status::Ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(failed_);
  }
  if (RunsAlone(batch, c, &plan->sources)) {
    plan->route = Route::kAlone;
    return Status::Ok();
  }
  if (ChooseDeviceResident(Comm(), batch)) {
    plan->route = Route::kResident;
    return Status::Ok();
  }
  TESSERA_RETURN_IF_ERROR(StartStager(c.device));
  plan->proxy = ProxyFor(batch.worker);
  plan->route = Route::kStaged;
  return Status::Ok();
}

// One rank (RunsAlone): recvbuff = its source's sendbuff on the stream; nothing in place.
// A failed copy leaves the stream without the call: later staged calls fail too.
Status CudaDevicePath::CopyAlone(const Classified& c, const std::vector<size_t>& sources) {
  for (size_t k = 0; k < c.requests.size(); ++k) {
    if (sources[k] == kNoSource) continue;
    const cuda::StagingRequest& req = c.requests[k];
    const void* from = c.requests[sources[k]].send;
    if (req.recv_bytes == 0 || req.recv == from) continue;
    const Status s = cuda::CopyOnStream(req.recv, from, req.recv_bytes, c.streams[k]);
    if (!s.ok()) {
      Fail(s);
      return s;
    }
  }
  return Status::Ok();
}

// The first staged call creates the stager, on the device of its first device buffer
// (the current device when it names only a stream).
Status CudaDevicePath::StartStager(int device) {
  if (stager_) return Status::Ok();
  if (device < 0) TESSERA_RETURN_IF_ERROR(cuda::CurrentDevice(&device));
  std::unique_ptr<cuda::DeviceStager> created;
  TESSERA_RETURN_IF_ERROR(cuda::DeviceStager::Create(device, timeout_ms_, &created));
  std::lock_guard<std::mutex> lock(mu_);
  stager_ = std::move(created);
  return Status::Ok();
}

// A non-blocking communicator's worker, else this path's own thread (created once).
AsyncWorker* CudaDevicePath::ProxyFor(AsyncWorker* worker) {
  if (worker != nullptr) return worker;
  std::lock_guard<std::mutex> lock(mu_);
  if (!proxy_) proxy_.reset(new AsyncWorker());
  return proxy_.get();
}

// The host route: as on the CPU build, after the staged calls queued before it (a
// blocking communicator's proxy; a worker keeps the order itself). Handled here only to
// return the sticky failure of staged work.
Status CudaDevicePath::AfterQueued(const DeviceBatch& batch, bool* handled) {
  if (batch.worker == nullptr) WaitForProxy();
  std::lock_guard<std::mutex> lock(mu_);
  *handled = !failed_.ok();
  return failed_;
}

// --- Step 3: enqueue --------------------------------------------------------------------

Status CudaDevicePath::Enqueue(const DeviceBatch& batch, const Classified& c, const Plan& plan) {
  ProxyBatch b;
  TESSERA_RETURN_IF_ERROR(Stage(batch, c, &b));
  b.custom_ops = AddUses(batch.ops);
  return Post(batch, c, plan, [this, b] { return RunOnProxy(b); });
}

// StageGroup on the streams: copies to pinned memory, the input word, the GPU-side
// wait, the copies back.
Status CudaDevicePath::Stage(const DeviceBatch& batch, const Classified& c, ProxyBatch* b) {
  const Status s = stager_->StageGroup(c.requests, c.streams, &b->staged);
  if (!s.ok()) {
    // A bad argument leaves nothing behind; anything else means this rank misses a call
    // that its peers make, so later calls must fail too.
    if (s.code() != Code::kInvalidArgument && s.code() != Code::kInvalidUsage) Fail(s);
    return s;
  }
  b->ops = batch.ops;
  for (size_t k = 0; k < b->staged.size(); ++k) {
    b->ops[c.index[k]].send = b->staged[k].host_send;
    b->ops[c.index[k]].recv = b->staged[k].host_recv;
  }
  b->cells = c.cells;
  b->report = batch.report;
  return Status::Ok();
}

// Counts the batch's uses of PreMulSum operators, which ReleaseUses forgets after it.
std::vector<int> CudaDevicePath::AddUses(const std::vector<Operation>& ops) {
  std::vector<int> custom_ops;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Operation& op : ops) {
    if (IsReduction(op.kind) && op.op >= kNumRedOps) {
      ++uses_[op.op];
      custom_ops.push_back(op.op);
    }
  }
  return custom_ops;
}

// On a worker the call answers InProgress. A staged batch with a host operation on the
// NULL stream completes before the call returns: the caller waits in WaitForHostBuffers
// (after GroupEnd has handed every communicator its part).
Status CudaDevicePath::Post(const DeviceBatch& batch, const Classified& c, const Plan& plan,
                               std::function<Status()> task) {
  if (batch.worker != nullptr) {
    plan.proxy->Post(task);
    return Status(Code::kInProgress, "staged on the communicator's worker");
  }
  if (!c.host_on_null) {
    plan.proxy->Post(task);
    return Status::Ok();
  }
  auto result = std::make_shared<Status>(RemoteError("the communicator was aborted before the call ran"));
  plan.proxy->Post([task, result] {
    *result = task();
    return *result;
  });
  std::lock_guard<std::mutex> lock(mu_);
  host_result_ = result;
  return Status::Ok();
}

// --- The proxy thread -------------------------------------------------------------------

// Waits for the inputs, runs the batch, reports, then lets every stream continue (also
// after a failure) and releases the operators.
Status CudaDevicePath::RunOnProxy(const ProxyBatch& b) {
  const Status ready = WaitInputs(b);
  Status result = ready.ok() ? RunBatch(b) : ready;
  if (b.report) b.report(result);
  for (const cuda::StagedOp& op : b.staged) {
    const Status f = stager_->Finish(op);
    if (!f.ok() && result.ok()) result = f;
  }
  ReleaseUses(b.custom_ops);
  return result;
}

// Every staged input on the host (bounded by the timeout and abort), then the device
// scalars copied into their cells. Inputs that never arrive fail the path (sticky).
Status CudaDevicePath::WaitInputs(const ProxyBatch& b) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms_);
  for (const cuda::StagedOp& op : b.staged) {
    const Status ready = stager_->WaitInput(op, deadline, &aborted_);
    if (!ready.ok()) {
      Fail(ready);
      return ready;
    }
  }
  for (const ScalarCell& c : b.cells) std::memcpy(c.cell, b.staged[c.request].host_scalar, c.bytes);
  return Status::Ok();
}

// The communicator is read here, on the proxy: a non-blocking one is created on its
// worker, possibly after the call was submitted.
Status CudaDevicePath::RunBatch(const ProxyBatch& b) {
  Communicator* impl = Comm();
  if (impl == nullptr) return InvalidUsage("communicator creation failed");
  return impl->RunGroup(b.ops);
}

// A blocking communicator's queued staged calls, run out.
void CudaDevicePath::WaitForProxy() {
  AsyncWorker* queued = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued = proxy_.get();
  }
  if (queued != nullptr) queued->WaitIdle();
}

// --- Device-resident, on the caller's thread --------------------------------------------

// After the staged calls queued before it, once every stream of the batch has reached
// the call (its inputs written) and the device PreMulSum scalars are in their cells: the
// collective on the device buffers. Returns with the results in place.
Status CudaDevicePath::RunResident(const DeviceBatch& batch, const Classified& c) {
  WaitForProxy();
  {
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(failed_);
  }
  Communicator* impl = Comm();
  if (impl == nullptr) return InvalidUsage("communicator creation failed");
  const Deadline deadline = Deadline::AfterMs(timeout_ms_);
  const std::string who = "rank " + std::to_string(batch.rank) + ": ";
  for (const ScalarCell& cell : c.cells) {
    const cuda::StagingRequest& req = c.requests[cell.request];
    TESSERA_RETURN_IF_ERROR(cuda::CopyOnStream(cell.cell, req.scalar, cell.bytes, c.streams[cell.request]));
  }
  std::vector<void*> waited;
  for (void* stream : c.streams) {
    if (std::find(waited.begin(), waited.end(), stream) != waited.end()) continue;
    waited.push_back(stream);
    TESSERA_RETURN_IF_ERROR(
        cuda::WaitForStream(stream, deadline, &aborted_, who + "a device-resident call waiting for its stream"));
  }
  return impl->RunGroupOnDevice(batch.ops);
}

// After a task: forgets its uses of operators and destroys those waiting for it.
void CudaDevicePath::ReleaseUses(const std::vector<int>& ops) {
  std::vector<std::pair<int, Communicator*>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int op : ops) {
      if (--uses_[op] > 0) continue;
      uses_.erase(op);
      auto it = destroying_.find(op);
      if (it == destroying_.end()) continue;
      ready.push_back(*it);
      destroying_.erase(it);
      scalars_.erase(op);
    }
  }
  for (auto& [op, c] : ready) (void)c->DestroyRedOp(op);  // known to exist
}

// --- The DevicePath interface ---------------------------------------------------------

CudaDevicePath::~CudaDevicePath() {
  proxy_.reset();   // runs what is queued: each part is bounded by the timeout
  stager_.reset();  // releases every stream, waits for them (bounded), frees
}

// Classify, plan, enqueue (the steps above). Waits for the GPU only device-resident.
Status CudaDevicePath::Submit(const DeviceBatch& batch, bool* handled) {
  *handled = true;
  if (batch.streams.size() != batch.ops.size()) return InternalError("DevicePath::Submit: one stream per operation");
  Classified classified;
  TESSERA_RETURN_IF_ERROR(Classify(batch, &classified));
  Plan plan;
  TESSERA_RETURN_IF_ERROR(PlanBatch(batch, classified, &plan));
  if (plan.route == Route::kHost) return AfterQueued(batch, handled);
  if (plan.route == Route::kAlone) return CopyAlone(classified, plan.sources);
  if (plan.route == Route::kResident) return RunResident(batch, classified);
  return Enqueue(batch, classified, plan);
}

Status CudaDevicePath::WaitForHostBuffers() {
  std::shared_ptr<Status> result;
  AsyncWorker* proxy = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result.swap(host_result_);
    proxy = proxy_.get();
  }
  if (result == nullptr || proxy == nullptr) return Status::Ok();
  proxy->WaitIdle();
  return *result;
}

Status CudaDevicePath::CreatePreMulSum(Communicator* comm, const void* scalar, DataType type, bool read_now, int* op) {
  bool on_device = false;
  int device = -1;
  TESSERA_RETURN_IF_ERROR(IsDeviceMemory(scalar, SizeOf(type), &on_device, &device));
  if (!on_device) return comm->CreatePreMulSum(scalar, type, read_now, op);
  if (read_now) {
    return InvalidArgument("scalar is device memory, but residence tesseraScalarHostImmediate says host memory");
  }
  DeviceScalar d;
  d.device = scalar;
  d.bytes = SizeOf(type);
  d.cell.reset(new double(0));
  TESSERA_RETURN_IF_ERROR(comm->CreatePreMulSum(d.cell.get(), type, false, op));
  std::lock_guard<std::mutex> lock(mu_);
  scalars_[*op] = std::move(d);
  return Status::Ok();
}

Status CudaDevicePath::DestroyRedOp(Communicator* comm, int op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (uses_.count(op) != 0) {
      if (destroying_.count(op) != 0) {
        return InvalidArgument("op " + std::to_string(op) + " was already destroyed");
      }
      destroying_[op] = comm;
      return Status::Ok();
    }
  }
  TESSERA_RETURN_IF_ERROR(comm->DestroyRedOp(op));
  std::lock_guard<std::mutex> lock(mu_);
  scalars_.erase(op);
  return Status::Ok();
}

void CudaDevicePath::WaitIdle() { WaitForProxy(); }

void CudaDevicePath::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_.store(true);
  if (proxy_) proxy_->DropPending();
  if (stager_) stager_->ReleaseAll();
}

Status CudaDevicePath::async_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  if (!proxy_) return Status::Ok();
  const Status s = proxy_->state();
  return s.code() == Code::kInProgress ? Status::Ok() : s;
}

}  // namespace

// --- What the build chooses (device_path.h) -------------------------------------------

// Without usable CUDA no device memory exists: every call runs on the host.
std::unique_ptr<DevicePath> DevicePath::Create(const std::atomic<Communicator*>* comm, const Settings& settings) {
  if (!cuda::CudaUsable().ok()) return nullptr;
  return std::make_unique<CudaDevicePath>(comm, settings.timeout_ms);
}

Status DevicePath::CheckStream(const void* stream) {
  if (stream == nullptr) return Status::Ok();
  const Status usable = cuda::CudaUsable();
  if (!usable.ok()) return InvalidArgument("stream must be NULL: this process cannot use CUDA (" + usable.message() + ")");
  return Status::Ok();
}

Status DevicePath::Attach(Communicator* comm) {
  if (!comm->device_resident_possible()) return Status::Ok();
  std::unique_ptr<cuda::CudaDeviceEngine> engine;
  const Status mine = CreateEngine(&engine);
  int32_t can = mine.ok() ? 1 : 0, all = 0;
  Operation agree;
  agree.kind = OpKind::kAllReduce;
  agree.send = &can;
  agree.recv = &all;
  agree.count = 1;
  agree.type = DataType::kInt32;
  agree.op = static_cast<int>(RedOp::kMin);
  TESSERA_RETURN_IF_ERROR(comm->Run(agree).Annotate("agreeing on device-resident calls"));
  if (all == 0) {
    Log(comm->log_level(), LogLevel::kInfo,
        "rank " + std::to_string(comm->rank()) + ": device-resident calls off (" +
            (mine.ok() ? std::string("a peer has no CUDA engine") : mine.message()) + "); device buffers are staged");
    return Status::Ok();
  }
  return comm->EnableDeviceLinks(std::move(engine));
}

}  // namespace tessera
