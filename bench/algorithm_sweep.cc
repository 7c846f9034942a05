// algorithm_sweep: tessera's automatic allreduce choice against every algorithm forced,
// in one job and interleaved, so that what drifts on a machine (other work, which cores
// the scheduler gives, a shaped link's bursts) falls on all of them alike.
//
// Every rank joins the job (tesseraCommInitFromEnv), then creates over it one
// communicator left to choose ("auto") and one per algorithm, each with TESSERA_ALGO set
// to its name (rank 0's unique id broadcast over the job's). The job's communicator
// carries only the ids and the times, so every timed one is made and used alike (timing
// the job's own communicator as "auto" once had it 15-50% slower than the forced one of
// the algorithm it ran, at some sizes).
//
// For each size, -r rounds; in each round every communicator in turn (each round
// starting at the next one) runs -w warmup calls, a barrier and -n timed calls (float
// sum, out of place); its time is the timed calls' average, the maximum over ranks. A
// forced algorithm that does not apply at a size (the communicator ran another) is
// left out there.
//
// Rank 0 prints, per size: the median over rounds of each communicator's time (us),
// what auto ran, the best forced algorithm, auto over it (1.00: auto as fast), and the
// choice over it: the forced run of the algorithm auto ran over the best forced one
// (1.00: auto chose the best). Two communicators running one schedule differ by
// themselves (4x2 emulated hosts, three forced to the same algorithm, 5 rounds: up to
// 1.07 apart), which auto / best includes and choice / best leaves out.
//
//   bazel build --jobs=2 //bench:algorithm_sweep
//   mpirun --allow-run-as-root --oversubscribe -np 4 bazel-bin/bench/algorithm_sweep -b 8 -e 32K -f 4
//   bash tools/cluster/cluster.sh run --hosts 2 --ranks-per-host 2 -- bazel-bin/bench/algorithm_sweep ...
//
// Flags: -b minbytes (8) -e maxbytes (32M) -f factor (4) -n iterations (100) -w warmup
// (10) -r rounds (5) -a algorithms (comma-separated; default every allreduce algorithm)
// -o FILE -L HxR: rank 0 also writes measured choices for a layout of H hosts of R
// ranks (TESSERA_ALGO_TABLE's format, docs/algorithms.md): per size the best forced
// algorithm where it ran over 3% faster than auto's choice, else auto's, one line where
// that changes.
// Exit code 0; 1 when a call fails (the error is printed, naming the call and rank);
// 2 on bad flags.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench/perf_options.h"
#include "tessera/tessera.h"

namespace {

// -o writes a forced algorithm in place of auto's choice where it ran this much faster.
constexpr double kClearWin = 0.03;

constexpr const char* kAllAlgorithms =
    "ring,board,recursive_doubling,rabenseifner,torus,hierarchical,hierarchical_leader,hierarchical_doubling";

struct Flags {
  tessera_bench::PerfOptions sizes;
  int iters = 100;
  int warmup = 10;
  int rounds = 5;
  std::vector<std::string> algorithms;
  std::string out;     // -o
  std::string layout;  // -L
};

// What -o writes from each size on (rank 0).
struct Best {
  size_t bytes;
  std::string algorithm;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseFlags(int argc, char** argv, Flags* f, std::string* error) {
  f->sizes.min_bytes = 8;
  f->sizes.max_bytes = size_t{32} << 20;
  f->sizes.step_factor = 4;
  std::string algorithms = kAllAlgorithms;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return *error = flag + " needs a value", false;
    const std::string value = argv[i + 1];
    bool ok = true;
    if (flag == "-b") ok = tessera_bench::ParseByteSize(value, &f->sizes.min_bytes);
    else if (flag == "-e") ok = tessera_bench::ParseByteSize(value, &f->sizes.max_bytes);
    else if (flag == "-f") ok = (f->sizes.step_factor = std::strtoul(value.c_str(), nullptr, 10)) > 1;
    else if (flag == "-n") ok = (f->iters = std::atoi(value.c_str())) > 0;
    else if (flag == "-w") ok = (f->warmup = std::atoi(value.c_str())) >= 0;
    else if (flag == "-r") ok = (f->rounds = std::atoi(value.c_str())) > 0;
    else if (flag == "-a") algorithms = value;
    else if (flag == "-o") f->out = value;
    else if (flag == "-L") f->layout = value;
    else return *error = "unknown flag " + flag, false;
    if (!ok) return *error = "bad value '" + value + "' for " + flag, false;
  }
  if (f->sizes.min_bytes < 4 || f->sizes.min_bytes > f->sizes.max_bytes) return *error = "need 4 <= -b <= -e", false;
  if (f->out.empty() != f->layout.empty()) return *error = "-o and -L go together", false;
  f->algorithms = SplitCommas(algorithms);
  f->algorithms.insert(f->algorithms.begin(), "auto");
  return true;
}

// One communicator and what it is called in the table.
struct Candidate {
  std::string name;  // "auto" or the forced algorithm
  tesseraComm_t comm = nullptr;
};

bool Check(tesseraResult_t r, const std::string& call, int rank, tesseraComm_t comm) {
  if (r == tesseraSuccess) return true;
  std::fprintf(stderr, "algorithm_sweep: rank %d: %s failed: %s: %s\n", rank, call.c_str(), tesseraGetErrorString(r),
               tesseraGetLastError(comm));
  return false;
}

// A communicator of the job's ranks with TESSERA_ALGO=algo, its unique id from rank 0
// over `world`.
bool CreateForced(const std::string& algo, tesseraComm_t world, int rank, int nranks, Candidate* out) {
  tesseraUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0 && !Check(tesseraGetUniqueId(&id), "tesseraGetUniqueId", rank, nullptr)) return false;
  if (!Check(tesseraBroadcast(&id, &id, sizeof(id), tesseraUint8, 0, world, nullptr), "broadcast of the id", rank,
             world)) {
    return false;
  }
  setenv("TESSERA_ALGO", algo.c_str(), 1);
  out->name = algo;
  return Check(tesseraCommInitRank(&out->comm, nranks, id, rank), "creating the " + algo + " communicator", rank,
               nullptr);
}

// -w calls, a barrier, -n timed calls on `c`: the average time (us), the max over ranks.
bool TimeCalls(const Candidate& c, const Flags& f, size_t count, std::vector<float>& send, std::vector<float>& recv,
               tesseraComm_t world, int rank, double* us) {
  const std::string call = "allreduce of " + std::to_string(count * 4) + " B on " + c.name;
  for (int i = 0; i < f.warmup; ++i) {
    if (!Check(tesseraAllReduce(send.data(), recv.data(), count, tesseraFloat32, tesseraSum, c.comm, nullptr), call,
               rank, c.comm)) {
      return false;
    }
  }
  float token = 0;
  if (!Check(tesseraAllReduce(&token, &token, 1, tesseraFloat32, tesseraSum, c.comm, nullptr), "barrier", rank, c.comm)) {
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < f.iters; ++i) {
    if (!Check(tesseraAllReduce(send.data(), recv.data(), count, tesseraFloat32, tesseraSum, c.comm, nullptr), call,
               rank, c.comm)) {
      return false;
    }
  }
  *us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / f.iters;
  return Check(tesseraAllReduce(us, us, 1, tesseraFloat64, tesseraMax, world, nullptr), "max of the times", rank, world);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Us(double t) {
  char text[32];
  std::snprintf(text, sizeof(text), t < 10 ? "%.2f" : "%.1f", t);
  return text;
}

// One size: every candidate's rounds, then on rank 0 the row (medians) and, where the
// best forced algorithm changes, an entry in *bests.
bool SweepSize(const std::vector<Candidate>& all, const Flags& f, size_t count, tesseraComm_t world, int rank,
               std::vector<Best>* bests) {
  std::vector<float> send(count, 1.0f), recv(count);
  std::vector<std::vector<double>> times(all.size());
  std::vector<bool> applies(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    const char* ran = tesseraAllReduceAlgorithm(all[k].comm, count, tesseraFloat32);
    applies[k] = k == 0 || (ran != nullptr && all[k].name == ran);
  }
  for (int r = 0; r < f.rounds; ++r) {
    for (size_t i = 0; i < all.size(); ++i) {
      const size_t k = (i + r) % all.size();  // each round starts at the next: no one always first
      double us = 0;
      if (!applies[k]) continue;
      if (!TimeCalls(all[k], f, count, send, recv, world, rank, &us)) return false;
      times[k].push_back(us);
    }
  }
  if (rank != 0) return true;
  const char* chosen = tesseraAllReduceAlgorithm(all[0].comm, count, tesseraFloat32);
  std::vector<double> us(all.size());
  for (size_t k = 0; k < all.size(); ++k) us[k] = applies[k] ? Median(times[k]) : 0;
  std::string cells;
  size_t best = 0;
  for (size_t k = 1; k < all.size(); ++k) {
    cells += " | " + (applies[k] ? Us(us[k]) : std::string("-"));
    if (applies[k] && (best == 0 || us[k] < us[best])) best = k;
  }
  const double auto_us = us[0];
  const std::string ratio = best == 0 ? "-" : Us(auto_us / us[best]);
  // The choice itself, apart from the two communicators' spread: the forced run of
  // what auto ran over the best forced one.
  size_t same = 0;
  for (size_t k = 1; k < all.size(); ++k) {
    if (applies[k] && chosen != nullptr && all[k].name == chosen) same = k;
  }
  const std::string choice_ratio = best == 0 || same == 0 ? "-" : Us(us[same] / us[best]);
  // The file keeps auto's own choice unless a forced algorithm beat it clearly: rows
  // that follow run-to-run spread would change with every sweep.
  const bool beaten = best != 0 && us[best] * (1 + kClearWin) < auto_us;
  const std::string keep = beaten ? all[best].name : std::string(chosen ? chosen : "");
  if (!keep.empty() && (bests->empty() || bests->back().algorithm != keep)) bests->push_back(Best{count * 4, keep});
  std::printf("| %zu | %s | %s%s | %s | %s | %s |\n", count * 4, Us(auto_us).c_str(), chosen ? chosen : "?",
              cells.c_str(), best == 0 ? "-" : all[best].name.c_str(), ratio.c_str(), choice_ratio.c_str());
  std::fflush(stdout);
  return true;
}

// The measured choices file (-o) for layout -L.
bool WriteChoices(const Flags& f, const std::vector<Best>& bests) {
  FILE* out = std::fopen(f.out.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "algorithm_sweep: cannot write %s\n", f.out.c_str());
    return false;
  }
  std::fprintf(out,
               "# bench/algorithm_sweep: from each size on, the best forced allreduce where it beat auto's choice by "
               "over 3%%, else auto's; %d rounds of -n %d\n",
               f.rounds, f.iters);
  for (const Best& b : bests) std::fprintf(out, "allreduce %s %zu %s\n", f.layout.c_str(), b.bytes, b.algorithm.c_str());
  return std::fclose(out) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  std::string error;
  if (!ParseFlags(argc, argv, &f, &error)) {
    std::fprintf(stderr, "algorithm_sweep: %s\n(see the comment at the top of bench/algorithm_sweep.cc)\n",
                 error.c_str());
    return 2;
  }
  setenv("TESSERA_ALGO", "auto", 1);
  tesseraComm_t world = nullptr;
  if (!Check(tesseraCommInitFromEnv(&world), "tesseraCommInitFromEnv", -1, nullptr)) return 1;
  int rank = 0, nranks = 1;
  tesseraCommUserRank(world, &rank);
  tesseraCommCount(world, &nranks);
  std::vector<Candidate> all;
  bool ok = true;
  for (const std::string& algo : f.algorithms) {
    Candidate c;
    if (!(ok = CreateForced(algo, world, rank, nranks, &c))) break;
    all.push_back(c);
  }
  if (ok && rank == 0) {
    std::printf("# algorithm_sweep: %d ranks, -n %d -w %d, %d rounds interleaved, median us (max over ranks)\n",
                nranks, f.iters, f.warmup, f.rounds);
    std::string head = "| size (B) | auto | auto ran", rule = "|---:|---:|---:";
    for (size_t k = 1; k < all.size(); ++k) head += " | " + all[k].name, rule += "|---:";
    std::printf("%s | best forced | auto / best | choice / best |\n%s|---:|---:|---:|\n", head.c_str(), rule.c_str());
  }
  std::vector<Best> bests;
  for (size_t bytes : tessera_bench::SizeSeries(f.sizes)) {
    if (!ok) break;
    ok = SweepSize(all, f, bytes / 4, world, rank, &bests);
  }
  if (ok && rank == 0 && !f.out.empty()) ok = WriteChoices(f, bests);
  for (Candidate& c : all) {
    if (c.comm != nullptr) tesseraCommDestroy(c.comm);
  }
  tesseraCommDestroy(world);
  return ok ? 0 : 1;
}
