// test_ranks: forks one process per rank, hands them the unique ids through shared
// memory, collects their results and leaves no child behind. See test_ranks.h.
#include "nccl/test_ranks.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace nccl_test {
namespace {

constexpr int kMaxRanks = 16;
constexpr int kMaxIds = 4;
constexpr int kBarriers = 8;
constexpr size_t kMessageBytes = 8192;

enum IdsState : int { kIdsPending = 0, kIdsReady = 1, kIdsFailed = 2 };

// The MAP_SHARED region; zeroed by mmap.
struct Shared {
  int ids_state;
  int barriers[kBarriers];
  ncclUniqueId ids[kMaxIds];
  char ids_error[1024];
  int reported[kMaxRanks];
  char messages[kMaxRanks][kMessageBytes];
};

Shared* g_shared = nullptr;  // set in each child

int Load(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void Store(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void SleepMs(int ms) {
  timespec ts{0, ms * 1000000L};
  nanosleep(&ts, nullptr);
}

void CopyMessage(char* dst, size_t cap, const std::string& src) {
  const size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Rank 0 creates and publishes the ids; the others wait for them. "" or a failure.
std::string HandOffIds(Shared* shared, const RankOptions& opts, int64_t deadline_ms, RankContext* ctx) {
  if (ctx->rank == 0) {
    for (int i = 0; i < opts.unique_ids; ++i) {
      const ncclResult_t r = ncclGetUniqueId(&shared->ids[i]);
      if (r != ncclSuccess) {
        const std::string err = "ncclGetUniqueId returned " + CodeName(r) + ": " + LastError(nullptr);
        CopyMessage(shared->ids_error, sizeof(shared->ids_error), err);
        Store(&shared->ids_state, kIdsFailed);
        return err;
      }
    }
    Store(&shared->ids_state, kIdsReady);
  } else {
    int state;
    while ((state = Load(&shared->ids_state)) == kIdsPending) {
      if (NowMs() > deadline_ms) return "timed out waiting for rank 0 to publish the unique id";
      SleepMs(1);
    }
    if (state == kIdsFailed) return std::string("rank 0 could not create the id: ") + shared->ids_error;
  }
  ctx->ids.assign(shared->ids, shared->ids + opts.unique_ids);
  return "";
}

[[noreturn]] void ChildMain(Shared* shared, pid_t parent, int rank, int nranks, const RankBody& body,
                            const RankOptions& opts, int64_t deadline_ms) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the test, whatever happens to it
  if (getppid() != parent) _exit(111);
  g_shared = shared;
  std::string result;
  try {
    for (const auto& kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    RankContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    result = HandOffIds(shared, opts, deadline_ms, &ctx);
    if (result.empty()) result = body(ctx);
  } catch (const std::exception& e) {
    result += std::string("exception: ") + e.what();
  } catch (...) {
    result += "unknown exception";
  }
  CopyMessage(shared->messages[rank], kMessageBytes, result);
  Store(&shared->reported[rank], 1);
  _exit(0);
}

}  // namespace

std::string RunRanks(int nranks, const RankBody& body, const RankOptions& opts) {
  if (nranks < 1 || nranks > kMaxRanks) return "RunRanks: nranks out of range";
  if (opts.unique_ids < 1 || opts.unique_ids > kMaxIds) return "RunRanks: unique_ids out of range";
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return std::string("mmap failed: ") + strerror(errno);
  Shared* shared = static_cast<Shared*>(mem);
  const int64_t deadline_ms = NowMs() + opts.timeout_ms;
  const pid_t parent = getpid();
  std::vector<pid_t> pids(nranks, -1);
  std::string failures;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) ChildMain(shared, parent, r, nranks, body, opts, deadline_ms);
    if (pid < 0) {
      failures += "fork of rank " + std::to_string(r) + " failed: " + strerror(errno) + "\n";
      break;
    }
    pids[r] = pid;
  }
  // Reap every child; at the deadline (or when a fork failed) kill those still running.
  std::vector<int> status(nranks, 0);
  std::vector<bool> reaped(nranks, false), killed(nranks, false);
  int left = 0;
  for (pid_t p : pids) left += p > 0 ? 1 : 0;
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (pids[r] <= 0 || reaped[r]) continue;
      if (waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
        reaped[r] = true;
        --left;
      }
    }
    if (left == 0) break;
    if (NowMs() > deadline_ms || !failures.empty()) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] > 0 && !reaped[r] && !killed[r]) {
          kill(pids[r], SIGKILL);
          killed[r] = true;
        }
      }
    }
    SleepMs(2);
  }
  for (int r = 0; r < nranks; ++r) {
    if (pids[r] <= 0) continue;
    const std::string who = "rank " + std::to_string(r) + ": ";
    if (killed[r]) {
      failures += who + "still running after " + std::to_string(opts.timeout_ms) + " ms: killed\n";
    } else if (WIFSIGNALED(status[r])) {
      failures += who + "killed by signal " + std::to_string(WTERMSIG(status[r])) + "\n";
    } else if (!Load(&shared->reported[r])) {
      failures += who + "exited with code " + std::to_string(WEXITSTATUS(status[r])) + " without reporting\n";
    } else if (shared->messages[r][0] != '\0') {
      failures += who + shared->messages[r] + "\n";
    }
  }
  munmap(mem, sizeof(Shared));
  return failures;
}

std::string InitComm(const RankContext& ctx, ncclComm_t* comm, int id) {
  const ncclResult_t r = ncclCommInitRank(comm, ctx.nranks, ctx.ids[id], ctx.rank);
  if (r == ncclSuccess) return "";
  return "ncclCommInitRank returned " + CodeName(r) + ": " + LastError(nullptr);
}

bool ArriveAndWait(int barrier, int count, int timeout_ms) {
  if (g_shared == nullptr || barrier < 0 || barrier >= kBarriers) return false;
  int* word = &g_shared->barriers[barrier];
  __atomic_add_fetch(word, 1, __ATOMIC_ACQ_REL);
  const int64_t deadline = NowMs() + timeout_ms;
  while (Load(word) < count) {
    if (NowMs() > deadline) return false;
    SleepMs(1);
  }
  return true;
}

bool Checks::Expect(bool cond, const std::string& what) {
  if (!cond) text_ += what + "; ";
  return cond;
}

bool Checks::ExpectCode(ncclResult_t got, ncclResult_t want, const std::string& call, ncclComm_t comm) {
  if (got == want) return true;
  text_ += call + " returned " + CodeName(got) + ", want " + CodeName(want) + " (last error: " + LastError(comm) +
           "); ";
  return false;
}

bool Checks::ExpectContains(const std::string& text, const std::string& needle, const std::string& what) {
  return Expect(text.find(needle) != std::string::npos, what + ": \"" + text + "\" lacks \"" + needle + "\"");
}

void Checks::Add(const std::string& failures) { text_ += failures; }

std::string CodeName(ncclResult_t code) {
  static const char* const kNames[] = {"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError",
                                       "ncclInternalError",   "ncclInvalidArgument",    "ncclInvalidUsage",
                                       "ncclRemoteError",     "ncclInProgress"};
  const int c = static_cast<int>(code);
  const char* name = c >= 0 && c < 8 ? kNames[c] : "unknown";
  return std::string(name) + "(" + std::to_string(c) + ")";
}

std::string LastError(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text != nullptr ? text : "(null)";
}

}  // namespace nccl_test
