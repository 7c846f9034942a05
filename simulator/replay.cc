#include "simulator/replay.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "simulator/simgrid_platform.h"

namespace tessera {
namespace {

namespace sg4 = simgrid::s4u;

// What every rank's actor shares.
struct World {
  const Platform* platform = nullptr;
  const Layout* layout = nullptr;
  const std::vector<RankSchedule>* schedules = nullptr;
  uint32_t max_chunks = 0;
  SimGridPlatform hosts;
  std::vector<double> finish_s;
};

// A message of the exchange being replayed, as it moves.
struct Transfer {
  const Message* m = nullptr;
  uint64_t chunk = 1;
  uint32_t chunks = 1;
  uint32_t started = 0;  // chunks put (send) or gets posted (receive)
  uint32_t ready = 0;    // chunks sent (send), or final: received and reduced (receive)
  double start_at = 0;   // a send's first chunk: not before (its overhead)
  bool in_flight = false;
  bool done = false;

  uint64_t ReadyBytes() const { return done ? m->bytes : std::min<uint64_t>(m->bytes, ready * chunk); }
};

struct Queue {
  int peer = 0;
  bool is_send = false;
  std::vector<int> items;  // transfers, in order
  size_t head = 0;
  sg4::Mailbox* box = nullptr;
  void* slot = nullptr;  // where a get puts its (empty) payload
};

// What a pending activity is for.
struct Tag {
  enum Kind : uint8_t { kChunk, kReduce } kind;
  int queue;
  int transfer;
};

class RankActor {
 public:
  RankActor(World* world, int rank) : w_(world), rank_(rank), node_(world->layout->HostOf(rank)) {}

  void operator()() {
    const RankSchedule& s = (*w_->schedules)[rank_];
    for (const Step& step : s.steps) {
      if (step.kind == Step::kCopy) {
        Compute(step.copy_bytes * (w_->platform->reduce_Bps / w_->platform->copy_Bps))->wait();
      } else {
        RunExchange(s, step);
      }
    }
    w_->finish_s[rank_] = sg4::Engine::get_clock();
  }

 private:
  const MessageClass& ClassOf(int peer) const {
    return w_->layout->HostOf(peer) == node_ ? w_->platform->intra : w_->platform->inter;
  }

  sg4::ExecPtr Compute(double bytes) {
    sg4::ExecPtr e = sg4::this_actor::exec_init(bytes);
    if (w_->hosts.shared_cpu != nullptr) e->set_host(w_->hosts.shared_cpu);
    e->start();
    return e;
  }

  void BuildQueues(const RankSchedule& s, const Step& step) {
    transfers_.assign(step.count, Transfer());
    queues_.clear();
    for (uint32_t i = 0; i < step.count; ++i) {
      Transfer& t = transfers_[i];
      t.m = &s.messages[step.first + i];
      t.chunk = std::max<uint64_t>(1, ClassOf(t.m->peer).chunk_bytes);
      if (w_->max_chunks > 0) t.chunk = std::max<uint64_t>(t.chunk, (t.m->bytes + w_->max_chunks - 1) / w_->max_chunks);
      t.chunks = static_cast<uint32_t>(std::max<uint64_t>(1, (t.m->bytes + t.chunk - 1) / t.chunk));
      size_t q = 0;
      while (q < queues_.size() && !(queues_[q].peer == t.m->peer && queues_[q].is_send == (t.m->is_send != 0))) ++q;
      if (q == queues_.size()) {
        Queue nq;
        nq.peer = t.m->peer;
        nq.is_send = t.m->is_send != 0;
        const int from = nq.is_send ? rank_ : nq.peer, to = nq.is_send ? nq.peer : rank_;
        nq.box = sg4::Mailbox::by_name(std::to_string(from) + ">" + std::to_string(to));
        queues_.push_back(nq);
      }
      queues_[q].items.push_back(static_cast<int>(i));
    }
    const double now = sg4::Engine::get_clock();
    for (Queue& q : queues_) {
      if (q.is_send) transfers_[q.items[0]].start_at = now + ClassOf(q.peer).overhead_s;
    }
  }

  bool GateAllows(const Transfer& t) const {
    if (t.m->gate < 0) return true;
    const uint64_t need = std::min<uint64_t>(t.m->bytes, (t.started + 1) * t.chunk);
    return transfers_[t.m->gate].ReadyBytes() >= need;
  }

  uint64_t ChunkBytes(const Transfer& t, uint32_t k) const {
    return std::min<uint64_t>(t.chunk, t.m->bytes - static_cast<uint64_t>(k) * t.chunk);
  }

  // Starts every chunk that may start now; returns the earliest time a send may start
  // that has not (infinity if none waits on time alone).
  double Launch() {
    const double now = sg4::Engine::get_clock();
    double next = std::numeric_limits<double>::infinity();
    for (size_t qi = 0; qi < queues_.size(); ++qi) {
      Queue& q = queues_[qi];
      if (q.head == q.items.size()) continue;
      const int ti = q.items[q.head];
      Transfer& t = transfers_[ti];
      if (t.in_flight || t.started == t.chunks) continue;
      if (q.is_send) {
        if (t.start_at > now) {
          next = std::min(next, t.start_at);
          continue;
        }
        if (!GateAllows(t)) continue;
        Add(q.box->put_async(&q, ChunkBytes(t, t.started)), Tag{Tag::kChunk, static_cast<int>(qi), ti});
      } else {
        Add(q.box->get_async(&q.slot), Tag{Tag::kChunk, static_cast<int>(qi), ti});
      }
      ++t.started;
      t.in_flight = true;
    }
    return next;
  }

  void Add(sg4::ActivityPtr a, Tag tag) {
    pending_.push_back(std::move(a));
    tags_.push_back(tag);
  }

  // A transfer at the head of its queue is complete: the next one of the queue begins.
  void Finish(Queue& q, Transfer& t) {
    t.done = true;
    ++q.head;
    --remaining_;
    if (q.is_send && q.head < q.items.size()) {
      transfers_[q.items[q.head]].start_at = sg4::Engine::get_clock() + ClassOf(q.peer).overhead_s;
    }
  }

  void Handle(const Tag& tag) {
    Queue& q = queues_[tag.queue];
    Transfer& t = transfers_[tag.transfer];
    if (tag.kind == Tag::kReduce) {
      if (++t.ready == t.chunks) Finish(q, t);
      return;
    }
    t.in_flight = false;
    if (q.is_send) {
      if (++t.ready == t.chunks) Finish(q, t);
    } else if (t.m->reduces) {
      const uint32_t k = reducing_[tag.transfer]++;  // chunks arrive in order
      Add(Compute(static_cast<double>(ChunkBytes(t, k))), Tag{Tag::kReduce, tag.queue, tag.transfer});
    } else if (++t.ready == t.chunks) {
      Finish(q, t);
    }
  }

  void RunExchange(const RankSchedule& s, const Step& step) {
    BuildQueues(s, step);
    reducing_.assign(step.count, 0);
    remaining_ = step.count;
    while (remaining_ > 0) {
      const double next = Launch();
      const double wait = next - sg4::Engine::get_clock();
      if (pending_.empty()) {
        sg4::this_actor::sleep_for(std::max(0.0, wait));
        continue;
      }
      const ssize_t i = std::isinf(next) ? sg4::Activity::wait_any(pending_)
                                          : sg4::Activity::wait_any_for(pending_, std::max(0.0, wait));
      if (i < 0 || static_cast<size_t>(i) >= pending_.size()) continue;  // the timer
      const Tag tag = tags_[i];
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
      tags_[i] = tags_.back();
      tags_.pop_back();
      Handle(tag);
    }
  }

  World* w_;
  const int rank_;
  const int node_;
  std::vector<Transfer> transfers_;
  std::vector<Queue> queues_;
  std::vector<uint32_t> reducing_;  // by transfer: chunks handed to the reduction so far
  std::vector<sg4::ActivityPtr> pending_;
  std::vector<Tag> tags_;
  uint32_t remaining_ = 0;
};

// The child's side: the whole simulation, its result written to `fd`.
Status Simulate(const Platform& platform, const Layout& layout, const ScheduleSource& source,
                const ReplayOptions& options, ReplayResult* result) {
  const auto t_record = std::chrono::steady_clock::now();
  std::vector<RankSchedule> schedules;
  TESSERA_RETURN_IF_ERROR(source(&schedules));
  for (const RankSchedule& s : schedules) {
    result->messages += s.messages.size();
    result->schedule_bytes += s.MemoryBytes();
  }
  if (static_cast<int>(schedules.size()) != layout.nranks()) {
    return InvalidArgument(std::to_string(schedules.size()) + " schedules for " + std::to_string(layout.nranks()) + " ranks");
  }
  const auto t0 = std::chrono::steady_clock::now();
  result->record_wall_s = std::chrono::duration<double>(t0 - t_record).count();
  rusage usage;
  if (options.record_only) {
    if (getrusage(RUSAGE_SELF, &usage) == 0) result->max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
    return Status::Ok();
  }
  int argc = 1;
  char name[] = "tessera-simulator";
  char* argv[] = {name, nullptr};
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine(&argc, argv);
  engine.set_config("network/model:CM02");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");
  engine.set_config("contexts/stack-size:128");  // KiB: an actor's stack, many thousands of them
  engine.set_config("contexts/guard-size:0");    // no guard page: 2 mappings per actor would pass vm.max_map_count
  World world;
  world.platform = &platform;
  world.layout = &layout;
  world.schedules = &schedules;
  world.max_chunks = options.max_chunks;
  world.finish_s.assign(layout.nranks(), 0);
  TESSERA_RETURN_IF_ERROR(BuildSimGridPlatform(platform, layout, &world.hosts));
  for (int r = 0; r < layout.nranks(); ++r) {
    sg4::Actor::create("rank" + std::to_string(r), world.hosts.rank_hosts[r], RankActor(&world, r));
  }
  engine.run();
  result->finish_s = world.finish_s;
  result->seconds = *std::max_element(world.finish_s.begin(), world.finish_s.end());
  result->simgrid_hosts = engine.get_host_count();
  result->replay_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (getrusage(RUSAGE_SELF, &usage) == 0) result->max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  return Status::Ok();
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// The child's message: code, text length, text, then (when OK) the result.
void Report(int fd, const Status& s, const ReplayResult& r) {
  const int32_t code = static_cast<int32_t>(s.code());
  const uint64_t len = s.message().size(), n = r.finish_s.size();
  WriteAll(fd, &code, sizeof(code));
  WriteAll(fd, &len, sizeof(len));
  WriteAll(fd, s.message().data(), len);
  if (!s.ok()) return;
  const double doubles[3] = {r.seconds, r.record_wall_s, r.replay_wall_s};
  const uint64_t counts[5] = {r.messages, r.schedule_bytes, r.max_rss_bytes, r.simgrid_hosts, n};
  WriteAll(fd, doubles, sizeof(doubles));
  WriteAll(fd, counts, sizeof(counts));
  WriteAll(fd, r.finish_s.data(), n * sizeof(double));
}

Status Receive(int fd, ReplayResult* r) {
  int32_t code = 0;
  uint64_t len = 0, n = 0;
  if (!ReadAll(fd, &code, sizeof(code)) || !ReadAll(fd, &len, sizeof(len))) {
    return InternalError("the simulation's process ended without a result");
  }
  std::string text(len, '\0');
  if (!ReadAll(fd, text.data(), len)) return InternalError("the simulation's result was cut short");
  if (code != 0) return Status(static_cast<Code>(code), text);
  double doubles[3];
  uint64_t counts[5];
  if (!ReadAll(fd, doubles, sizeof(doubles)) || !ReadAll(fd, counts, sizeof(counts))) {
    return InternalError("the simulation's result was cut short");
  }
  r->seconds = doubles[0];
  r->record_wall_s = doubles[1];
  r->replay_wall_s = doubles[2];
  r->messages = counts[0];
  r->schedule_bytes = counts[1];
  r->max_rss_bytes = counts[2];
  r->simgrid_hosts = counts[3];
  n = counts[4];
  r->finish_s.resize(n);
  if (!ReadAll(fd, r->finish_s.data(), n * sizeof(double))) return InternalError("the simulation's result was cut short");
  return Status::Ok();
}

}  // namespace

Status Replay(const Platform& platform, const Layout& layout, const ScheduleSource& schedules, ReplayResult* out,
              const ReplayOptions& options) {
  std::fflush(stdout);  // else the child would print what the parent has buffered
  std::fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) return ErrnoError("pipe for the simulation", errno);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ErrnoError("fork for the simulation", errno);
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a simulation outlives no parent
    close(fds[0]);
    ReplayResult r;
    const Status s = Simulate(platform, layout, schedules, options, &r);
    Report(fds[1], s, r);
    _exit(0);
  }
  close(fds[1]);
  ReplayResult r;
  const Status s = Receive(fds[0], &r);
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (!s.ok()) {
    const std::string how = WIFSIGNALED(wstatus) ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                                                 : "exit status " + std::to_string(WEXITSTATUS(wstatus));
    return s.code() == Code::kInternalError ? Status(s.code(), s.message() + " (" + how + ")") : s;
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace tessera
