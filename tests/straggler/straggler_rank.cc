// straggler_rank: one rank of the straggler suite (straggler_suite.py,
// docs/diagnosis.md#stragglers), on the public API only.
//
// mpirun starts it on every rank of an emulated cluster (tools/cluster/cluster.sh run);
// it creates its communicator from the launcher's environment and runs --calls
// allreduces of --bytes, --step-ms apart (a training step's wait for its data), each after
// --work-ms of this thread's CPU time (its compute: a rank whose core is shared takes
// longer), reading its health (tesseraCommGetHealth) every --check-every calls. It notes the first rank its health names and at which call, then waits, with
// its communicator (and so its metrics page) alive, until the suite writes
// <dir>/release (at most --linger-s), and writes <dir>/rank<R>.json:
//   {"rank", "pid", "calls", "seconds", "first_named", "first_named_at", "straggler",
//    "late_calls", "wait_share", "lag_s", "stalled_s", "window_calls", "verdict",
//    "peer_stalled_s": [...], "error"}
// Files in --dir: pid.R (written first: the suite slows the rank it names), looping.R
// (the first allreduce is done), done.R (the last), rank<R>.json.
//
// Usage: straggler_rank --dir DIR [--calls N] [--bytes B] [--step-ms M] [--work-ms W]
//                       [--check-every K] [--linger-s S]
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir;
  long calls = 10000;
  long bytes = 8;
  long check_every = 10;
  double step_ms = 0;
  double work_ms = 0;
  double linger_s = 30;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir") {
      a->dir = value;
    } else if (flag == "--calls") {
      a->calls = std::atol(value.c_str());
    } else if (flag == "--bytes") {
      a->bytes = std::atol(value.c_str());
    } else if (flag == "--step-ms") {
      a->step_ms = std::atof(value.c_str());
    } else if (flag == "--work-ms") {
      a->work_ms = std::atof(value.c_str());
    } else if (flag == "--check-every") {
      a->check_every = std::atol(value.c_str());
    } else if (flag == "--linger-s") {
      a->linger_s = std::atof(value.c_str());
    } else {
      return false;
    }
  }
  return !a->dir.empty() && a->calls > 0 && a->bytes >= 4 && a->check_every > 0 && a->step_ms >= 0 && a->work_ms >= 0 && (argc % 2) == 1;
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::string part = path + ".part";
  if (FILE* f = std::fopen(part.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
    std::rename(part.c_str(), path.c_str());
  }
}

double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Spins until this thread has had `ms` of CPU time: the longer, the more its core is shared.
void Work(double ms, std::vector<float>* scratch) {
  const double until = ThreadCpuMs() + ms;
  while (ThreadCpuMs() < until) {
    for (float& x : *scratch) x = x * 0.999f + 0.001f;
  }
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string Quoted(const char* text) {
  std::string out = "\"";
  for (const char* p = text; *p; ++p) {
    if (*p == '"' || *p == '\\') out += '\\';
    if (static_cast<unsigned char>(*p) >= 0x20) out += *p;
  }
  return out + "\"";
}

struct Outcome {
  long calls = 0;
  double seconds = 0;
  int first_named = -1;
  long first_named_at = -1;
  tesseraHealth_t health = TESSERA_HEALTH_INITIALIZER;
  std::vector<double> peer_stalled_s;
  std::string error;
};

std::string Json(int rank, const Outcome& o) {
  const tesseraHealth_t& h = o.health;
  std::string peers;
  for (double s : o.peer_stalled_s) peers += (peers.empty() ? "" : ", ") + std::to_string(s);
  char head[512];
  std::snprintf(head, sizeof(head),
                "{\"rank\": %d, \"pid\": %d, \"calls\": %ld, \"seconds\": %.3f, \"first_named\": %d, "
                "\"first_named_at\": %ld, \"straggler\": %d, \"late_calls\": %d, \"wait_share\": %.3f, \"lag_s\": %.6f, \"stalled_s\": %.3f, "
                "\"window_calls\": %d, ",
                rank, static_cast<int>(getpid()), o.calls, o.seconds, o.first_named, o.first_named_at, h.straggler,
                h.lateCalls, h.waitShare, h.stragglerLagSeconds, h.stalledSeconds, h.windowCalls);
  return std::string(head) + "\"verdict\": " + Quoted(h.verdict) + ", \"peer_stalled_s\": [" + peers +
         "], \"error\": " + Quoted(o.error.c_str()) + "}\n";
}

void Run(const Args& a, tesseraComm_t comm, int rank, int nranks, Outcome* o) {
  std::vector<float> data(static_cast<size_t>(a.bytes / 4), 1.0f);
  std::vector<float> scratch(256, 1.0f);
  const auto start = Clock::now();
  for (long i = 1; i <= a.calls; ++i) {
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.step_ms));
    if (a.work_ms > 0) Work(a.work_ms, &scratch);
    const tesseraResult_t r =
        tesseraAllReduce(data.data(), data.data(), data.size(), tesseraFloat32, tesseraSum, comm, nullptr);
    if (r != tesseraSuccess) {
      o->error = std::string("allreduce ") + std::to_string(i) + ": " + tesseraGetLastError(comm);
      return;
    }
    o->calls = i;
    if (i == 1) WriteFile(a.dir + "/looping." + std::to_string(rank), "");
    if (i % a.check_every != 0 && i != a.calls) continue;
    tesseraHealth_t h = TESSERA_HEALTH_INITIALIZER;
    if (tesseraCommGetHealth(comm, &h, nullptr, 0) == tesseraSuccess && h.straggler >= 0 && o->first_named < 0) {
      o->first_named = h.straggler;
      o->first_named_at = i;
    }
  }
  o->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  WriteFile(a.dir + "/done." + std::to_string(rank), "");
  // Alive, without calling, until the suite has read Prometheus.
  const auto until = Clock::now() + std::chrono::duration<double>(a.linger_s);
  while (!Exists(a.dir + "/release") && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  o->peer_stalled_s.assign(nranks, 0.0);
  tesseraCommGetHealth(comm, &o->health, o->peer_stalled_s.data(), nranks);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: straggler_rank --dir DIR [--calls N] [--bytes B] [--step-ms M] [--work-ms W] "
                 "[--check-every K] [--linger-s S]\n");
    return 2;
  }
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  const int world_rank = rank_text != nullptr ? std::atoi(rank_text) : 0;
  WriteFile(a.dir + "/pid." + std::to_string(world_rank), std::to_string(getpid()) + "\n");
  tesseraComm_t comm = nullptr;
  Outcome o;
  int rank = world_rank, nranks = 1;
  if (tesseraCommInitFromEnv(&comm) != tesseraSuccess) {
    o.error = std::string("tesseraCommInitFromEnv: ") + tesseraGetLastError(nullptr);
  } else {
    tesseraCommUserRank(comm, &rank);
    tesseraCommCount(comm, &nranks);
    Run(a, comm, rank, nranks, &o);
    tesseraCommDestroy(comm);
  }
  WriteFile(a.dir + "/rank" + std::to_string(rank) + ".json", Json(rank, o));
  return o.error.empty() ? 0 : 1;
}
