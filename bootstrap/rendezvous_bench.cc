// What the rendezvous costs as ranks grow, for the model of creation at 100,000 ranks
// (docs/scale.md#creation-at-scale):
//
//   bazel build //bootstrap:rendezvous_bench
//   flock -x /work/.machine.lock bazel-bin/bootstrap/rendezvous_bench [--ranks 256,1024,4096] [--model 100000]
//
// 1. The real service and JoinRendezvous, one thread per rank in this process (loopback
//    TCP; 8 ranks a host, cards of the sizes a job publishes), for each rank count and
//    fanout: the wall time until every rank has its table, the service thread's CPU time
//    (from /proc, by its name, sampled every 2 ms by a real-time thread: it misses at
//    most the last sample's worth) and what it sent, and the CPU of the whole process
//    per rank.
// 2. The per-rank steps that grow with nranks, at --model ranks: the service encoding the
//    table, a rank decoding it, and the set-up a rank then does with it (hosts and pids,
//    the ranks of its host, the layout, three cards per rank).
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "topology/host_identity.h"
#include "topology/layout.h"

namespace tessera {
namespace {

constexpr int kRanksPerHost = 8;

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Resident memory of this process, in MiB.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 6, "VmRSS:") == 0) return std::atol(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

double ProcessCpuMs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// A rank's info as a job of 8 ranks a host publishes it: tcp and watch addresses, a
// shared-memory segment name, the agreed lines.
RankInfo InfoOf(int rank) {
  RankInfo info;
  info.pid = 100000 + rank;
  info.host = "node" + std::to_string(rank / kRanksPerHost) + ".cluster/net:4026531840/boot:095afb1e-8c1f-4b8e";
  AddAgreed("TESSERA_TRANSPORT=auto\nTESSERA_SHM_SLOT_BYTES=131072\nTESSERA_SHM_SLOTS=8\n"
            "TESSERA_SHM_SEGMENT_BYTES=67108864\nTESSERA_TCP_STREAMS=2\nTESSERA_TCP_CHUNK_BYTES=262144\n"
            "TESSERA_HALF_WIRE=float32\nTESSERA_CHECK_CALLS=1\n",
            &info);
  const std::string address("\x0a\x00\x01\x02\x9c\x40", 6);
  AddCard("watch", address, &info);
  AddCard("shm", "/tessera-" + std::to_string(info.pid) + "-0-123456", &info);
  AddCard("tcp", address, &info);
  return info;
}

// CPU nanoseconds of this process's thread named `name` so far (0 when there is none).
int64_t ThreadCpuNs(const char* name) {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  int64_t ns = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + e->d_name;
    std::string comm;
    std::getline(std::ifstream(task + "/comm"), comm);
    if (comm != name) continue;
    std::ifstream(task + "/schedstat") >> ns;
  }
  closedir(d);
  return ns;
}

// Part 1: the real thing, one thread per rank.
void RunJob(int nranks, int fanout) {
  UniqueIdData id;
  id.secret = RandomSecret();
  id.root_pid = 1;
  if (!StartRendezvous("127.0.0.1", 0, id.secret, 60000, fanout, &id.root).ok()) std::abort();
  std::atomic<int64_t> service_ns{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {  // the service thread's CPU, sampled until it ends
    sched_param realtime{};
    realtime.sched_priority = 1;  // so that thousands of rank threads do not starve it (root only)
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &realtime);
    while (!done.load()) {
      service_ns = std::max<int64_t>(service_ns.load(), ThreadCpuNs("tessera-rdv"));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<Status> results(nranks);
  std::vector<std::thread> ranks;
  const double cpu0 = ProcessCpuMs(), t0 = NowMs();
  for (int r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      RankTable table;
      results[r] = JoinRendezvous(id, r, nranks, InfoOf(r), "127.0.0.1", 60000, &table);
      if (results[r].ok() && (table.size() != nranks || table.pid(nranks - 1) != 100000 + nranks - 1)) {
        results[r] = InternalError("a wrong table");
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  const double wall = NowMs() - t0, cpu = ProcessCpuMs() - cpu0;
  done = true;
  watcher.join();
  int failed = 0;
  for (const Status& s : results) failed += !s.ok();
  std::vector<RankInfo> infos;
  for (int r = 0; r < nranks; ++r) infos.push_back(InfoOf(r));
  const size_t table = RankTable::Encode(infos).size() + 8;
  const double sent_kib = (nranks * (kJoinReplyHeaderBytes + 0.0) + std::min(fanout, nranks) * double(table)) / 1024;
  std::printf("%7d %7d %10.1f %12.1f %12.1f %12.1f %12.1f %7d\n", nranks, fanout, wall, service_ns.load() / 1e6,
              sent_kib, table / 1024.0, cpu / nranks, failed);
  std::fflush(stdout);
  if (failed > 0) std::fprintf(stderr, "first failure: %s\n", [&] {
      for (const Status& s : results) if (!s.ok()) return s.message();
      return std::string();
    }().c_str());
}

template <typename F>
double TimeMs(F f) {
  const double t = NowMs();
  f();
  return NowMs() - t;
}

// Part 2: the steps that grow with nranks, at `nranks`.
void Model(int nranks) {
  std::vector<RankInfo> infos;
  for (int r = 0; r < nranks; ++r) infos.push_back(InfoOf(r));
  std::string bytes;
  const double encode = TimeMs([&] { bytes = RankTable::Encode(infos); });
  RankTable table;
  const double decode = TimeMs([&] {
    if (!RankTable::Decode(bytes, nranks, &table).ok()) std::abort();
  });
  const int me = nranks / 2;
  size_t local = 0;
  // What a rank keeps from its set-up: every host identity and pid (the membership the
  // diagnosis asks), and the layout (which keeps its own copy of the identities).
  std::vector<std::string> hosts;
  std::vector<int> pids;
  Layout layout;
  const double rss0 = RssMiB();
  const double setup = TimeMs([&] {
    for (int r = 0; r < nranks; ++r) {
      hosts.push_back(table.host(r));
      pids.push_back(table.pid(r));
    }
    std::string card;
    for (const char* name : {"watch", "shm", "tcp"}) {
      for (int r = 0; r < nranks; ++r) table.FindCard(r, name, &card);
    }
    local = LocalRanks(hosts, pids, me).size();
    if (!Layout::FromHostIds(hosts, &layout).ok()) std::abort();
  });
  const double setup_mib = RssMiB() - rss0;
  JoinRequest request;
  request.rank = me;
  request.nranks = nranks;
  request.info = infos[me];
  const std::string wire = EncodeJoinRequest(42, request);
  const int reps = 100000;
  const double admit = TimeMs([&] {
    for (int i = 0; i < reps; ++i) {
      JoinRequest back;
      if (!DecodeJoinRequest(wire, 42, &back).ok() || !SettingMismatch(infos[0], back.info).empty()) std::abort();
    }
  });
  std::printf("| %d | %zu | %.1f | %.1f | %.1f | %.1f | %.2f | %zu |\n", nranks, bytes.size(), encode, decode, setup,
              setup_mib, admit * 1000 / reps, local);
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  std::vector<int> sizes = {256, 1024, 4096};
  int model = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) {
      sizes.clear();
      for (char* p = argv[i + 1]; *p;) {
        sizes.push_back(static_cast<int>(std::strtol(p, &p, 10)));
        if (*p == ',') ++p;
      }
    } else if (std::strcmp(argv[i], "--model") == 0) {
      model = std::atoi(argv[i + 1]);
    }
  }
  std::printf("# the rendezvous, one thread per rank (8 a host), loopback TCP\n");
  std::printf("%7s %7s %10s %12s %12s %12s %12s %7s\n", "ranks", "fanout", "wall ms", "service CPU", "service KiB",
              "table KiB", "CPU/rank ms", "failed");
  for (int n : sizes) {
    for (int fanout : {8, n}) tessera::RunJob(n, fanout);
  }
  std::printf("\n# per-rank steps that grow with nranks (ms; admit: us per join request at the service)\n");
  std::printf("| ranks | table bytes | encode (service) | decode (rank) | set-up (rank) | set-up MiB kept | admit us | "
              "local ranks |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  tessera::Model(model);
  return 0;
}
