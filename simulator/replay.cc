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
#include <memory>
#include <string>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "simulator/simgrid_platform.h"

namespace tessera {
namespace {

namespace sg4 = simgrid::s4u;

constexpr double kNever = std::numeric_limits<double>::infinity();

// What every rank's actor shares.
struct World {
  const Platform* platform = nullptr;
  const Layout* layout = nullptr;
  const std::vector<RankSchedule>* schedules = nullptr;
  uint32_t max_chunks = 0;
  SimGridPlatform hosts;
  std::vector<double> finish_s;
  std::vector<uint8_t> finished;  // by rank: its actor ran its whole schedule
};

// A message of the exchange being replayed, as it moves. Its chunks: the first is the
// part that wakes the receiver (its class's wake_bytes), the others chunk_bytes each.
struct Transfer {
  const Message* m = nullptr;
  uint64_t gate_offset = 0;  // send: where its data starts in its gate's bytes
  uint64_t first = 1, chunk = 1;
  uint32_t chunks = 1;
  uint32_t started = 0;    // chunks put (send) or gets posted (receive)
  uint32_t moved = 0;      // chunks whose comm completed
  uint32_t reducing = 0;   // receive: chunks handed to the reduction
  uint32_t final = 0;      // receive: chunks received and reduced
  uint32_t in_flight = 0;
  double noticed = kNever;  // receive: when its receiver has noticed it (first chunk + overhead)
  bool done = false;

  // Bytes in chunks 0 .. n-1.
  uint64_t Covered(uint32_t n) const { return n == 0 ? 0 : std::min<uint64_t>(m->bytes, first + (n - 1) * chunk); }
  uint64_t ChunkBytes(uint32_t k) const { return Covered(k + 1) - Covered(k); }
  // What a gated send may read of this receive at `now`; once it is done, a send may
  // read past its end (its data continues in bytes made final before, as the
  // engine's Available says).
  uint64_t ReadyBytes(double now) const {
    return done ? std::numeric_limits<uint64_t>::max() : (now >= noticed ? Covered(final) : 0);
  }
  // The first chunk is small and a second may fly beside it; otherwise one at a time.
  bool MayStart() const { return started < chunks && (in_flight == 0 || (started == 1 && first < chunk)); }
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
    for (step_ = 0; step_ < s.steps.size(); ++step_) {
      const Step& step = s.steps[step_];
      if (step.kind == Step::kCopy) {
        Compute(step.copy_bytes * (w_->platform->reduce_Bps / w_->platform->copy_Bps))->wait();
      } else {
        RunExchange(s, step);
      }
    }
    w_->finish_s[rank_] = sg4::Engine::get_clock();
    w_->finished[rank_] = 1;
  }

  // Where this rank stopped, for a replay that could not complete: its step and the
  // first messages of that exchange still waiting, with what each waits for.
  std::string DescribeStop() const {
    const RankSchedule& s = (*w_->schedules)[rank_];
    std::string out = "rank " + std::to_string(rank_) + " stopped in step " + std::to_string(step_) + " of " +
                      std::to_string(s.steps.size());
    if (step_ >= s.steps.size() || s.steps[step_].kind == Step::kCopy) return out;
    out += " (an exchange of " + std::to_string(transfers_.size()) + " messages, " + std::to_string(remaining_) +
           " not done)";
    int shown = 0;
    for (const Queue& q : queues_) {
      if (q.head == q.items.size() || shown == 3) continue;
      out += shown++ == 0 ? ": " : "; ";
      out += DescribeWait(q, transfers_[q.items[q.head]]);
    }
    return out;
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

  // The chunks of a message: the same on both sides (from its size and class).
  void Chunk(Transfer* t) const {
    const MessageClass& c = ClassOf(t->m->peer);
    t->chunk = std::max<uint64_t>(1, c.chunk_bytes);
    if (w_->max_chunks > 0) t->chunk = std::max<uint64_t>(t->chunk, (t->m->bytes + w_->max_chunks - 1) / w_->max_chunks);
    t->first = std::min<uint64_t>(t->chunk, std::max<uint64_t>(1, c.wake_bytes));
    const uint64_t rest = t->m->bytes > t->first ? t->m->bytes - t->first : 0;
    t->chunks = 1 + static_cast<uint32_t>((rest + t->chunk - 1) / t->chunk);
  }

  void BuildQueues(const RankSchedule& s, const Step& step) {
    transfers_.assign(step.count, Transfer());
    queues_.clear();
    for (uint32_t i = 0; i < step.count; ++i) {
      Transfer& t = transfers_[i];
      t.m = &s.messages[step.first + i];
      if (t.m->gate >= 0) t.gate_offset = s.GateOffsetOf(step.first + i);
      Chunk(&t);
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
  }

  std::string DescribeWait(const Queue& q, const Transfer& t) const {
    std::string out = std::string(q.is_send ? "send of " : "receive of ") + std::to_string(t.m->bytes) + " B " +
                      (q.is_send ? "to" : "from") + " rank " + std::to_string(q.peer) + ", " +
                      std::to_string(t.moved) + " of " + std::to_string(t.chunks) + " chunks moved";
    if (!q.is_send || t.m->gate < 0) return out;
    const Transfer& g = transfers_[t.m->gate];
    return out + ", gated on the receive of " + std::to_string(g.m->bytes) + " B from rank " +
           std::to_string(g.m->peer) + " (" + std::to_string(g.final) + " of " + std::to_string(g.chunks) +
           " chunks final" + (t.gate_offset > 0 ? ", from byte " + std::to_string(t.gate_offset) : "") + ")";
  }

  bool GateAllows(const Transfer& t, double now) const {
    if (t.m->gate < 0) return true;
    const uint64_t ready = transfers_[t.m->gate].ReadyBytes(now);
    return ready >= t.gate_offset && ready - t.gate_offset >= t.Covered(t.started + 1);
  }

  // Starts every chunk that may start now.
  void Launch() {
    const double now = sg4::Engine::get_clock();
    for (size_t qi = 0; qi < queues_.size(); ++qi) {
      Queue& q = queues_[qi];
      if (q.head == q.items.size()) continue;
      const int ti = q.items[q.head];
      Transfer& t = transfers_[ti];
      while (t.MayStart() && (!q.is_send || GateAllows(t, now))) {
        if (q.is_send) {
          Add(q.box->put_async(&q, t.ChunkBytes(t.started)), Tag{Tag::kChunk, static_cast<int>(qi), ti});
        } else {
          Add(q.box->get_async(&q.slot), Tag{Tag::kChunk, static_cast<int>(qi), ti});
        }
        ++t.started;
        ++t.in_flight;
      }
    }
  }

  void Add(sg4::ActivityPtr a, Tag tag) {
    pending_.push_back(std::move(a));
    tags_.push_back(tag);
  }

  // Completes the head of every queue that is done, and says when the earliest receive
  // waiting to be noticed will be (infinity if none).
  double Settle() {
    const double now = sg4::Engine::get_clock();
    double next = kNever;
    for (Queue& q : queues_) {
      while (q.head < q.items.size()) {
        Transfer& t = transfers_[q.items[q.head]];
        const bool complete = q.is_send ? t.moved == t.chunks : t.final == t.chunks && now >= t.noticed;
        if (!q.is_send && t.final > 0 && now < t.noticed) next = std::min(next, t.noticed);
        if (!complete) break;
        t.done = true;
        ++q.head;
        --remaining_;
      }
    }
    return next;
  }

  void Handle(const Tag& tag) {
    Transfer& t = transfers_[tag.transfer];
    if (tag.kind == Tag::kReduce) {
      ++t.final;
      return;
    }
    --t.in_flight;
    if (++t.moved == 1 && !queues_[tag.queue].is_send) {
      t.noticed = sg4::Engine::get_clock() + ClassOf(t.m->peer).overhead_s;
    }
    if (queues_[tag.queue].is_send) return;
    if (t.m->reduces) {
      Add(Compute(static_cast<double>(t.ChunkBytes(t.reducing++))), Tag{Tag::kReduce, tag.queue, tag.transfer});
    } else {
      ++t.final;
    }
  }

  void RunExchange(const RankSchedule& s, const Step& step) {
    BuildQueues(s, step);
    remaining_ = step.count;
    double next = Settle();
    while (remaining_ > 0) {
      Launch();
      const double wait = next - sg4::Engine::get_clock();
      if (pending_.empty()) {
        sg4::this_actor::sleep_for(std::max(0.0, wait));
      } else {
        const ssize_t i = std::isinf(next) ? sg4::Activity::wait_any(pending_)
                                            : sg4::Activity::wait_any_for(pending_, std::max(0.0, wait));
        if (i >= 0 && static_cast<size_t>(i) < pending_.size()) {  // else the timer
          const Tag tag = tags_[i];
          pending_[i] = std::move(pending_.back());
          pending_.pop_back();
          tags_[i] = tags_.back();
          tags_.pop_back();
          Handle(tag);
        }
      }
      next = Settle();
    }
  }

  World* w_;
  const int rank_;
  const int node_;
  std::vector<Transfer> transfers_;
  std::vector<Queue> queues_;
  std::vector<sg4::ActivityPtr> pending_;
  std::vector<Tag> tags_;
  uint32_t remaining_ = 0;
  size_t step_ = 0;
};

// A replay in which some rank never finished (SimGrid found no activity that could
// ever complete): an error naming how many, when, and where the first few stopped.
Status Unfinished(const World& w, const std::vector<std::shared_ptr<RankActor>>& actors, double clock_s) {
  std::vector<int> stuck;
  for (int r = 0; r < static_cast<int>(w.finished.size()); ++r) {
    if (!w.finished[r]) stuck.push_back(r);
  }
  if (stuck.empty()) return Status::Ok();
  std::string text = "the replay cannot complete: " + std::to_string(stuck.size()) + " of " +
                     std::to_string(w.finished.size()) + " ranks wait for messages that never come (at " +
                     std::to_string(clock_s * 1e6) + " us of simulated time)";
  for (size_t k = 0; k < stuck.size() && k < 3; ++k) text += "; " + actors[stuck[k]]->DescribeStop();
  return InternalError(text);
}

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
  world.finished.assign(layout.nranks(), 0);
  TESSERA_RETURN_IF_ERROR(BuildSimGridPlatform(platform, layout, &world.hosts));
  std::vector<std::shared_ptr<RankActor>> actors;  // outlive the engine's run, to say where they stopped
  for (int r = 0; r < layout.nranks(); ++r) {
    actors.push_back(std::make_shared<RankActor>(&world, r));
    sg4::Actor::create("rank" + std::to_string(r), world.hosts.rank_hosts[r], [a = actors.back()] { (*a)(); });
  }
  engine.run();
  TESSERA_RETURN_IF_ERROR(Unfinished(world, actors, sg4::Engine::get_clock()));
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

ReplayOptions ReplayOptionsFor(const AlgorithmInfo& algorithm) {
  ReplayOptions options;
  options.max_chunks = algorithm.pipelined ? 0 : 4;
  return options;
}

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
    const bool clean_exit = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    return clean_exit ? s : Status(s.code(), s.message() + " (" + how + ")");
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace tessera
