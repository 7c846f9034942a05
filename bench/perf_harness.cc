// The size loop, timing and validation of the *_perf programs (see perf_harness.h).
#include "bench/perf_harness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/perf_table.h"

namespace tessera_bench {
namespace {

// Byte written over recvbuff before a checked call, so that a call that writes
// nothing is caught: 0xA5 repeated is none of the small values the checks expect.
constexpr unsigned char kPoisonByte = 0xA5;

// Characters of each rank's "#  Rank ..." line carried to rank 0.
constexpr size_t kRankLineChars = 128;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

// Page-aligned and touched, so that page faults stay out of the timed calls.
Buffer AllocateTouched(size_t bytes) {
  const size_t kPage = 4096;
  size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  Buffer buffer(static_cast<unsigned char*>(std::aligned_alloc(kPage, rounded)));
  if (buffer) std::memset(buffer.get(), 0, rounded);
  return buffer;
}

// This process's rank as the launcher set it, before any communicator exists: lets a
// failure that every rank hits alike (bad flags) be printed once. 0 when run alone.
int LauncherRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::atoi(value);
  }
  return 0;
}

std::string BaseName(const char* path) {
  std::string name = path != nullptr ? path : "perf";
  size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown-host";
  return host;
}

std::string CaseName(const char* collective, size_t count, DataType type, ReduceOp op,
                     bool in_place) {
  return std::string(collective) + " of " + std::to_string(count) + " x " + DataTypeName(type) +
         " (" + ReduceOpName(op) + ", " + (in_place ? "in-place" : "out-of-place") + ")";
}

// One run of the benchmark on this rank.
class PerfRun {
 public:
  PerfRun(const std::string& program, const PerfOptions& options, CollectiveBackend& backend,
          PerfCollective& collective)
      : program_(program),
        options_(options),
        backend_(backend),
        collective_(collective),
        rank_(backend.Rank()),
        nranks_(backend.Size()) {}

  int Run();

 private:
  Outcome GatherRankLines(std::vector<std::string>* lines);
  Outcome AllocateBuffers();
  Outcome MeasureGroup(DataType type, ReduceOp op, const BufferCounts& counts, bool in_place,
                       GroupResult* group);
  Outcome TimedCalls(DataType type, ReduceOp op, const BufferCounts& counts, const void* send, void* recv,
                     double* us_per_call);
  Outcome CallOnce(DataType type, ReduceOp op, const BufferCounts& counts, const void* send,
                   void* recv) {
    return collective_.Run(backend_, send, recv, counts, type, op);
  }
  // Reports `outcome` (naming this rank) and returns kExitFailed.
  int Fail(const Outcome& outcome);
  void Print(const std::string& text) const {
    if (rank_ != 0) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  const std::string program_;
  const PerfOptions options_;
  CollectiveBackend& backend_;
  PerfCollective& collective_;
  const int rank_;
  const int nranks_;
  Buffer send_;
  Buffer recv_;
};

int PerfRun::Fail(const Outcome& outcome) {
  // The table on stdout says why it ends early; the message itself goes to stderr.
  Print("# stopped: " + outcome.message() + "\n");
  if (outcome.kind() == Outcome::Kind::kRejected) {
    // Every rank was refused alike and all are still in step: one message, clean exit.
    if (rank_ == 0) std::fprintf(stderr, "%s: %s\n", program_.c_str(), outcome.message().c_str());
    return kExitFailed;
  }
  std::fprintf(stderr, "%s: rank %d: %s\n", program_.c_str(), rank_, outcome.message().c_str());
  std::fflush(stderr);
  backend_.AbortJob();
  return kExitFailed;
}

Outcome PerfRun::GatherRankLines(std::vector<std::string>* lines) {
  // Each rank writes its line, one character per slot, into its own stretch of a
  // zeroed array; a sum over ranks then holds every line.
  std::vector<int64_t> chars(static_cast<size_t>(nranks_) * kRankLineChars, 0);
  std::string mine = FormatRankLine(rank_, static_cast<int>(getpid()), HostName());
  for (size_t i = 0; i < mine.size() && i + 1 < kRankLineChars; ++i) {
    chars[rank_ * kRankLineChars + i] = static_cast<unsigned char>(mine[i]);
  }
  Outcome outcome = backend_.SumAcrossRanks(chars.data(), chars.size());
  if (!outcome.ok()) return outcome.Annotate("gathering the rank lines");
  for (int r = 0; r < nranks_; ++r) {
    std::string line;
    for (size_t i = 0; i < kRankLineChars && chars[r * kRankLineChars + i] != 0; ++i) {
      line += static_cast<char>(chars[r * kRankLineChars + i]);
    }
    lines->push_back(line);
  }
  return Outcome::Ok();
}

Outcome PerfRun::AllocateBuffers() {
  std::vector<size_t> sizes = SizeSeries(options_);
  size_t largest = sizes.empty() ? 0 : sizes.back();
  size_t send_bytes = 0;
  size_t recv_bytes = 0;
  for (DataType type : options_.types) {
    size_t element_size = ElementSize(type);
    BufferCounts counts = collective_.CountsForBytes(largest, element_size, nranks_);
    send_bytes = std::max(send_bytes, counts.send * element_size);
    recv_bytes = std::max(recv_bytes, counts.recv * element_size);
  }
  send_ = AllocateTouched(send_bytes);
  recv_ = AllocateTouched(recv_bytes);
  // A rank that cannot allocate must not leave the others waiting in a collective:
  // all ranks agree on whether everyone succeeded.
  int64_t failed = (send_ && recv_) ? 0 : 1;
  if (failed) {
    std::fprintf(stderr, "%s: rank %d: cannot allocate %zu + %zu bytes of buffers\n",
                 program_.c_str(), rank_, send_bytes, recv_bytes);
  }
  Outcome outcome = backend_.SumAcrossRanks(&failed, 1);
  if (!outcome.ok()) return outcome.Annotate("agreeing on buffer allocation");
  if (failed != 0) {
    return Outcome::Rejected(std::to_string(failed) + " rank(s) could not allocate " +
                             std::to_string(send_bytes) + " + " + std::to_string(recv_bytes) +
                             " bytes of buffers (lower -e)");
  }
  return Outcome::Ok();
}

Outcome PerfRun::MeasureGroup(DataType type, ReduceOp op, const BufferCounts& counts,
                              bool in_place, GroupResult* group) {
  const size_t element_size = ElementSize(type);
  unsigned char* recv = recv_.get();
  unsigned char* send =
      in_place ? recv + collective_.InPlaceSendOffset(counts, rank_) * element_size : send_.get();

  collective_.FillSend(send, counts);
  for (int i = 0; i < options_.warmup_iters; ++i) {
    Outcome outcome = CallOnce(type, op, counts, send, recv);
    if (!outcome.ok()) return outcome.Annotate("warmup call " + std::to_string(i));
  }
  Outcome outcome = backend_.Barrier();
  if (!outcome.ok()) return outcome.Annotate("barrier before the timed calls");
  double time_us = 0;
  outcome = TimedCalls(type, op, counts, send, recv, &time_us);
  if (!outcome.ok()) return outcome;
  outcome = backend_.MaxAcrossRanks(&time_us, 1);
  if (!outcome.ok()) return outcome.Annotate("taking the maximum time over ranks");
  group->time_us = time_us;

  group->wrong = -1;
  if (options_.check) {
    std::memset(recv, kPoisonByte, counts.recv * element_size);
    collective_.FillSend(send, counts);
    outcome = CallOnce(type, op, counts, send, recv);
    if (!outcome.ok()) return outcome.Annotate("checked call");
    int64_t wrong = static_cast<int64_t>(collective_.CountWrong(recv, counts));
    outcome = backend_.SumAcrossRanks(&wrong, 1);
    if (!outcome.ok()) return outcome.Annotate("summing wrong elements over ranks");
    group->wrong = wrong;
  }
  return Outcome::Ok();
}

// The timed calls: -n of them, then with -D more, in batches, until they have lasted
// min_duration_ms on the slowest rank. *us_per_call is this rank's time over its calls.
// Every rank runs the same batches: each next one is sized from the slowest rank's time,
// agreed between batches, outside the timing.
Outcome PerfRun::TimedCalls(DataType type, ReduceOp op, const BufferCounts& counts, const void* send, void* recv,
                            double* us_per_call) {
  const double want_us = options_.min_duration_ms * 1000.0;
  double total_us = 0;
  int64_t calls = 0;
  for (int64_t batch = options_.iters;;) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < batch; ++i) {
      Outcome outcome = CallOnce(type, op, counts, send, recv);
      if (!outcome.ok()) return outcome.Annotate("timed call " + std::to_string(calls + i));
    }
    total_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    calls += batch;
    if (want_us <= 0) break;
    double slowest_us = total_us;
    Outcome outcome = backend_.MaxAcrossRanks(&slowest_us, 1);
    if (!outcome.ok()) return outcome.Annotate("agreeing how long the timed calls lasted");
    if (slowest_us >= want_us) break;
    // The calls the rest should take at the rate so far, a tenth more, at most 8x so far.
    const double per_call_us = std::max(slowest_us / static_cast<double>(calls), 1e-3);
    batch = std::min<int64_t>(8 * calls, static_cast<int64_t>((want_us - slowest_us) * 1.1 / per_call_us) + 1);
  }
  *us_per_call = total_us / static_cast<double>(calls);
  return Outcome::Ok();
}

int PerfRun::Run() {
  std::vector<std::string> rank_lines;
  Outcome outcome = GatherRankLines(&rank_lines);
  if (!outcome.ok()) return Fail(outcome);

  RunDescription description;
  description.program = program_;
  description.backend = backend_.Description();
  description.collective = collective_.Name();
  description.bus_formula = collective_.BusBandwidthFormula();
  description.nranks = nranks_;
  description.options = options_;
  description.rank_lines = rank_lines;
  Print(FormatRunHeader(description));

  outcome = AllocateBuffers();
  if (!outcome.ok()) return Fail(outcome);

  Print(FormatColumnHeader());
  // Which algorithm ran at which sizes (allreduce on a library that says), as ranges.
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> algorithms;
  int64_t wrong_total = 0;
  double busbw_sum = 0;
  int busbw_count = 0;
  for (DataType type : options_.types) {
    for (ReduceOp op : options_.ops) {
      collective_.Prepare(type, op, rank_, nranks_);
      for (size_t bytes : SizeSeries(options_)) {
        const size_t element_size = ElementSize(type);
        BufferCounts counts = collective_.CountsForBytes(bytes, element_size, nranks_);
        if (counts.send == 0 && counts.recv == 0) continue;  // below one element
        TableRow row;
        row.count = std::max(counts.send, counts.recv);
        row.bytes = row.count * element_size;
        row.type = type;
        row.op = op;
        row.root = collective_.Root();
        for (bool in_place : {false, true}) {
          GroupResult* group = in_place ? &row.in_place : &row.out_of_place;
          outcome = MeasureGroup(type, op, counts, in_place, group);
          if (!outcome.ok()) {
            std::string name = CaseName(collective_.Name(), row.count, type, op, in_place);
            return Fail(outcome.Annotate(name));
          }
          ComputeBandwidths(row.bytes, collective_.BusBandwidthFactor(nranks_), group);
          busbw_sum += group->busbw;
          ++busbw_count;
          if (group->wrong > 0) wrong_total += group->wrong;
        }
        Print(FormatRow(row));
        if (collective_.Name() == std::string("allreduce")) {
          const std::string algo = backend_.AllReduceAlgorithm(row.count, type);
          if (!algo.empty()) {
            if (algorithms.empty() || algorithms.back().first != algo) algorithms.push_back({algo, {row.bytes, row.bytes}});
            algorithms.back().second.second = row.bytes;
          }
        }
      }
    }
  }
  for (const auto& [name, range] : algorithms) {
    Print("# algorithm " + name + ": " + std::to_string(range.first) + " to " + std::to_string(range.second) + " B\n");
  }
  Print(FormatFooter(wrong_total, busbw_count > 0 ? busbw_sum / busbw_count : 0));
  return wrong_total == 0 ? kExitOk : kExitFailed;
}

}  // namespace

int RunPerfTest(const std::string& program, const PerfOptions& options,
                CollectiveBackend& backend, PerfCollective& collective) {
  return PerfRun(program, options, backend, collective).Run();
}

int PerfProgramMain(int argc, char** argv, PerfCollective& collective,
                    const BackendFactory& make_backend) {
  const std::string program = BaseName(argc > 0 ? argv[0] : nullptr);
  const bool prints = LauncherRank() == 0;
  ParsedOptions parsed = ParsePerfOptions(argc, argv);
  if (!parsed.ok) {
    if (prints) {
      std::fprintf(stderr, "%s: %s\n%s", program.c_str(), parsed.error.c_str(),
                   PerfUsage(program).c_str());
    }
    return kExitBadFlags;
  }
  if (parsed.options.help) {
    if (prints) std::fputs(PerfUsage(program).c_str(), stdout);
    return kExitOk;
  }
  std::string error;
  std::unique_ptr<CollectiveBackend> backend = make_backend(&error);
  if (!backend) {
    std::fprintf(stderr, "%s: cannot join the job: %s\n", program.c_str(), error.c_str());
    return kExitFailed;
  }
  int code = RunPerfTest(program, parsed.options, *backend, collective);
  backend.reset();  // leaves the job
  return code;
}

}  // namespace tessera_bench
