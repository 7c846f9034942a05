// rank_harness: forks one process per rank, hands them the unique ids through shared
// memory, collects their results and never leaves a child behind. See rank_harness.h.
#include "tests/rank_harness.h"

#include <dirent.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern char** environ;

namespace tessera_test {
namespace {

constexpr int kMaxRanks = 64;
constexpr int kMaxIds = 8;
constexpr size_t kMessageBytes = 16384;
constexpr int kBarriers = 8;
constexpr size_t kExchangeBytes = 8192;  // ExchangeWithRanks, per rank

// Where a child is; written by the child, read by the parent when it reports a hang.
enum Phase : uint32_t {
  kStarting = 0,
  kCreatingIds,
  kWaitingForIds,
  kInit,
  kBody,
  kDestroy,
  kDone,
};

const char* PhaseName(uint32_t phase) {
  switch (phase) {
    case kStarting: return "start-up";
    case kCreatingIds: return "tesseraGetUniqueId";
    case kWaitingForIds: return "waiting for the unique id";
    case kInit: return "tesseraCommInitRank";
    case kBody: return "body";
    case kDestroy: return "tesseraCommDestroy";
    case kDone: return "done";
  }
  return "?";
}

enum IdsState : uint32_t { kIdsPending = 0, kIdsReady = 1, kIdsFailed = 2 };

struct RankSlot {
  uint32_t phase;
  uint32_t reported;  // set by the child once `message` holds its result
  uint32_t exited;    // set by the parent once it has reaped the child
  char message[kMessageBytes];
};

// The MAP_SHARED region; all fields start zeroed.
struct SharedState {
  uint32_t ids_state;   // IdsState, futex word
  uint32_t generation;  // bumped (futex word) whenever a rank reports or exits
  uint32_t barriers[kBarriers];  // arrivals, futex words (ArriveAndWait)
  char ids_error[1024];
  tesseraUniqueId ids[kMaxIds];
  RankSlot ranks[kMaxRanks];
  uint32_t exchanged[kMaxRanks];  // ExchangeWithRanks: 0, else 1 + the length (futex words)
  char exchange[kMaxRanks][kExchangeBytes];
};

// Set in each child, for the functions used inside bodies.
SharedState* g_child_shared = nullptr;
int g_child_rank = 0;
int g_child_nranks = 0;

uint32_t LoadAcquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void StoreRelease(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// Sleeps while *addr == expected, at most `ms` milliseconds (spurious wake-ups allowed).
void FutexWait(uint32_t* addr, uint32_t expected, int64_t ms) {
  if (ms <= 0) return;
  timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000;
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* addr) { syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

void BumpGeneration(SharedState* shared) {
  __atomic_add_fetch(&shared->generation, 1, __ATOMIC_ACQ_REL);
  FutexWakeAll(&shared->generation);
}

int64_t MillisUntil(std::chrono::steady_clock::time_point t) {
  auto left = std::chrono::duration_cast<Milliseconds>(t - std::chrono::steady_clock::now());
  return left.count() + 1;  // round up: never wake a millisecond early forever
}

void CopyMessage(char* dst, size_t cap, const std::string& src) {
  size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Removes inherited TESSERA_* variables (but TESSERA_DEBUG) so that only the test's
// settings apply, then applies the test's. TESSERA_TEST_TRANSPORT (set by a test
// target, e.g. to run a whole suite over UCX) becomes every rank's TESSERA_TRANSPORT
// unless the test chooses one itself.
void ApplyEnvironment(int rank, const RankOptions& opts) {
  const std::string test_transport = TestTransport();
  if (!test_transport.empty()) setenv("TESSERA_TRANSPORT", test_transport.c_str(), 1);
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    const bool keep = name == "TESSERA_DEBUG" || (name == "TESSERA_TRANSPORT" && !test_transport.empty());
    if (name.rfind("TESSERA_", 0) == 0 && !keep) inherited.push_back(name);
  }
  for (const std::string& name : inherited) unsetenv(name.c_str());
  if (opts.ranks_per_host > 0) {
    std::string host = "host" + std::to_string(rank / opts.ranks_per_host);
    setenv("TESSERA_HOST_ID", host.c_str(), 1);
  }
  for (const auto& kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  if (opts.env_for_rank) {
    for (const auto& kv : opts.env_for_rank(rank)) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
}

// Rank 0 creates and publishes the ids; the others wait for them. "" or a failure.
std::string HandOffIds(SharedState* shared, int rank, int count,
                       std::chrono::steady_clock::time_point deadline,
                       std::vector<tesseraUniqueId>* ids) {
  if (count == 0) return "";
  RankSlot& slot = shared->ranks[rank];
  if (rank == 0) {
    StoreRelease(&slot.phase, kCreatingIds);
    for (int i = 0; i < count; ++i) {
      tesseraResult_t r = tesseraGetUniqueId(&shared->ids[i]);
      if (r != tesseraSuccess) {
        std::string err = "tesseraGetUniqueId #" + std::to_string(i) + " returned " +
                          CodeName(r) + ": " + LastError(nullptr);
        CopyMessage(shared->ids_error, sizeof(shared->ids_error), err);
        StoreRelease(&shared->ids_state, kIdsFailed);
        FutexWakeAll(&shared->ids_state);
        return err;
      }
    }
    StoreRelease(&shared->ids_state, kIdsReady);
    FutexWakeAll(&shared->ids_state);
  } else {
    StoreRelease(&slot.phase, kWaitingForIds);
    uint32_t state;
    while ((state = LoadAcquire(&shared->ids_state)) == kIdsPending) {
      int64_t left = MillisUntil(deadline);
      if (left <= 0) return "timed out waiting for rank 0 to publish the unique id";
      FutexWait(&shared->ids_state, kIdsPending, left);
    }
    if (state == kIdsFailed) return std::string("rank 0 could not create the id: ") + shared->ids_error;
  }
  ids->assign(shared->ids, shared->ids + count);
  return "";
}

// The whole life of one child. Never returns.
[[noreturn]] void ChildMain(SharedState* shared, pid_t parent, int rank, int nranks,
                            const RankBody* body, const RawRankBody* raw_body,
                            const RankOptions& opts,
                            std::chrono::steady_clock::time_point deadline) {
  // Die with the test process, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(111);
  g_child_shared = shared;
  g_child_rank = rank;
  g_child_nranks = nranks;
  RankSlot& slot = shared->ranks[rank];
  std::string result;
  try {
    ApplyEnvironment(rank, opts);
    RankContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    result = HandOffIds(shared, rank, opts.unique_ids, deadline, &ctx.ids);
    if (result.empty() && raw_body != nullptr) {
      StoreRelease(&slot.phase, kBody);
      result = (*raw_body)(ctx);
    } else if (result.empty()) {
      StoreRelease(&slot.phase, kInit);
      tesseraComm_t comm = nullptr;
      result = InitComm(ctx, &comm);
      if (result.empty()) {
        StoreRelease(&slot.phase, kBody);
        result = (*body)(rank, comm);
        StoreRelease(&slot.phase, kDestroy);
        tesseraResult_t r = tesseraCommDestroy(comm);
        if (r != tesseraSuccess) {
          if (!result.empty()) result += "; ";
          result += "tesseraCommDestroy returned " + CodeName(r) + ": " + LastError(nullptr);
        }
      }
    }
  } catch (const std::exception& e) {
    result += std::string("exception in the rank: ") + e.what();
  } catch (...) {
    result += "unknown exception in the rank";
  }
#if defined(__SANITIZE_ADDRESS__)
  // A rank ends in _exit, which skips LeakSanitizer's check at exit: run it here, with
  // the communicator destroyed, so that what a rank leaks fails the test (the report is
  // on stderr).
  if (__lsan_do_recoverable_leak_check() != 0) {
    if (!result.empty()) result += "; ";
    result += "LeakSanitizer found leaks in this rank (report in the test log)";
  }
#endif
  CopyMessage(slot.message, sizeof(slot.message), result);
  StoreRelease(&slot.reported, 1);
  StoreRelease(&slot.phase, kDone);
  BumpGeneration(shared);
  fflush(stdout);
  fflush(stderr);
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  int pidfd = -1;
  bool reaped = false;
  int status = 0;
  bool hung = false;
  bool stopped = false;
  uint32_t phase_at_kill = kStarting;
  double seconds = 0;
};

// A rank that finished badly: reported a failure, or exited without reporting.
// Removes what a rank killed by the harness may have left in /dev/shm: the names of
// its shared-memory segments ("tessera-<pid>-...", "tessera-devslots-<pid>-...").
// Such a rank and its peers had no chance to clean up; the library's own clean-up
// after ranks that die by themselves is what the ShmLeak tests check, so nothing is
// removed when no rank was killed here.
void RemoveShmNamesOf(pid_t pid) {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  const std::string segment = "tessera-" + std::to_string(pid) + "-";
  const std::string slots = "tessera-devslots-" + std::to_string(pid) + "-";
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(segment, 0) == 0 || name.rfind(slots, 0) == 0) names.push_back(name);
  }
  closedir(dir);
  for (const std::string& name : names) unlink(("/dev/shm/" + name).c_str());
}

bool FinishedBadly(const SharedState* shared, int rank, const Child& c) {
  const RankSlot& slot = shared->ranks[rank];
  if (!LoadAcquire(&slot.reported)) return true;
  if (slot.message[0] != '\0') return true;
  return !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
}

std::vector<RankResult> Run(int nranks, const RankBody* body, const RawRankBody* raw_body,
                            const RankOptions& opts) {
  using Clock = std::chrono::steady_clock;
  std::vector<RankResult> results(nranks > 0 ? nranks : 0);
  for (int r = 0; r < static_cast<int>(results.size()); ++r) results[r].rank = r;
  if (nranks <= 0 || nranks > kMaxRanks || opts.unique_ids < 0 || opts.unique_ids > kMaxIds ||
      (opts.unique_ids == 0 && body != nullptr)) {
    for (RankResult& res : results) res.message = "RunRanks: bad arguments";
    return results;
  }
  void* mem = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    for (RankResult& res : results) res.message = std::string("RunRanks: mmap: ") + strerror(errno);
    return results;
  }
  auto* shared = static_cast<SharedState*>(mem);  // zero-filled by mmap

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + opts.timeout;
  std::vector<Child> children(nranks);
  fflush(stdout);
  fflush(stderr);
  std::string fork_error;
  const pid_t parent = getpid();
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) ChildMain(shared, parent, r, nranks, body, raw_body, opts, deadline);
    if (pid < 0) {
      fork_error = std::string("fork: ") + strerror(errno);
      break;
    }
    children[r].pid = pid;
    children[r].pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  }

  auto reap = [&](int r, int wait_flags) {
    Child& c = children[r];
    if (c.pid <= 0 || c.reaped) return;
    pid_t got = waitpid(c.pid, &c.status, wait_flags);
    if (got != c.pid) return;
    c.reaped = true;
    c.seconds = SecondsSince(start);
    if (c.pidfd >= 0) close(c.pidfd);
    c.pidfd = -1;
    StoreRelease(&shared->ranks[r].exited, 1);
    BumpGeneration(shared);
  };
  auto all_reaped = [&]() {
    for (const Child& c : children) {
      if (c.pid > 0 && !c.reaped) return false;
    }
    return true;
  };

  bool have_failure = false;
  Clock::time_point stop_at = deadline;
  while (fork_error.empty() && !all_reaped()) {
    const Clock::time_point wake = stop_at < deadline ? stop_at : deadline;
    int64_t left = MillisUntil(wake);
    if (Clock::now() >= wake) break;
    std::vector<pollfd> fds;
    std::vector<int> fd_rank;
    bool polling_all = true;
    for (int r = 0; r < nranks; ++r) {
      if (children[r].reaped) continue;
      if (children[r].pidfd < 0) {
        polling_all = false;
        continue;
      }
      fds.push_back(pollfd{children[r].pidfd, POLLIN, 0});
      fd_rank.push_back(r);
    }
    // Without pidfds (old kernels) fall back to checking every few milliseconds.
    int poll_ms = polling_all ? static_cast<int>(left < INT_MAX ? left : INT_MAX) : 5;
    int n = poll(fds.data(), fds.size(), poll_ms);
    if (n < 0 && errno != EINTR) break;
    for (int r = 0; r < nranks; ++r) {
      bool was_reaped = children[r].reaped;
      reap(r, WNOHANG);
      if (!was_reaped && children[r].reaped && !have_failure &&
          FinishedBadly(shared, r, children[r]) && opts.failure_grace.count() >= 0) {
        have_failure = true;
        stop_at = Clock::now() + opts.failure_grace;
      }
    }
  }

  // Nobody outlives this function: kill and reap whoever is left.
  for (int r = 0; r < nranks; ++r) {
    Child& c = children[r];
    if (c.pid <= 0 || c.reaped) continue;
    c.phase_at_kill = LoadAcquire(&shared->ranks[r].phase);
    if (have_failure && Clock::now() < deadline) {
      c.stopped = true;
    } else {
      c.hung = true;
    }
    kill(c.pid, SIGKILL);
    reap(r, 0);
  }
  // When the harness had to kill a rank (a hang, or the rest after one rank failed, e.g.
  // of a sanitizer report), nobody is left to remove the ranks' segments: do it here.
  bool killed_any = false;
  for (const Child& c : children) killed_any = killed_any || c.hung || c.stopped;
  if (killed_any) {
    for (const Child& c : children) {
      if (c.pid > 0) RemoveShmNamesOf(c.pid);
    }
  }

  for (int r = 0; r < nranks; ++r) {
    const Child& c = children[r];
    RankResult& res = results[r];
    const RankSlot& slot = shared->ranks[r];
    if (c.pid <= 0) {
      res.message = fork_error.empty() ? "not started" : "not started: " + fork_error;
      continue;
    }
    res.pid = c.pid;
    res.seconds = c.seconds;
    res.hung = c.hung;
    res.stopped = c.stopped;
    res.phase = PhaseName(c.hung || c.stopped ? c.phase_at_kill : LoadAcquire(&slot.phase));
    res.reported = LoadAcquire(&slot.reported) != 0;
    if (res.reported) res.message = slot.message;
    if (!c.hung && !c.stopped) {
      if (WIFEXITED(c.status)) res.exit_code = WEXITSTATUS(c.status);
      if (WIFSIGNALED(c.status)) res.signal = WTERMSIG(c.status);
    }
  }
  munmap(mem, sizeof(SharedState));
  return results;
}

}  // namespace

std::string RankResult::Describe() const {
  std::string who = "rank " + std::to_string(rank) + ": ";
  char secs[32];
  snprintf(secs, sizeof(secs), "%.2f s", seconds);
  if (hung) return who + "hung in " + phase + " (killed at the deadline, " + secs + ")";
  if (stopped) return who + "still in " + phase + " when killed after another rank failed";
  if (signal != 0) {
    return who + "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) +
           ") in " + phase + " after " + secs;
  }
  if (!reported) {
    return who + "exited with code " + std::to_string(exit_code) + " in " + phase +
           " without reporting, after " + secs;
  }
  if (!message.empty()) return who + message;
  if (exit_code != 0) return who + "exited with code " + std::to_string(exit_code);
  return who + "ok";
}

std::vector<RankResult> RunRanks(int nranks, const RankBody& body, const RankOptions& opts) {
  return Run(nranks, &body, nullptr, opts);
}

std::vector<RankResult> RunRanksRaw(int nranks, const RawRankBody& body, const RankOptions& opts) {
  return Run(nranks, nullptr, &body, opts);
}

std::string Failures(const std::vector<RankResult>& results) {
  std::string out;
  for (const RankResult& r : results) {
    if (!r.ok()) out += r.Describe() + "\n";
  }
  return out;
}

bool WaitForRanksDone(const std::vector<int>& ranks, Milliseconds limit) {
  SharedState* shared = g_child_shared;
  if (shared == nullptr) return false;
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    uint32_t generation = LoadAcquire(&shared->generation);
    bool all_done = true;
    for (int r : ranks) {
      if (r < 0 || r >= kMaxRanks) continue;
      const RankSlot& slot = shared->ranks[r];
      if (!LoadAcquire(&slot.reported) && !LoadAcquire(&slot.exited)) all_done = false;
    }
    if (all_done) return true;
    int64_t left = MillisUntil(deadline);
    if (std::chrono::steady_clock::now() >= deadline) return false;
    FutexWait(&shared->generation, generation, left);
  }
}

bool ArriveAndWait(int barrier, int count, Milliseconds limit) {
  SharedState* shared = g_child_shared;
  if (shared == nullptr || barrier < 0 || barrier >= kBarriers) return false;
  uint32_t* word = &shared->barriers[barrier];
  __atomic_add_fetch(word, 1, __ATOMIC_ACQ_REL);
  FutexWakeAll(word);
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    uint32_t arrived = LoadAcquire(word);
    if (arrived >= static_cast<uint32_t>(count)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    FutexWait(word, arrived, MillisUntil(deadline));
  }
}

bool ExchangeWithRanks(const std::string& mine, std::vector<std::string>* all, Milliseconds limit) {
  SharedState* shared = g_child_shared;
  if (shared == nullptr || mine.size() > kExchangeBytes) return false;
  memcpy(shared->exchange[g_child_rank], mine.data(), mine.size());
  StoreRelease(&shared->exchanged[g_child_rank], static_cast<uint32_t>(mine.size()) + 1);
  FutexWakeAll(&shared->exchanged[g_child_rank]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  all->assign(g_child_nranks, std::string());
  for (int r = 0; r < g_child_nranks; ++r) {
    uint32_t published;
    while ((published = LoadAcquire(&shared->exchanged[r])) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      FutexWait(&shared->exchanged[r], 0, MillisUntil(deadline));
    }
    (*all)[r].assign(shared->exchange[r], published - 1);
  }
  return true;
}

std::string InitComm(const RankContext& ctx, tesseraComm_t* comm, int id_index) {
  if (id_index < 0 || id_index >= static_cast<int>(ctx.ids.size())) return "InitComm: no such id";
  tesseraResult_t r = tesseraCommInitRank(comm, ctx.nranks, ctx.ids[id_index], ctx.rank);
  if (r == tesseraSuccess && *comm != nullptr) return "";
  if (r == tesseraSuccess) return "tesseraCommInitRank returned success but a NULL comm";
  return "tesseraCommInitRank(rank " + std::to_string(ctx.rank) + " of " +
         std::to_string(ctx.nranks) + ") returned " + CodeName(r) + ": " + LastError(nullptr);
}

bool RankChecks::Expect(bool cond, const std::string& what) {
  if (!cond) failures_ += what + "\n";
  return cond;
}

bool RankChecks::ExpectCode(tesseraResult_t got, tesseraResult_t want, const std::string& call) {
  if (got == want) return true;
  failures_ += call + ": got " + CodeName(got) + ", want " + CodeName(want) +
               " (last error: " + LastError(nullptr) + ")\n";
  return false;
}

bool RankChecks::ExpectContains(const std::string& text, const std::string& needle,
                                const std::string& what) {
  if (text.find(needle) != std::string::npos) return true;
  failures_ += what + ": \"" + text + "\" does not contain \"" + needle + "\"\n";
  return false;
}

std::string CodeName(tesseraResult_t code) {
  static const char* const kNames[] = {
      "tesseraSuccess",         "tesseraUnhandledCudaError", "tesseraSystemError",
      "tesseraInternalError",   "tesseraInvalidArgument",    "tesseraInvalidUsage",
      "tesseraRemoteError",     "tesseraInProgress",         "tesseraTimeout",
  };
  int c = static_cast<int>(code);
  std::string name = (c >= 0 && c < tesseraNumResults) ? kNames[c] : "unknown result";
  return name + "(" + std::to_string(c) + ")";
}

std::string LastError(tesseraComm_t comm) {
  const char* s = tesseraGetLastError(comm);
  return s != nullptr ? s : "(null)";
}

bool SmallSweep() {
  const char* v = getenv("TESSERA_TEST_SWEEP");
  return v != nullptr && strcmp(v, "small") == 0;
}

std::string TestTransport() {
  const char* v = getenv("TESSERA_TEST_TRANSPORT");
  return v != nullptr ? v : "";
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string CaptureStderr(const std::function<void()>& body) {
  char path[] = "/tmp/tessera_stderr_XXXXXX";
  const int file = mkstemp(path);
  if (file < 0) {
    body();
    return "";
  }
  fflush(stderr);
  const int saved = dup(2);
  dup2(file, 2);
  body();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

}  // namespace tessera_test
