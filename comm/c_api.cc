// The C API: a thin shim over Communicator. This file is the one place where a Status
// becomes a tesseraResult_t, where handles and arguments are validated, where groups are
// recorded, and where the last error message is kept (per communicator and per thread:
// no global error buffer).
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "bootstrap/rendezvous.h"
#include "comm/async_worker.h"
#include "comm/communicator.h"
#include "comm/device_path.h"
#include "comm/launch.h"
#include "comm/operation.h"
#include "tessera/tessera.h"
#include "topology/host_identity.h"

using tessera::Code;
using tessera::Communicator;
using tessera::InvalidArgument;
using tessera::Operation;
using tessera::OpKind;
using tessera::Status;

// The handle: the communicator plus what the shim needs to manage its life.
struct tesseraComm {
  explicit tesseraComm(const tessera::Settings& settings) : device(&published, settings) {}

  // The communicator, or null until created (a non-blocking one is created on its worker
  // while the caller's thread may already read it: published with release, read with
  // acquire, never changed after).
  Communicator* impl() const { return published.load(std::memory_order_acquire); }
  void Publish(std::unique_ptr<Communicator> c) {
    owned = std::move(c);
    published.store(owned.get(), std::memory_order_release);
  }
  std::unique_ptr<Communicator> owned;
  std::atomic<Communicator*> published{nullptr};
  int rank = 0;
  int nranks = 0;
  std::string name;
  std::unique_ptr<tessera::AsyncWorker> worker;  // non-blocking communicators only
  std::atomic<int> active_calls{0};
  std::mutex error_mu;
  std::string last_error;
  tessera::DevicePath device;  // CUDA device buffers and streams (declared last: stops first)
};

namespace {

thread_local std::string t_last_error;
thread_local std::string t_returned_error;  // what tesseraGetLastError handed out

// Groups are per thread, as in NCCL. The depth, which every call reads, is a plain
// thread-local (one look-up, no initialisation guard).
thread_local int t_group_depth = 0;
struct GroupState {
  std::vector<tesseraComm*> comms;       // comms[i] made ops[i]
  std::vector<Operation> ops;
  std::vector<tesseraStream_t> streams;  // streams[i] is ops[i]'s
  void clear() {
    comms.clear();
    ops.clear();
    streams.clear();
  }
};
thread_local GroupState t_group;

// Every live handle. Validating against this set turns use-after-destroy into an error.
// `g_live_generation` counts the handles released: a thread that found a handle live
// keeps it as valid until the count moves.
std::mutex g_live_mu;
std::atomic<uint64_t> g_live_generation{0};
std::unordered_set<tesseraComm*>& Live() {
  static auto* live = new std::unordered_set<tesseraComm*>();
  return *live;
}

// A call in progress on a handle, for Release to wait on: each thread publishes the one
// handle its call uses in its hazard slot (one exchange, no lock). A thread's second
// handle at once (a group over several communicators) is counted in the handle's
// `active_calls` under g_live_mu instead.
struct HazardSlot {
  std::atomic<tesseraComm*> comm{nullptr};
};
std::vector<HazardSlot*>& Hazards() {  // every thread's slot, under g_live_mu
  static auto* slots = new std::vector<HazardSlot*>();
  return *slots;
}
void ReleaseHazardSlot(void* slot);
// This thread's hazard slot and the handle it last found live. Plain data, so every call
// reads it with one look-up and no initialisation guard; the slot, made at the thread's
// first call, is unregistered at its exit by a pthread key's destructor (which runs after
// C++ thread-local destructors, so a call from one of those still finds it).
struct ThreadHazard {
  HazardSlot* slot;
  const tesseraComm* valid;  // the handle last found live, at generation `generation`
  uint64_t generation;
};
thread_local ThreadHazard t_hazard = {nullptr, nullptr, 0};

HazardSlot* SlotOf(ThreadHazard* mine) {
  if (mine->slot != nullptr) return mine->slot;
  static pthread_key_t key;
  static const bool keyed = pthread_key_create(&key, &ReleaseHazardSlot) == 0;  // else the slot outlives the thread
  mine->slot = new HazardSlot;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    Hazards().push_back(mine->slot);
  }
  if (keyed) pthread_setspecific(key, mine->slot);
  return mine->slot;
}

void ReleaseHazardSlot(void* slot) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    auto& all = Hazards();
    all.erase(std::find(all.begin(), all.end(), slot));
  }
  t_hazard.slot = nullptr;
  delete static_cast<HazardSlot*>(slot);
}

tesseraResult_t ToResult(Code c) { return static_cast<tesseraResult_t>(static_cast<int>(c)); }

std::string Describe(const tesseraComm* comm) {
  std::string d = "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->nranks);
  if (!comm->name.empty()) d += ", comm '" + comm->name + "'";
  return d;
}

tesseraResult_t Report(tesseraComm* comm, const char* function, const Status& s) {
  if (s.ok()) return tesseraSuccess;
  if (s.code() == Code::kInProgress) return tesseraInProgress;
  std::string text = std::string(function) + (comm != nullptr ? " (" + Describe(comm) + ")" : "") + ": " + s.message();
  tessera::LogLevel level = tessera::LogLevel::kWarn;
  if (comm != nullptr) {
    if (comm->impl()) level = comm->impl()->log_level();
    std::lock_guard<std::mutex> lock(comm->error_mu);
    comm->last_error = text;
  }
  t_last_error = text;
  tessera::Log(level, tessera::LogLevel::kWarn, text + " [" + tessera::CodeName(s.code()) + "]");
  return ToResult(s.code());
}

// Marks a call in progress on a live handle, so that Destroy/Abort wait for it to leave.
// The usual case costs one exchange: the handle goes into this thread's hazard slot, then
// counts as live while no handle was released since this thread last found it live
// (Release bumps the generation before it looks at the slots, so one of the two sees the
// other). Otherwise the live set is asked under its lock.
class CallGuard {
 public:
  explicit CallGuard(tesseraComm* comm) {
    if (comm == nullptr) return;
    ThreadHazard& mine = t_hazard;  // one look-up of the thread's storage (a call into ld.so)
    HazardSlot* slot = SlotOf(&mine);
    const bool published = slot->comm.load(std::memory_order_relaxed) == nullptr;  // else a group's second handle
    if (published) {
      slot->comm.store(comm, std::memory_order_seq_cst);
      if (mine.valid == comm && mine.generation == g_live_generation.load(std::memory_order_seq_cst)) {
        comm_ = comm;
        slot_ = slot;
        return;
      }
    }
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (Live().count(comm) == 0) {
      if (published) slot->comm.store(nullptr, std::memory_order_release);
      return;
    }
    comm_ = comm;
    if (!published) {
      comm_->active_calls.fetch_add(1);
      return;
    }
    slot_ = slot;
    mine.valid = comm;
    mine.generation = g_live_generation.load(std::memory_order_relaxed);
  }
  ~CallGuard() {
    if (slot_ != nullptr) {
      slot_->comm.store(nullptr, std::memory_order_release);
    } else if (comm_ != nullptr) {
      comm_->active_calls.fetch_sub(1);
    }
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  tesseraComm* comm() const { return comm_; }

 private:
  tesseraComm* comm_ = nullptr;
  HazardSlot* slot_ = nullptr;  // this thread's, when the handle is published there
};

// Whether a call is in progress on `comm` in some thread; under g_live_mu.
bool InUse(tesseraComm* comm) {
  if (comm->active_calls.load() != 0) return true;
  for (const HazardSlot* slot : Hazards()) {
    if (slot->comm.load(std::memory_order_seq_cst) == comm) return true;
  }
  return false;
}

// Inlined: called on every call, and its check is a compare.
[[gnu::always_inline]] inline Status CheckCommHandle(const tesseraComm* given, const tesseraComm* live) {
  if (given == nullptr) return InvalidArgument("comm is NULL");
  if (live == nullptr) return InvalidArgument("comm is not a live communicator (destroyed, aborted or never created)");
  return Status::Ok();
}

tesseraResult_t Release(tesseraComm_t comm, const char* function, bool abort) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (comm == nullptr || Live().erase(comm) == 0) return Report(nullptr, function, CheckCommHandle(comm, nullptr));
    g_live_generation.fetch_add(1, std::memory_order_seq_cst);
  }
  if (abort) {
    comm->device.Abort();
    if (comm->worker) comm->worker->DropPending();
    if (comm->impl()) comm->impl()->RequestAbort();
  }
  // Calls already inside (only possible from other threads) notice the abort flag
  // within a sleep slice; without abort they are the caller's misuse and still finish
  // within their own timeout. They read comm->worker (to post to it, or to wait for it),
  // so it is destroyed only once they have left (ThreadSanitizer found the reset racing
  // with tesseraAllReduce on another thread: a use after free when that call then
  // posted).
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      if (!InUse(comm)) break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  comm->worker.reset();  // finishes (or, aborted, quickly fails) what was queued
  delete comm;
  return tesseraSuccess;
}

// `settings`: those the communicator is (or will be) created with.
tesseraComm* NewHandle(int rank, int nranks, const char* name, const tessera::Settings& settings) {
  auto* handle = new tesseraComm(settings);
  handle->rank = rank;
  handle->nranks = nranks;
  if (name != nullptr) handle->name = name;
  std::lock_guard<std::mutex> lock(g_live_mu);
  Live().insert(handle);
  return handle;
}

void Unregister(tesseraComm* handle) {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    Live().erase(handle);
    g_live_generation.fetch_add(1, std::memory_order_seq_cst);
  }
  delete handle;
}

// Config fields with the defaults applied.
struct Config {
  bool blocking = true;
  const char* name = nullptr;
  int64_t timeout_ms = 0;  // 0: keep the settings' TESSERA_TIMEOUT_MS
  int deterministic = -1;  // -1: keep the settings' TESSERA_DETERMINISTIC
};

// The settings a communicator is created with: `settings` with what `config` sets.
tessera::Settings WithConfig(tessera::Settings settings, const Config& config) {
  if (config.timeout_ms > 0) settings.timeout_ms = config.timeout_ms;
  if (config.deterministic >= 0) settings.deterministic = config.deterministic;
  return settings;
}

Status ReadConfig(const tesseraConfig_t* config, Config* out) {
  if (config == nullptr) return Status::Ok();
  if (config->magic != TESSERA_CONFIG_MAGIC || config->size != sizeof(tesseraConfig_t) || config->version == 0 ||
      config->version > TESSERA_VERSION_CODE) {
    return InvalidArgument("config is not initialised with TESSERA_CONFIG_INITIALIZER (bad size, magic or version)");
  }
  if (config->blocking != TESSERA_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      return InvalidArgument("config.blocking must be 0 or 1, not " + std::to_string(config->blocking));
    }
    out->blocking = config->blocking == 1;
  }
  out->name = config->commName;
  if (config->timeoutMs != TESSERA_CONFIG_UNDEF_INT) {
    if (config->timeoutMs <= 0) {
      return InvalidArgument("config.timeoutMs must be > 0, not " + std::to_string(config->timeoutMs));
    }
    out->timeout_ms = config->timeoutMs;
  }
  if (config->deterministic != TESSERA_CONFIG_UNDEF_INT) {
    if (config->deterministic != 0 && config->deterministic != 1) {
      return InvalidArgument("config.deterministic must be 0 or 1, not " + std::to_string(config->deterministic));
    }
    out->deterministic = config->deterministic;
  }
  return Status::Ok();
}

// Creates a communicator into a new handle; non-blocking: on the handle's worker.
tesseraResult_t InitInto(const char* fn, tesseraComm_t* comm, int nranks, const tessera::UniqueIdData& id, int rank,
                         const tessera::Settings& settings, const Config& config) {
  tesseraComm* handle = NewHandle(rank, nranks, config.name, settings);
  auto create = [handle, settings, id, nranks, rank]() -> Status {
    std::unique_ptr<Communicator> created;
    Status s = Communicator::Create(settings, id, nranks, rank, &created);
    if (s.ok()) s = tessera::DevicePath::Attach(created.get());
    if (created) handle->Publish(std::move(created));
    return s.Annotate("rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  };
  if (!config.blocking) {
    handle->worker = std::make_unique<tessera::AsyncWorker>();
    handle->worker->Post([handle, create, fn] {
      Status s = create();
      Report(handle, fn, s);
      return s;
    });
    *comm = handle;
    return tesseraInProgress;
  }
  Status s = create();
  if (!s.ok()) {
    Unregister(handle);
    return Report(nullptr, fn, s);
  }
  *comm = handle;
  return tesseraSuccess;
}

// Inlined: called on every call, and its check is a compare.
[[gnu::always_inline]] inline Status CheckType(tesseraDataType_t datatype) {
  if (datatype < 0 || datatype >= tesseraNumTypes) {
    return InvalidArgument("datatype " + std::to_string(static_cast<int>(datatype)) + " is not a tesseraDataType_t");
  }
  return Status::Ok();
}

// `bytes` of elements of `elem_size` at `buf`. Inlined: called on every call, and its
// check is a compare.
[[gnu::always_inline]] inline Status CheckBuffer(const void* buf, size_t bytes, size_t elem_size, const char* name) {
  if (bytes > 0 && buf == nullptr) {
    return InvalidArgument(std::string(name) + " is NULL with count " + std::to_string(bytes / elem_size));
  }
  return Status::Ok();
}

// tesseraAllReduceParts' parts after the first (which ValidateOperation checks as the
// sendbuff): non-null, and apart from recvbuff (`recv_bytes` of it).
Status ValidateParts(const Operation& op, size_t recv_bytes) {
  const uintptr_t r = reinterpret_cast<uintptr_t>(op.recv);
  for (size_t j = 1; j < op.parts.size(); ++j) {
    const std::string name = "sendbuffs[" + std::to_string(j) + "]";
    TESSERA_RETURN_IF_ERROR(CheckBuffer(op.parts[j], op.count * tessera::SizeOf(op.type), tessera::SizeOf(op.type),
                                        name.c_str()));
    const uintptr_t s = reinterpret_cast<uintptr_t>(op.parts[j]);
    if (recv_bytes > 0 && s < r + recv_bytes && r < s + recv_bytes) {
      return InvalidArgument(name + " overlaps recvbuff (only sendbuffs[0] may be recvbuff)");
    }
  }
  return Status::Ok();
}

// Everything that can be checked before communicating, naming the bad argument.
Status ValidateOperation(tesseraComm* comm, const Operation& op, tesseraStream_t stream) {
  TESSERA_RETURN_IF_ERROR(CheckType(static_cast<tesseraDataType_t>(op.type)));
  if (tessera::IsReduction(op.kind) && (op.op < 0 || (op.op >= tesseraNumOps && comm->impl() == nullptr))) {
    return InvalidArgument("op " + std::to_string(op.op) + " is not a tesseraRedOp_t");
  }
  TESSERA_RETURN_IF_ERROR(tessera::DevicePath::CheckStream(stream));
  if (tessera::IsRooted(op.kind) && (op.root < 0 || op.root >= comm->nranks)) {
    return InvalidArgument("root " + std::to_string(op.root) + " is not in [0, " + std::to_string(comm->nranks) + ")");
  }
  if (tessera::IsPointToPoint(op.kind) && (op.peer < 0 || op.peer >= comm->nranks)) {
    return InvalidArgument("peer " + std::to_string(op.peer) + " is not in [0, " + std::to_string(comm->nranks) + ")");
  }
  const size_t es = tessera::SizeOf(op.type);
  size_t all_ranks_bytes = 0;  // multiplied, not divided: two divisions were a twentieth of a small call
  if (__builtin_mul_overflow(op.count, es, &all_ranks_bytes) ||
      __builtin_mul_overflow(all_ranks_bytes, static_cast<size_t>(comm->nranks), &all_ranks_bytes) ||
      all_ranks_bytes > static_cast<size_t>(PTRDIFF_MAX)) {
    return InvalidArgument("count " + std::to_string(op.count) + " times the datatype size overflows");
  }
  const tessera::OperationBytes bytes = tessera::BytesOf(op, comm->rank, comm->nranks);
  TESSERA_RETURN_IF_ERROR(CheckBuffer(op.send, bytes.send, es, "sendbuff"));
  TESSERA_RETURN_IF_ERROR(CheckBuffer(op.recv, bytes.recv, es, "recvbuff"));
  if (op.kind == OpKind::kAllReduce || op.kind == OpKind::kAlltoAll) {
    const uintptr_t s = reinterpret_cast<uintptr_t>(op.send), r = reinterpret_cast<uintptr_t>(op.recv);
    const size_t sb = bytes.send, rb = bytes.recv;
    const bool overlap = sb > 0 && rb > 0 && s < r + rb && r < s + sb;
    if (overlap && s != r) {
      return InvalidArgument("sendbuff and recvbuff overlap without being equal (in-place needs sendbuff == recvbuff)");
    }
  }
  TESSERA_RETURN_IF_ERROR(ValidateParts(op, bytes.recv));
  if (comm->impl()) TESSERA_RETURN_IF_ERROR(comm->impl()->executor().CheckOperation(op));
  return Status::Ok();
}

// One communicator's calls for its device path (device_path.h), which runs a batch it
// takes on its proxy thread and reports the result here.
tessera::DeviceBatch DeviceBatchOf(tesseraComm* comm, const char* fn, std::vector<Operation> ops,
                                   std::vector<tesseraStream_t> streams) {
  tessera::DeviceBatch b{std::move(ops), std::move(streams), comm->rank, comm->nranks, comm->worker.get()};
  b.report = [comm, fn](const Status& s) { Report(comm, fn, s); };
  return b;
}

// One communicator's part of a group: its operations and their streams, in issue order.
struct GroupPart {
  tesseraComm* comm;
  std::vector<Operation> ops;
  std::vector<tesseraStream_t> streams;
};

// The recorded calls by communicator, communicators in order of first use. A group of
// one communicator (the usual one) takes the recorded vectors whole.
std::vector<GroupPart> PartsByComm(GroupState* group) {
  std::vector<GroupPart> parts;
  const std::vector<tesseraComm*>& comms = group->comms;
  if (!comms.empty() && std::all_of(comms.begin(), comms.end(), [&](tesseraComm* c) { return c == comms[0]; })) {
    parts.push_back(GroupPart{comms[0], std::move(group->ops), std::move(group->streams)});
    return parts;
  }
  for (size_t r = 0; r < comms.size(); ++r) {
    auto it = std::find_if(parts.begin(), parts.end(), [&](const GroupPart& p) { return p.comm == comms[r]; });
    if (it == parts.end()) it = parts.insert(parts.end(), GroupPart{comms[r], {}, {}});
    it->ops.push_back(group->ops[r]);
    it->streams.push_back(group->streams[r]);
  }
  return parts;
}

// Runs `ops` as one group on a non-blocking communicator's worker, reporting the result.
void PostOnWorker(tesseraComm* comm, const char* fn, std::vector<Operation> ops) {
  comm->worker->Post([comm, ops, fn] {
    Status st = comm->impl() ? comm->impl()->RunGroup(ops) : tessera::InvalidUsage("communicator creation failed");
    Report(comm, fn, st);
    return st;
  });
}

// Runs one validated call now, on the worker, or records it in the open group.
// `bad_arguments`: what the caller found wrong already, reported like the rest.
tesseraResult_t Submit(const char* fn, tesseraComm_t comm, const Operation& op, tesseraStream_t stream,
                       const Status& bad_arguments = Status::Ok()) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && !bad_arguments.ok()) s = bad_arguments;  // copied only when it holds an error
  if (s.ok()) s = ValidateOperation(comm, op, stream);
  if (!s.ok()) return Report(guard.comm(), fn, s);
  if (t_group_depth > 0) {
    t_group.comms.push_back(comm);
    t_group.ops.push_back(op);
    t_group.streams.push_back(stream);
    return tesseraSuccess;
  }
  bool staged = false;
  if (comm->device.may_take()) s = comm->device.Submit(DeviceBatchOf(comm, fn, {op}, {stream}), &staged);
  if (staged) return Report(comm, fn, s.ok() ? comm->device.WaitForHostBuffers() : s);
  if (comm->worker) {
    PostOnWorker(comm, fn, {op});
    return tesseraInProgress;
  }
  return Report(comm, fn, comm->impl()->Run(op));
}

// Runs every part of a group. Non-blocking communicators run theirs on their worker, and
// staged parts (device buffers or streams) on the device path's proxy; blocking ones run
// here, each on its own thread when there are several, so that one thread can drive all
// the ranks of tesseraCommInitAll without deadlock. Fills the results of the parts that
// finished here; returns whether some part is still in progress.
bool RunParts(const char* fn, const std::vector<GroupPart>& parts, std::vector<Status>* results) {
  std::vector<std::thread> threads;
  bool in_progress = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    tesseraComm* comm = parts[i].comm;
    bool staged = false;
    Status routed;
    if (comm->device.may_take()) {
      tessera::DeviceBatch batch = DeviceBatchOf(comm, fn, parts[i].ops, parts[i].streams);
      batch.may_block = parts.size() == 1;
      routed = comm->device.Submit(batch, &staged);
    }
    if (staged) {
      if (routed.code() == Code::kInProgress) in_progress = true;
      else (*results)[i] = routed;
    } else if (comm->worker) {
      PostOnWorker(comm, fn, parts[i].ops);
      in_progress = true;
    } else if (parts.size() == 1) {
      (*results)[i] = comm->impl()->RunGroup(parts[i].ops);
    } else {
      threads.emplace_back([results, &parts, i] { (*results)[i] = parts[i].comm->impl()->RunGroup(parts[i].ops); });
    }
  }
  for (auto& t : threads) t.join();
  return in_progress;
}

Operation MakeOp(OpKind kind, const void* send, void* recv, size_t count, tesseraDataType_t datatype, int op = 0,
                 int root = 0, int peer = 0) {
  Operation o;
  o.kind = kind;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = static_cast<tessera::DataType>(datatype);
  o.op = op;
  o.root = root;
  o.peer = peer;
  return o;
}

}  // namespace

extern "C" {

tesseraResult_t tesseraGetVersion(int* version) {
  if (version == nullptr) return Report(nullptr, "tesseraGetVersion", InvalidArgument("version is NULL"));
  *version = TESSERA_VERSION_CODE;
  return tesseraSuccess;
}

tesseraResult_t tesseraGetUniqueId(tesseraUniqueId* uniqueId) {
  const char* fn = "tesseraGetUniqueId";
  if (uniqueId == nullptr) return Report(nullptr, fn, InvalidArgument("uniqueId is NULL"));
  tessera::Settings settings;
  Status s = tessera::Settings::FromEnvironment(&settings);
  tessera::UniqueIdData id;
  std::string ip;
  if (s.ok()) s = tessera::ChooseLocalAddress(settings.socket_ifname, &ip);
  if (s.ok()) {
    id.secret = tessera::RandomSecret();
    s = tessera::StartRendezvous(ip, 0, id.secret, settings.timeout_ms, settings.bootstrap_fanout, &id.root);
    id.root_pid = getpid();  // its rank is not known yet (-1)
    id.root_host = tessera::HostIdentity(settings.host_id);
  }
  if (!s.ok()) return Report(nullptr, fn, s);
  tessera::EncodeUniqueId(id, uniqueId->internal);
  return tesseraSuccess;
}

tesseraResult_t tesseraCommInitRankConfig(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank,
                                          tesseraConfig_t* config) {
  const char* fn = config != nullptr ? "tesseraCommInitRankConfig" : "tesseraCommInitRank";
  if (comm == nullptr) return Report(nullptr, fn, InvalidArgument("comm is NULL"));
  *comm = nullptr;
  if (nranks <= 0) return Report(nullptr, fn, InvalidArgument("nranks " + std::to_string(nranks) + " must be > 0"));
  if (rank < 0 || rank >= nranks) {
    return Report(nullptr, fn, InvalidArgument("rank " + std::to_string(rank) + " is not in [0, nranks " +
                                               std::to_string(nranks) + ")"));
  }
  Config cfg;
  tessera::UniqueIdData id;
  tessera::Settings settings;
  Status s = ReadConfig(config, &cfg);
  if (s.ok()) s = tessera::DecodeUniqueId(commId.internal, &id);
  if (s.ok()) s = tessera::Settings::FromEnvironment(&settings);
  if (!s.ok()) return Report(nullptr, fn, s.Annotate("rank " + std::to_string(rank) + " of " + std::to_string(nranks)));
  return InitInto(fn, comm, nranks, id, rank, WithConfig(settings, cfg), cfg);
}

tesseraResult_t tesseraCommInitRank(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank) {
  return tesseraCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

tesseraResult_t tesseraCommInitAll(tesseraComm_t* comms, int ndev, const int* devlist) {
  const char* fn = "tesseraCommInitAll";
  if (comms == nullptr) return Report(nullptr, fn, InvalidArgument("comms is NULL"));
  if (ndev <= 0) return Report(nullptr, fn, InvalidArgument("ndev " + std::to_string(ndev) + " must be > 0"));
  (void)devlist;  // a CPU build has no devices to bind
  tesseraUniqueId id;
  tesseraResult_t r = tesseraGetUniqueId(&id);
  if (r != tesseraSuccess) return r;
  std::vector<tesseraResult_t> results(ndev, tesseraSuccess);
  std::vector<std::string> errors(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      results[i] = tesseraCommInitRank(&comms[i], ndev, id, i);
      if (results[i] != tesseraSuccess) errors[i] = t_last_error;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[i] == tesseraSuccess) continue;
    for (int j = 0; j < ndev; ++j) {
      if (results[j] == tesseraSuccess) tesseraCommDestroy(comms[j]);
      comms[j] = nullptr;
    }
    t_last_error = errors[i];
    return results[i];
  }
  return tesseraSuccess;
}

tesseraResult_t tesseraCommInitFromEnv(tesseraComm_t* comm) {
  const char* fn = "tesseraCommInitFromEnv";
  if (comm == nullptr) return Report(nullptr, fn, InvalidArgument("comm is NULL"));
  *comm = nullptr;
  tessera::Settings settings;
  Status s = tessera::Settings::FromEnvironment(&settings);
  std::unique_ptr<Communicator> impl;
  if (s.ok()) s = tessera::CreateFromLauncher(settings, &impl);
  if (s.ok()) s = tessera::DevicePath::Attach(impl.get());
  if (!s.ok()) return Report(nullptr, fn, s);
  tesseraComm* handle = NewHandle(impl->rank(), impl->nranks(), nullptr, impl->settings());
  handle->Publish(std::move(impl));
  *comm = handle;
  return tesseraSuccess;
}

tesseraResult_t tesseraCommSplit(tesseraComm_t comm, int color, int key, tesseraComm_t* newcomm,
                                 tesseraConfig_t* config) {
  const char* fn = "tesseraCommSplit";
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && newcomm == nullptr) s = InvalidArgument("newcomm is NULL");
  if (newcomm != nullptr) *newcomm = nullptr;
  if (s.ok() && color < 0 && color != TESSERA_SPLIT_NOCOLOR) {
    s = InvalidArgument("color " + std::to_string(color) + " must be >= 0 or TESSERA_SPLIT_NOCOLOR");
  }
  Config cfg;
  if (s.ok()) s = ReadConfig(config, &cfg);
  if (s.ok() && t_group_depth > 0) s = tessera::InvalidUsage("tesseraCommSplit inside a group is not supported");
  if (!s.ok()) return Report(guard.comm(), fn, s);
  *newcomm = nullptr;
  if (comm->worker) comm->worker->WaitIdle();
  comm->device.WaitIdle();
  if (!comm->impl()) return Report(comm, fn, tessera::InvalidUsage("the parent communicator was never created"));
  std::unique_ptr<Communicator> impl;
  s = comm->impl()->Split(color, key, WithConfig(comm->impl()->settings(), cfg), &impl);
  if (s.ok() && impl) s = tessera::DevicePath::Attach(impl.get());
  if (!s.ok()) return Report(comm, fn, s);
  if (!impl) return tesseraSuccess;  // TESSERA_SPLIT_NOCOLOR
  tesseraComm* handle = NewHandle(impl->rank(), impl->nranks(), cfg.name, impl->settings());
  handle->Publish(std::move(impl));
  const bool blocking = config != nullptr ? cfg.blocking : comm->worker == nullptr;  // NULL: inherit comm's
  if (!blocking) handle->worker = std::make_unique<tessera::AsyncWorker>();
  *newcomm = handle;
  return tesseraSuccess;
}

tesseraResult_t tesseraCommRevoke(tesseraComm_t comm, int flags) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && flags != 0) s = InvalidArgument("flags " + std::to_string(flags) + " must be 0");
  if (s.ok() && comm->impl() == nullptr) s = tessera::InvalidUsage("the communicator is still being created");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommRevoke", s);
  comm->impl()->Revoke();
  return tesseraSuccess;
}

// The survivors' new communicator, published in a handle like Split's.
static tesseraResult_t ShrinkInto(tesseraComm_t comm, const std::vector<int>& exclude, bool lost, const Config& cfg,
                                  bool inherit_blocking, tesseraComm_t* newcomm) {
  const char* fn = "tesseraCommShrink";
  if (comm->worker) comm->worker->WaitIdle();
  comm->device.WaitIdle();
  std::unique_ptr<Communicator> impl;
  Status s = comm->impl()->Shrink(exclude, lost, WithConfig(comm->impl()->settings(), cfg), &impl);
  if (s.ok()) s = tessera::DevicePath::Attach(impl.get());
  if (!s.ok()) return Report(comm, fn, s);
  tesseraComm* handle = NewHandle(impl->rank(), impl->nranks(), cfg.name, impl->settings());
  handle->Publish(std::move(impl));
  const bool blocking = inherit_blocking ? comm->worker == nullptr : cfg.blocking;
  if (!blocking) handle->worker = std::make_unique<tessera::AsyncWorker>();
  *newcomm = handle;
  return tesseraSuccess;
}

tesseraResult_t tesseraCommShrink(tesseraComm_t comm, const int* excludeRanks, int excludeCount,
                                  tesseraComm_t* newcomm, tesseraConfig_t* config, int flags) {
  const char* fn = "tesseraCommShrink";
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && newcomm == nullptr) s = InvalidArgument("newcomm is NULL");
  if (newcomm != nullptr) *newcomm = nullptr;
  if (s.ok() && (excludeCount < 0 || (excludeCount > 0 && excludeRanks == nullptr))) {
    s = InvalidArgument("excludeRanks is NULL or excludeCount " + std::to_string(excludeCount) + " is negative");
  }
  const bool lost = (flags & TESSERA_SHRINK_LOST) != 0;
  if (s.ok() && (flags & ~(TESSERA_SHRINK_ABORT | TESSERA_SHRINK_LOST)) != 0) {
    s = InvalidArgument("unknown flags " + std::to_string(flags));
  }
  if (s.ok() && lost && excludeCount > 0) s = InvalidArgument("TESSERA_SHRINK_LOST with an exclude list");
  Config cfg;
  if (s.ok()) s = ReadConfig(config, &cfg);
  if (s.ok() && t_group_depth > 0) s = tessera::InvalidUsage("tesseraCommShrink inside a group is not supported");
  if (s.ok() && !comm->impl()) s = tessera::InvalidUsage("the parent communicator was never created");
  if (!s.ok()) return Report(guard.comm(), fn, s);
  if ((flags & TESSERA_SHRINK_ABORT) != 0) comm->impl()->Revoke();
  const std::vector<int> exclude(excludeRanks, excludeRanks + excludeCount);
  return ShrinkInto(comm, exclude, lost, cfg, config == nullptr, newcomm);
}

tesseraResult_t tesseraCommFinalize(tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (!s.ok()) return Report(guard.comm(), "tesseraCommFinalize", s);
  if (comm->worker) comm->worker->WaitIdle();
  comm->device.WaitIdle();
  return tesseraSuccess;
}

tesseraResult_t tesseraCommDestroy(tesseraComm_t comm) { return Release(comm, "tesseraCommDestroy", false); }

tesseraResult_t tesseraCommAbort(tesseraComm_t comm) { return Release(comm, "tesseraCommAbort", true); }

tesseraResult_t tesseraCommCuDevice(const tesseraComm_t comm, int* device) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && device == nullptr) s = InvalidArgument("device is NULL");
  if (s.ok()) s = tessera::InvalidUsage("not supported: this is a CPU build, communicators have no CUDA device");
  return Report(guard.comm(), "tesseraCommCuDevice", s);
}

tesseraResult_t tesseraCommCount(const tesseraComm_t comm, int* count) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && count == nullptr) s = InvalidArgument("count is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommCount", s);
  *count = comm->nranks;
  return tesseraSuccess;
}

tesseraResult_t tesseraCommUserRank(const tesseraComm_t comm, int* rank) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && rank == nullptr) s = InvalidArgument("rank is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommUserRank", s);
  *rank = comm->rank;
  return tesseraSuccess;
}

tesseraResult_t tesseraCommGetAsyncError(tesseraComm_t comm, tesseraResult_t* asyncError) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && asyncError == nullptr) s = InvalidArgument("asyncError is NULL");
  if (!s.ok()) return Report(guard.comm(), "tesseraCommGetAsyncError", s);
  Status state = comm->worker ? comm->worker->state() : Status::Ok();
  if (state.ok() && comm->impl()) state = comm->impl()->sticky_error();
  if (state.ok()) state = comm->device.async_error();
  *asyncError = ToResult(state.code());
  return tesseraSuccess;
}

tesseraResult_t tesseraCommDumpFlightRecord(tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && comm->impl() == nullptr) s = tessera::InvalidUsage("the communicator is still being created");
  std::string path;
  if (s.ok()) s = comm->impl()->DumpFlightRecordNow("asked by tesseraCommDumpFlightRecord", &path);
  return Report(guard.comm(), "tesseraCommDumpFlightRecord", s);
}

const char* tesseraGetErrorString(tesseraResult_t result) {
  if (result < 0 || result >= tesseraNumResults) return "unknown result code";
  return tessera::CodeName(static_cast<Code>(result));
}

const char* tesseraGetLastError(tesseraComm_t comm) {
  CallGuard guard(comm);
  t_returned_error = t_last_error;
  if (guard.comm() != nullptr) {
    std::lock_guard<std::mutex> lock(comm->error_mu);
    if (!comm->last_error.empty()) t_returned_error = comm->last_error;
  }
  return t_returned_error.c_str();
}

tesseraResult_t tesseraRedOpCreatePreMulSum(tesseraRedOp_t* op, void* scalar, tesseraDataType_t datatype,
                                            tesseraScalarResidence_t residence, tesseraComm_t comm) {
  const char* fn = "tesseraRedOpCreatePreMulSum";
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && op == nullptr) s = InvalidArgument("op is NULL");
  if (s.ok() && scalar == nullptr) s = InvalidArgument("scalar is NULL");
  if (s.ok()) s = CheckType(datatype);
  if (s.ok() && (datatype == tesseraFloat8e4m3 || datatype == tesseraFloat8e5m2)) {
    s = InvalidArgument(std::string("datatype ") + tessera::DataTypeName(static_cast<tessera::DataType>(datatype)) +
                        " is not supported by reductions");
  }
  if (s.ok() && residence != tesseraScalarDevice && residence != tesseraScalarHostImmediate) {
    s = InvalidArgument("residence " + std::to_string(static_cast<int>(residence)) + " is not a tesseraScalarResidence_t");
  }
  if (s.ok() && comm->worker) comm->worker->WaitIdle();
  if (s.ok() && !comm->impl()) s = tessera::InvalidUsage("communicator creation failed");
  int id = 0;
  if (s.ok()) {
    s = comm->device.CreatePreMulSum(comm->impl(), scalar, static_cast<tessera::DataType>(datatype),
                                     residence == tesseraScalarHostImmediate, &id);
  }
  if (!s.ok()) return Report(guard.comm(), fn, s);
  *op = static_cast<tesseraRedOp_t>(id);
  return tesseraSuccess;
}

tesseraResult_t tesseraRedOpDestroy(tesseraRedOp_t op, tesseraComm_t comm) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok() && op < tesseraNumOps) s = InvalidArgument("op " + std::to_string(static_cast<int>(op)) + " is built in");
  if (s.ok() && comm->worker) comm->worker->WaitIdle();
  if (s.ok() && comm->impl()) s = comm->device.DestroyRedOp(comm->impl(), static_cast<int>(op));
  return Report(guard.comm(), "tesseraRedOpDestroy", s);
}

tesseraResult_t tesseraAllReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 tesseraRedOp_t op, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraAllReduce", comm, MakeOp(OpKind::kAllReduce, sendbuff, recvbuff, count, datatype, op), stream);
}

tesseraResult_t tesseraAllReduceParts(const void* const* sendbuffs, int nparts, void* recvbuff, size_t count,
                                      tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                      tesseraStream_t stream) {
  Operation o = MakeOp(OpKind::kAllReduce, nullptr, recvbuff, count, datatype, op);
  Status bad;
  if (sendbuffs == nullptr) {
    bad = InvalidArgument("sendbuffs is NULL");
  } else if (nparts < 1) {
    bad = InvalidArgument("nparts " + std::to_string(nparts) + " must be >= 1");
  } else {
    o.parts.assign(sendbuffs, sendbuffs + nparts);
    o.send = sendbuffs[0];
  }
  if (bad.ok() && stream != nullptr) bad = InvalidArgument("tesseraAllReduceParts takes the NULL stream only");
  return Submit("tesseraAllReduceParts", comm, o, stream, bad);
}

const char* tesseraAllReduceAlgorithm(tesseraComm_t comm, size_t count, tesseraDataType_t datatype) {
  CallGuard guard(comm);
  Status s = CheckCommHandle(comm, guard.comm());
  if (s.ok()) s = CheckType(datatype);
  if (s.ok() && comm->worker) comm->worker->WaitIdle();
  if (s.ok() && !comm->impl()) s = tessera::InvalidUsage("communicator creation failed");
  if (!s.ok()) {
    Report(guard.comm(), "tesseraAllReduceAlgorithm", s);
    return nullptr;
  }
  // The bytes the host path moves: half types widened unless TESSERA_HALF_WIRE=half.
  const tessera::DataType t = static_cast<tessera::DataType>(datatype);
  const tessera::Executor& executor = comm->impl()->executor();
  return executor.Choose(tessera::OpKind::kAllReduce, count * executor.WireElementSize(t)).algo->name;
}

tesseraResult_t tesseraBroadcast(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 int root, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraBroadcast", comm, MakeOp(OpKind::kBroadcast, sendbuff, recvbuff, count, datatype, 0, root),
                stream);
}

tesseraResult_t tesseraBcast(void* buff, size_t count, tesseraDataType_t datatype, int root, tesseraComm_t comm,
                             tesseraStream_t stream) {
  return Submit("tesseraBcast", comm, MakeOp(OpKind::kBroadcast, buff, buff, count, datatype, 0, root), stream);
}

tesseraResult_t tesseraReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              tesseraRedOp_t op, int root, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraReduce", comm, MakeOp(OpKind::kReduce, sendbuff, recvbuff, count, datatype, op, root), stream);
}

tesseraResult_t tesseraAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 tesseraDataType_t datatype, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraAllGather", comm, MakeOp(OpKind::kAllGather, sendbuff, recvbuff, sendcount, datatype), stream);
}

tesseraResult_t tesseraReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                     tesseraStream_t stream) {
  return Submit("tesseraReduceScatter", comm,
                MakeOp(OpKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op), stream);
}

tesseraResult_t tesseraAlltoAll(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraAlltoAll", comm, MakeOp(OpKind::kAlltoAll, sendbuff, recvbuff, count, datatype), stream);
}

tesseraResult_t tesseraGather(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              int root, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraGather", comm, MakeOp(OpKind::kGather, sendbuff, recvbuff, count, datatype, 0, root), stream);
}

tesseraResult_t tesseraScatter(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                               int root, tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraScatter", comm, MakeOp(OpKind::kScatter, sendbuff, recvbuff, count, datatype, 0, root),
                stream);
}

tesseraResult_t tesseraSend(const void* sendbuff, size_t count, tesseraDataType_t datatype, int peer,
                            tesseraComm_t comm, tesseraStream_t stream) {
  return Submit("tesseraSend", comm, MakeOp(OpKind::kSend, sendbuff, nullptr, count, datatype, 0, 0, peer), stream);
}

tesseraResult_t tesseraRecv(void* recvbuff, size_t count, tesseraDataType_t datatype, int peer, tesseraComm_t comm,
                            tesseraStream_t stream) {
  return Submit("tesseraRecv", comm, MakeOp(OpKind::kRecv, nullptr, recvbuff, count, datatype, 0, 0, peer), stream);
}

tesseraResult_t tesseraGroupStart(void) {
  ++t_group_depth;
  return tesseraSuccess;
}

tesseraResult_t tesseraGroupEnd(void) {
  const char* fn = "tesseraGroupEnd";
  if (t_group_depth == 0) return Report(nullptr, fn, tessera::InvalidUsage("tesseraGroupEnd without tesseraGroupStart"));
  if (--t_group_depth > 0) return tesseraSuccess;
  GroupState recorded;
  std::swap(recorded, t_group);
  std::vector<GroupPart> parts = PartsByComm(&recorded);
  std::vector<std::unique_ptr<CallGuard>> guards;
  for (const GroupPart& part : parts) {
    guards.push_back(std::make_unique<CallGuard>(part.comm));
    if (guards.back()->comm() == nullptr) {
      return Report(nullptr, fn, InvalidArgument("a communicator used in the group was destroyed before tesseraGroupEnd"));
    }
  }
  std::vector<Status> results(parts.size());
  const bool in_progress = RunParts(fn, parts, &results);
  tesseraResult_t first = tesseraSuccess;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (results[i].ok()) results[i] = parts[i].comm->device.WaitForHostBuffers();
    tesseraResult_t r = Report(parts[i].comm, fn, results[i]);
    if (first == tesseraSuccess) first = r;
  }
  // The thread's next group records into this one's vectors: a loop of groups allocates
  // none for its records (nothing records on this thread while it runs the group).
  if (parts.size() == 1) {
    recorded.ops = std::move(parts[0].ops);
    recorded.streams = std::move(parts[0].streams);
  }
  recorded.clear();
  if (t_group.ops.empty()) std::swap(recorded, t_group);
  if (first == tesseraSuccess && in_progress) return tesseraInProgress;
  return first;
}

}  // extern "C"
