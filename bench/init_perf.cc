// init_perf: what creating a communicator costs each rank, at any size.
//
//   mpirun --allow-run-as-root --oversubscribe -np 64 bazel-bin/bench/init_perf -n 5
//
// Open MPI starts the ranks and only carries the unique id and the barriers; each round,
// rank 0 calls tesseraGetUniqueId (so it also serves the rendezvous), the ranks line up
// at a barrier, and each times its own tesseraCommInitRank, then its first allreduce of
// 8 bytes (what was left lazy: TCP links, first touches) and its tesseraCommDestroy. Per
// rank it reads what creation added: resident memory (VmRSS), file descriptors, threads,
// address space (VmSize: what it maps, shared memory included, touched or not), and on
// rank 0 what /dev/shm holds while the communicator lives. One row per round: the
// slowest rank's times (the job waits for it), the median rank's, and the per-rank
// medians and maxima of what it holds. "create CPU" is the CPU time the rank's process
// spent creating (all its threads): with more ranks than cores the wall time grows with
// the total, this column with one rank's. "root CPU" is rank 0's, which includes the
// rendezvous service it hosts.
#include <dirent.h>
#include <mpi.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A field of /proc/self/status ("VmRSS", "Threads"), in its own unit.
long StatusField(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(name) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::atol(line.c_str() + key.size());
  }
  return 0;
}

// CPU time of this process (all its threads) so far.
double CpuMs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

long OpenFds() {
  long n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

double ShmUsedMiB() {
  struct statvfs s;
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<double>(s.f_blocks - s.f_bfree) * s.f_frsize / (1 << 20);
}

struct Sample {
  double create_ms, create_cpu_ms, first_ms, destroy_ms;
  double rss_kib, vm_mib, fds, threads;
};

// Per-rank values gathered at rank 0, each column sorted.
std::vector<double> Gather(double v, int nranks) {
  std::vector<double> all(nranks);
  MPI_Gather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::sort(all.begin(), all.end());
  return all;
}

bool Fail(const char* what, tesseraResult_t r, tesseraComm_t comm) {
  std::fprintf(stderr, "init_perf: %s: %s: %s\n", what, tesseraGetErrorString(r), tesseraGetLastError(comm));
  MPI_Abort(MPI_COMM_WORLD, 1);
  return false;
}

Sample OneRound(int rank, int nranks, double* shm_mib) {
  tesseraUniqueId id;
  if (rank == 0) {
    const tesseraResult_t r = tesseraGetUniqueId(&id);
    if (r != tesseraSuccess) Fail("tesseraGetUniqueId", r, nullptr);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  const double shm_before = ShmUsedMiB();
  const long rss0 = StatusField("VmRSS"), vm0 = StatusField("VmSize"), fds0 = OpenFds(),
             threads0 = StatusField("Threads");
  MPI_Barrier(MPI_COMM_WORLD);
  Sample s{};
  tesseraComm_t comm = nullptr;
  double t = NowMs();
  const double cpu = CpuMs();
  tesseraResult_t r = tesseraCommInitRank(&comm, nranks, id, rank);
  s.create_ms = NowMs() - t;
  s.create_cpu_ms = CpuMs() - cpu;
  if (r != tesseraSuccess) Fail("tesseraCommInitRank", r, comm);
  s.rss_kib = static_cast<double>(StatusField("VmRSS") - rss0);
  s.vm_mib = static_cast<double>(StatusField("VmSize") - vm0) / 1024;
  s.fds = static_cast<double>(OpenFds() - fds0);
  s.threads = static_cast<double>(StatusField("Threads") - threads0);
  float x = 1.0f;
  t = NowMs();
  r = tesseraAllReduce(&x, &x, 2, tesseraFloat32, tesseraSum, comm, nullptr);
  s.first_ms = NowMs() - t;
  if (r != tesseraSuccess) Fail("first allreduce", r, comm);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) *shm_mib = ShmUsedMiB() - shm_before;
  MPI_Barrier(MPI_COMM_WORLD);
  t = NowMs();
  r = tesseraCommDestroy(comm);
  s.destroy_ms = NowMs() - t;
  if (r != tesseraSuccess) Fail("tesseraCommDestroy", r, nullptr);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int rounds = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "-n") == 0) rounds = std::atoi(argv[i + 1]);
  }
  if (rank == 0) {
    std::printf("# %d ranks; times in ms (slowest rank / median rank), per-rank median and max of what\n", nranks);
    std::printf("# creation added; /dev/shm in MiB while the communicator lives\n");
    std::printf("%6s %18s %18s %9s %18s %18s %16s %16s %12s %10s %8s\n", "ranks", "create", "create CPU", "root CPU",
                "first 8B", "destroy", "RSS KiB", "VM MiB", "fds", "threads", "shm MiB");
  }
  for (int round = 0; round < rounds; ++round) {
    double shm = 0;
    const Sample s = OneRound(rank, nranks, &shm);
    const double root_cpu = s.create_cpu_ms;  // read on rank 0 only
    const auto create = Gather(s.create_ms, nranks), cpu = Gather(s.create_cpu_ms, nranks);
    const auto first = Gather(s.first_ms, nranks), destroy = Gather(s.destroy_ms, nranks);
    const auto rss = Gather(s.rss_kib, nranks), vm = Gather(s.vm_mib, nranks), fds = Gather(s.fds, nranks),
               threads = Gather(s.threads, nranks);
    if (rank != 0) continue;
    auto med = [nranks](const std::vector<double>& v) { return v[nranks / 2]; };
    std::printf("%6d %8.1f / %7.1f %8.1f / %7.1f %9.1f %8.1f / %7.1f %8.1f / %7.1f %7.0f / %7.0f %7.0f / %7.0f "
                "%5.0f / %5.0f %4.0f / %3.0f %8.1f\n",
                nranks, create.back(), med(create), cpu.back(), med(cpu), root_cpu, first.back(), med(first),
                destroy.back(), med(destroy), med(rss), rss.back(), med(vm), vm.back(), med(fds), fds.back(),
                med(threads), threads.back(), shm);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
