#include "comm/group_runner.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "comm/call_validation.h"
#include "comm/handle_registry.h"
#include "comm/last_error.h"

namespace tessera {
namespace {

// The depth, which every call reads, is a plain thread-local (one look-up, no
// initialisation guard).
thread_local int t_group_depth = 0;

// The calls recorded in this thread's open group.
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

// One communicator's calls for its device path (device_path.h), which runs a batch it
// handles on its proxy thread and reports the result here.
DeviceBatch DeviceBatchOf(tesseraComm* comm, const char* fn, std::vector<Operation> ops,
                          std::vector<tesseraStream_t> streams) {
  DeviceBatch b{std::move(ops), std::move(streams), comm->rank, comm->nranks, comm->worker.get()};
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
    Status st = comm->impl() ? comm->impl()->RunGroup(ops) : InvalidUsage("communicator creation failed");
    Report(comm, fn, st);
    return st;
  });
}

// Runs every part of a group. Non-blocking communicators run theirs on their worker, and
// parts the device path handles (device buffers or streams) on its proxy; blocking ones
// run here, each on its own thread when there are several, so that one thread can drive
// all the ranks of tesseraCommInitAll without deadlock. Fills the results of the parts
// that finished here; returns whether some part is still in progress.
bool RunParts(const char* fn, const std::vector<GroupPart>& parts, std::vector<Status>* results) {
  std::vector<std::thread> threads;
  bool in_progress = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    tesseraComm* comm = parts[i].comm;
    bool handled = false;
    Status routed;
    if (comm->device) {
      DeviceBatch batch = DeviceBatchOf(comm, fn, parts[i].ops, parts[i].streams);
      batch.may_block = parts.size() == 1;
      routed = comm->device->Submit(batch, &handled);
    }
    if (handled) {
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

}  // namespace

tesseraResult_t Submit(const char* fn, tesseraComm* comm, const Operation& op, tesseraStream_t stream,
                       const Status& bad_arguments) {
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
  bool handled = false;
  if (comm->device) s = comm->device->Submit(DeviceBatchOf(comm, fn, {op}, {stream}), &handled);
  if (handled) return Report(comm, fn, s.ok() ? comm->device->WaitForHostBuffers() : s);
  if (comm->worker) {
    PostOnWorker(comm, fn, {op});
    return tesseraInProgress;
  }
  return Report(comm, fn, comm->impl()->Run(op));
}

tesseraResult_t GroupStart() {
  ++t_group_depth;
  return tesseraSuccess;
}

tesseraResult_t GroupEnd() {
  const char* fn = "tesseraGroupEnd";
  if (t_group_depth == 0) return Report(nullptr, fn, InvalidUsage("tesseraGroupEnd without tesseraGroupStart"));
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
    tesseraComm* comm = parts[i].comm;
    if (results[i].ok() && comm->device) results[i] = comm->device->WaitForHostBuffers();
    tesseraResult_t r = Report(comm, fn, results[i]);
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

bool InGroup() { return t_group_depth > 0; }

}  // namespace tessera
