// Communicators: tesseraCommInitRankConfig (blocking and non-blocking, malformed configs),
// tesseraCommInitAll (one thread per rank), tesseraCommSplit (colors, keys with ties,
// NOCOLOR, splits of splits, split communicators used concurrently from two threads),
// Finalize then Destroy, CuDevice on a CPU build, GetVersion and GetErrorString. Ranks
// are real processes (rank_harness); collectives on the new communicators are checked
// with collective_calls.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/collective_calls.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

constexpr int kLibraryTimeoutMs = 30000;

RankOptions CommOptions() {
  RankOptions opts;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = std::to_string(kLibraryTimeoutMs);
  return opts;
}

std::string Code(tesseraResult_t r) { return CodeName(r) + ": " + LastError(nullptr); }

// Runs one collective of `kind` on comm (rank `rank` of `nranks`) and checks it.
std::string RunAndCheck(Collective kind, tesseraDataType_t type, int rank, int nranks, tesseraComm_t comm,
                        int call_index, size_t count = 1031) {
  CallSpec s{kind, type, Reduces(kind) ? OpKind::kSum : OpKind::kCopy, call_index % 2 == 1,
             call_index % nranks, count, call_index};
  if (kind == Collective::kBcast) s.in_place = true;
  PreparedCall call(s, rank, nranks);
  std::string step;
  tesseraResult_t r = call.Issue(comm, &step);
  if (r != tesseraSuccess) return call.what() + ": " + step + ": " + Code(r);
  return call.Check();
}

// Polls tesseraCommGetAsyncError until it stops answering tesseraInProgress; each poll
// must return at once. Returns the final code (tesseraTimeout if it never settles).
tesseraResult_t WaitAsync(tesseraComm_t comm, FailureLog* log, const std::string& what, int* polls = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + Milliseconds(kLibraryTimeoutMs + 5000);
  int n = 0;
  for (;;) {
    tesseraResult_t async = tesseraInternalError;
    auto start = std::chrono::steady_clock::now();
    tesseraResult_t r = tesseraCommGetAsyncError(comm, &async);
    const double seconds = SecondsSince(start);
    ++n;
    if (seconds > 0.1) log->Add(what + ": tesseraCommGetAsyncError blocked for " + std::to_string(seconds) + " s");
    if (r != tesseraSuccess) {
      log->Add(what + ": tesseraCommGetAsyncError returned " + Code(r));
      return r;
    }
    if (async != tesseraInProgress) {
      if (polls != nullptr) *polls = n;
      return async;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      log->Add(what + ": still tesseraInProgress after " + std::to_string(kLibraryTimeoutMs + 5000) + " ms");
      return tesseraTimeout;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// --- Config ---------------------------------------------------------------------------------

// blocking = 1 with a name behaves as the default; the name shows in error messages.
TEST(Config, BlockingWithANameWorks) {
  const int nranks = 3;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.commName = "gradients-comm";
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &config);
    if (!log.Expect(r == tesseraSuccess && comm != nullptr, "InitRankConfig(blocking=1): " + Code(r))) return log.str();
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, ctx.rank, nranks, comm, 0));
    log.Add(RunAndCheck(Collective::kAllGather, tesseraInt8, ctx.rank, nranks, comm, 1));
    float x = 0;
    r = tesseraBroadcast(&x, &x, 1, tesseraFloat32, nranks, comm, nullptr);
    log.Expect(r == tesseraInvalidArgument, "broadcast with a bad root: " + Code(r));
    log.Expect(LastError(comm).find("gradients-comm") != std::string::npos,
               "the comm's name is not in its error message: " + LastError(comm));
    log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "destroy");
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// TESSERA_TRANSPORT: a transport named in the list must start; the lists must agree;
// a mixed list (shared memory inside a host, UCX between hosts) gives exact results.
TEST(TransportChoice, NamedTransportMustStart) {
  if (access("/sys/class/infiniband", F_OK) == 0) GTEST_SKIP() << "this host has an RDMA device";
  RankOptions opts = CommOptions();
  opts.env["TESSERA_TRANSPORT"] = "ibverbs,tcp";
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    FailureLog log;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, 2, ctx.ids[0], ctx.rank);
    log.Expect(r == tesseraSystemError && comm == nullptr, "init with ibverbs and no RDMA device: " + Code(r));
    log.Expect(LastError(nullptr).find("no RDMA device") != std::string::npos &&
                   LastError(nullptr).find("TESSERA_TRANSPORT lists ibverbs") != std::string::npos,
               "the error does not say why: " + LastError(nullptr));
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

TEST(TransportChoice, ListsMustAgree) {
  RankOptions opts = CommOptions();
  opts.env_for_rank = [](int rank) { return EnvVars{{"TESSERA_TRANSPORT", rank == 0 ? "ucx" : "shm,tcp"}}; };
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    FailureLog log;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, 2, ctx.ids[0], ctx.rank);
    log.Expect(r == tesseraInvalidUsage && comm == nullptr, "init with different transport lists: " + Code(r));
    log.Expect(LastError(nullptr).find("TESSERA_TRANSPORT") != std::string::npos,
               "the error does not name the setting: " + LastError(nullptr));
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

TEST(TransportChoice, SharedMemoryInsideHostsUcxBetween) {
  const int nranks = 4;
  RankOptions opts = CommOptions();
  opts.ranks_per_host = 2;
  opts.env["TESSERA_TRANSPORT"] = "shm,ucx";
  opts.env["TESSERA_UCX_CHUNK_BYTES"] = "4096";
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    for (int call = 0; call < 4; ++call) {
      log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, nranks, comm, call, 100003));
      log.Add(RunAndCheck(Collective::kReduceScatter, tesseraBfloat16, rank, nranks, comm, call));
      log.Add(RunAndCheck(Collective::kAllGather, tesseraInt64, rank, nranks, comm, call));
    }
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// TESSERA_TCP_CONGESTION: a congestion control the kernel lacks leaves the links on the
// system's default, and the collectives still run; one it has is used (the default,
// cubic, is what the other tests run on).
TEST(TransportChoice, UnknownTcpCongestionControlFallsBackToTheDefault) {
  for (const char* cc : {"no_such_cc", "reno", "system"}) {
    const int nranks = 3;
    RankOptions opts = CommOptions();
    opts.env["TESSERA_TRANSPORT"] = "tcp";
    opts.env["TESSERA_TCP_CONGESTION"] = cc;
    auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
      FailureLog log;
      log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, nranks, comm, 0, 100003));
      return log.str();
    }, opts);
    EXPECT_EQ("", Failures(results)) << cc;
  }
}

// TESSERA_BOOTSTRAP_FANOUT: the rendezvous' table travels down a tree of ranks (a
// chain with 1; every rank straight from the service when the fanout passes nranks);
// every shape gives a communicator whose collectives are exact, on hosts of two ranks
// (shared memory inside, TCP between) and in a split, whose rendezvous is a rank's.
TEST(Creation, TheTableTravelsDownATree) {
  for (const char* fanout : {"1", "2", "64"}) {
    const int nranks = 7;
    RankOptions opts = CommOptions();
    opts.ranks_per_host = 2;
    opts.env["TESSERA_BOOTSTRAP_FANOUT"] = fanout;
    auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
      FailureLog log;
      log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, nranks, comm, 0, 100003));
      log.Add(RunAndCheck(Collective::kAllGather, tesseraInt64, rank, nranks, comm, 1));
      tesseraComm_t half = nullptr;
      tesseraResult_t r = tesseraCommSplit(comm, rank % 2, -rank, &half, nullptr);
      log.Expect(r == tesseraSuccess, "split: " + Code(r));
      if (r != tesseraSuccess) return log.str();
      int n = 0, me = -1;
      tesseraCommCount(half, &n);
      tesseraCommUserRank(half, &me);
      log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, me, n, half, 2, 4099));
      tesseraCommDestroy(half);
      return log.str();
    }, opts);
    EXPECT_EQ("", Failures(results)) << "TESSERA_BOOTSTRAP_FANOUT=" << fanout;
  }
}

// The cost-model probe goes round parts of at most 16 hosts of a column: 18 hosts of
// one rank make parts of 16 and 2, and the model the ranks agree on gives exact results.
TEST(Creation, TheProbeGoesRoundPartsOfLongColumns) {
  const int nranks = 18;
  RankOptions opts = CommOptions();
  opts.ranks_per_host = 1;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, nranks, comm, 0, 100003));
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// A NULL config means the defaults; an initializer with no field set too.
TEST(Config, NullAndUntouchedInitializerAreDefaults) {
  const int nranks = 2;
  RankOptions opts = CommOptions();
  opts.unique_ids = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraConfig_t untouched = TESSERA_CONFIG_INITIALIZER;
    tesseraComm_t a = nullptr, b = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&a, nranks, ctx.ids[0], ctx.rank, nullptr);
    log.Expect(r == tesseraSuccess, "InitRankConfig(NULL config): " + Code(r));
    r = tesseraCommInitRankConfig(&b, nranks, ctx.ids[1], ctx.rank, &untouched);
    log.Expect(r == tesseraSuccess, "InitRankConfig(initializer only): " + Code(r));
    if (a != nullptr) log.Add(RunAndCheck(Collective::kReduceScatter, tesseraFloat64, ctx.rank, nranks, a, 0));
    if (b != nullptr) log.Add(RunAndCheck(Collective::kReduce, tesseraUint32, ctx.rank, nranks, b, 1));
    if (a != nullptr) log.Expect(tesseraCommDestroy(a) == tesseraSuccess, "destroy a");
    if (b != nullptr) log.Expect(tesseraCommDestroy(b) == tesseraSuccess, "destroy b");
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// Wrong magic, size or version: tesseraInvalidArgument at once, *comm NULL, and the id
// still good for a communicator with a valid config afterwards.
TEST(Config, MalformedIsInvalidArgument) {
  const int nranks = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    struct Bad {
      const char* what;
      tesseraConfig_t config;
    };
    std::vector<Bad> bad;
    tesseraConfig_t c = TESSERA_CONFIG_INITIALIZER;
    c.magic = 0xdeadbeef;
    bad.push_back({"wrong magic", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.magic = 0;
    bad.push_back({"zero magic", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.size = sizeof(tesseraConfig_t) - 4;
    bad.push_back({"smaller size", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.size = 0;
    bad.push_back({"zero size", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.size = sizeof(tesseraConfig_t) + 64;
    bad.push_back({"larger size", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.version = 0;
    bad.push_back({"version 0", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.timeoutMs = 0;
    bad.push_back({"timeoutMs 0", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.timeoutMs = -5;
    bad.push_back({"negative timeoutMs", c});
    c = TESSERA_CONFIG_INITIALIZER;
    c.deterministic = 2;
    bad.push_back({"deterministic 2", c});
    auto start = std::chrono::steady_clock::now();
    bool id_used = false;  // a malformed config was accepted: the id has formed a comm
    for (Bad& b : bad) {
      if (id_used) break;
      tesseraComm_t comm = reinterpret_cast<tesseraComm_t>(0x1);
      tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &b.config);
      id_used = r == tesseraSuccess;
      log.Expect(r == tesseraInvalidArgument,
                 std::string(b.what) + ": " + (r == tesseraSuccess ? "accepted (tesseraSuccess)" : Code(r)) +
                     ", want tesseraInvalidArgument");
      log.Expect(LastError(nullptr).find("config") != std::string::npos,
                 std::string(b.what) + ": the message does not name the config: " + LastError(nullptr));
      log.Expect(comm == nullptr, std::string(b.what) + ": *comm not set to NULL");
      if (r == tesseraSuccess && comm != nullptr) tesseraCommDestroy(comm);
    }
    const double seconds = SecondsSince(start);
    log.Expect(seconds < 1.0, "rejecting malformed configs took " + std::to_string(seconds) + " s");
    if (id_used) return log.str();
    tesseraConfig_t good = TESSERA_CONFIG_INITIALIZER;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &good);
    if (log.Expect(r == tesseraSuccess, "valid config after the malformed ones: " + Code(r))) {
      log.Add(RunAndCheck(Collective::kAllReduce, tesseraInt32, ctx.rank, nranks, comm, 0));
      log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "destroy");
    }
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// config.timeoutMs replaces TESSERA_TIMEOUT_MS (30 s here) for that communicator and its
// splits: rank 0 waits for a rank 1 that never joins, and times out after ~0.5 s.
TEST(Config, TimeoutBoundsEveryWait) {
  const int nranks = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.timeoutMs = 500;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &config);
    if (!log.Expect(r == tesseraSuccess, "init with timeoutMs 500: " + Code(r))) return log.str();
    tesseraComm_t split = nullptr;
    r = tesseraCommSplit(comm, 0, ctx.rank, &split, nullptr);
    if (!log.Expect(r == tesseraSuccess, "split: " + Code(r))) return log.str();
    if (ctx.rank == 0) {
      for (tesseraComm_t c : {comm, split}) {
        float value = 1.0f;
        auto start = std::chrono::steady_clock::now();
        r = tesseraAllReduce(&value, &value, 1, tesseraFloat32, tesseraSum, c, nullptr);
        const double seconds = SecondsSince(start);
        log.Expect(r == tesseraTimeout, "allreduce with a silent peer: " + Code(r) + ", want tesseraTimeout");
        log.Expect(seconds >= 0.4 && seconds < 5.0, "timed out after " + std::to_string(seconds) + " s, want ~0.5");
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    }
    tesseraCommDestroy(split);
    tesseraCommDestroy(comm);
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// tesseraAllReduceAlgorithm sizes float16 and bfloat16 as they travel: widened to
// float32 by default, 2 bytes with TESSERA_HALF_WIRE=half. The answer for n half
// elements must equal the answer for the same bytes of float32, at every size (the
// choice changes with size, so a wrong element size shows at some power of two).
TEST(AllReduceAlgorithm, HalfTypesSizedAsTheyTravel) {
  for (const char* wire : {"float32", "half"}) {
    RankOptions opts = CommOptions();
    opts.env["TESSERA_HALF_WIRE"] = wire;
    const size_t half_bytes = std::string(wire) == "half" ? 2 : 4;
    auto results = RunRanks(4, [&](int, tesseraComm_t comm) {
      FailureLog log;
      for (size_t n = 2; n <= (size_t{1} << 24); n *= 2) {
        const char* want = tesseraAllReduceAlgorithm(comm, n * half_bytes / 4, tesseraFloat32);
        for (tesseraDataType_t type : {tesseraFloat16, tesseraBfloat16}) {
          const char* got = tesseraAllReduceAlgorithm(comm, n, type);
          log.Expect(got != nullptr && want != nullptr && std::string(got) == want,
                     std::string("TESSERA_HALF_WIRE=") + wire + ", " + std::to_string(n) + " half elements: " +
                         (got ? got : "NULL") + ", but the same bytes of float32: " + (want ? want : "NULL"));
        }
      }
      return log.str();
    }, opts);
    EXPECT_EQ("", Failures(results)) << "TESSERA_HALF_WIRE=" << wire;
  }
}

// --- Non-blocking communicators ---------------------------------------------------------

// blocking = 0: creation, collectives and groups answer tesseraInProgress at once
// (tessera.h, tesseraConfig_t), Finalize waits and answers tesseraSuccess;
// tesseraCommGetAsyncError reaches tesseraSuccess without blocking; operations queued
// back to back complete in issue order.
TEST(NonBlocking, InitCollectivesGroupsFinalize) {
  const int nranks = 3;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    const int rank = ctx.rank;
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "nonblocking";
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], rank, &config);
    int in_progress = r == tesseraInProgress ? 1 : 0;
    if (!log.Expect(r == tesseraInProgress && comm != nullptr, "non-blocking InitRankConfig: " + Code(r))) {
      return log.str();
    }
    if (!log.Expect(WaitAsync(comm, &log, "init") == tesseraSuccess, "init did not reach tesseraSuccess")) {
      tesseraCommDestroy(comm);
      return log.str();
    }
    int count = -1, user_rank = -1;
    tesseraCommCount(comm, &count);
    tesseraCommUserRank(comm, &user_rank);
    log.Expect(count == nranks && user_rank == rank, "count/rank after a non-blocking init");

    // One collective at a time.
    for (int k = 0; k < 4; ++k) {
      const Collective kind = k % 2 ? Collective::kBroadcast : Collective::kAllReduce;
      PreparedCall call({kind, tesseraFloat32, k % 2 ? OpKind::kCopy : OpKind::kSum, false, k % nranks, 65537, k},
                        rank, nranks);
      std::string step;
      r = call.Issue(comm, &step);
      in_progress += r == tesseraInProgress;
      if (!log.Expect(r == tesseraInProgress, call.what() + ": " + Code(r))) continue;
      if (log.Expect(WaitAsync(comm, &log, call.what()) == tesseraSuccess, call.what() + " did not complete")) {
        log.Add(call.Check());
      }
    }
    // Several queued back to back, then one wait: every one done, in issue order (each
    // reads what the one before wrote: sum, then max of the sums, then a broadcast; in
    // any other order the values differ).
    const size_t n = 4099;
    std::vector<double> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<double>(rank + i % 7);
    r = tesseraAllReduce(buf.data(), buf.data(), n, tesseraFloat64, tesseraSum, comm, nullptr);
    log.Expect(r == tesseraInProgress, "queued allreduce (sum): " + Code(r));
    r = tesseraAllReduce(buf.data(), buf.data(), n, tesseraFloat64, tesseraMax, comm, nullptr);
    log.Expect(r == tesseraInProgress, "queued allreduce (max): " + Code(r));
    std::vector<double> copy(n, -1.0);
    r = tesseraBroadcast(buf.data(), copy.data(), n, tesseraFloat64, 2, comm, nullptr);
    log.Expect(r == tesseraInProgress, "queued broadcast: " + Code(r));
    if (log.Expect(WaitAsync(comm, &log, "three queued operations") == tesseraSuccess, "queued operations failed")) {
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) {
        const double want = static_cast<double>(nranks * (nranks - 1) / 2 + nranks * (i % 7));
        wrong += buf[i] != want || copy[i] != want;
      }
      log.Expect(wrong == 0, "queued operations: " + std::to_string(wrong) + " elements wrong");
    }
    // A group on the non-blocking communicator.
    PreparedCall g1({Collective::kAllReduce, tesseraBfloat16, OpKind::kMax, true, 0, 1031, 0}, rank, nranks);
    PreparedCall g2({Collective::kSendRecv, tesseraInt64, OpKind::kCopy, false, 0, 1031, 1}, rank, nranks);
    PreparedCall g3({Collective::kGather, tesseraUint8, OpKind::kCopy, false, 1, 1031, 2}, rank, nranks);
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    log.Expect(g1.Issue(comm, &step) == tesseraSuccess, "record " + g1.what());
    log.Expect(g2.Issue(comm, &step) == tesseraSuccess, "record " + g2.what());
    log.Expect(g3.Issue(comm, &step) == tesseraSuccess, "record " + g3.what());
    r = tesseraGroupEnd();
    in_progress += r == tesseraInProgress;
    if (log.Expect(r == tesseraInProgress, "GroupEnd on a non-blocking comm: " + Code(r)) &&
        log.Expect(WaitAsync(comm, &log, "group") == tesseraSuccess, "the group did not complete")) {
      log.Add(g1.Check());
      log.Add(g2.Check());
      log.Add(g3.Check());
    }
    // Argument errors are still answered at once.
    float x = 0;
    r = tesseraBroadcast(&x, &x, 1, tesseraFloat32, -1, comm, nullptr);
    log.Expect(r == tesseraInvalidArgument, "bad root on a non-blocking comm: " + Code(r));
    // Finalize, then Destroy.
    r = tesseraCommFinalize(comm);
    log.Expect(r == tesseraSuccess, "Finalize (waits for the queued work): " + Code(r));
    log.Expect(WaitAsync(comm, &log, "finalize") == tesseraSuccess, "finalize did not reach tesseraSuccess");
    log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "destroy after finalize: " + LastError(nullptr));
    if (rank == 0) printf("[ info ] non-blocking: %d calls answered tesseraInProgress\n", in_progress);
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// A split of a non-blocking communicator with a NULL config inherits its mode
// (tessera.h): the collectives on the new communicator answer tesseraInProgress and
// complete when polled. (The split itself may answer either: tessera.h does not say.)
TEST(NonBlocking, SplitInheritsTheMode) {
  const int nranks = 4;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 0;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &config);
    if (!log.Expect(r == tesseraInProgress && comm != nullptr, "init: " + Code(r)) ||
        !log.Expect(WaitAsync(comm, &log, "init") == tesseraSuccess, "init did not complete")) {
      if (comm != nullptr) tesseraCommDestroy(comm);
      return log.str();
    }
    tesseraComm_t half = nullptr;
    r = tesseraCommSplit(comm, ctx.rank % 2, 0, &half, nullptr);
    if (log.Expect((r == tesseraInProgress || r == tesseraSuccess) && half != nullptr, "split: " + Code(r)) &&
        log.Expect(WaitAsync(half, &log, "split") == tesseraSuccess, "split did not complete")) {
      int n = 0, me = -1;
      tesseraCommCount(half, &n);
      tesseraCommUserRank(half, &me);
      log.Expect(n == 2 && me == ctx.rank / 2, "split: rank " + std::to_string(me) + " of " + std::to_string(n));
      PreparedCall call({Collective::kAllReduce, tesseraFloat32, OpKind::kSum, false, 0, 65537, 0}, me, n);
      std::string step;
      r = call.Issue(half, &step);
      if (log.Expect(r == tesseraInProgress, call.what() + ": " + Code(r)) &&
          log.Expect(WaitAsync(half, &log, call.what()) == tesseraSuccess, call.what() + " did not complete")) {
        log.Add(call.Check());
      }
      r = tesseraCommFinalize(half);
      log.Expect(r == tesseraSuccess, "finalize the split (waits for the queued work): " + Code(r));
      WaitAsync(half, &log, "finalize the split");
      log.Expect(tesseraCommDestroy(half) == tesseraSuccess, "destroy the split");
    } else if (half != nullptr) {
      tesseraCommDestroy(half);
    }
    r = tesseraCommFinalize(comm);
    WaitAsync(comm, &log, "finalize");
    log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "destroy");
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// A blocking communicator: Finalize returns tesseraSuccess (nothing is pending), then
// Destroy frees it.
TEST(Finalize, ThenDestroy) {
  const int nranks = 3;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, ctx.rank, nranks, comm, 0));
    tesseraResult_t r = tesseraCommFinalize(comm);
    log.Expect(r == tesseraSuccess, "Finalize of a blocking comm: " + Code(r));
    tesseraResult_t async = tesseraInternalError;
    log.Expect(tesseraCommGetAsyncError(comm, &async) == tesseraSuccess && async == tesseraSuccess,
               "async error after Finalize: " + CodeName(async));
    log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "Destroy after Finalize: " + LastError(nullptr));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// --- InitAll ----------------------------------------------------------------------------------

class InitAll : public testing::TestWithParam<int> {};

// ndev communicators in one process, each driven by its own thread through several
// collectives; the device list is only recorded (CuDevice still answers "not
// supported").
TEST_P(InitAll, OneThreadPerRank) {
  const int ndev = GetParam();
  auto results = RunRanksRaw(1, [ndev](const RankContext&) {
    FailureLog log;
    std::vector<tesseraComm_t> comms(ndev, nullptr);
    std::vector<int> devlist;
    for (int i = 0; i < ndev; ++i) devlist.push_back(ndev - 1 - i);
    tesseraResult_t r = tesseraCommInitAll(comms.data(), ndev, devlist.data());
    if (!log.Expect(r == tesseraSuccess, "tesseraCommInitAll: " + Code(r))) return log.str();
    std::vector<std::string> errs(ndev);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        int count = -1, rank = -1;
        tesseraCommCount(comms[i], &count);
        tesseraCommUserRank(comms[i], &rank);
        if (count != ndev || rank != i) {
          errs[i] = "comms[" + std::to_string(i) + "] is rank " + std::to_string(rank) + " of " + std::to_string(count);
          return;
        }
        int k = 0;
        for (Collective kind : AllCollectives()) {
          if (kind == Collective::kSendRecv && ndev == 1) continue;  // to oneself: group_test
          std::string e = RunAndCheck(kind, tesseraFloat32, i, ndev, comms[i], k++, 4099);
          if (!e.empty()) errs[i] += e + "\n";
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errs) log.Add(e);
    for (int i = 0; i < ndev; ++i) {
      int device = -7;
      r = tesseraCommCuDevice(comms[i], &device);
      log.Expect(r == tesseraInvalidUsage, "CuDevice of an InitAll comm: " + Code(r));
    }
    for (tesseraComm_t c : comms) log.Expect(tesseraCommDestroy(c) == tesseraSuccess, "destroy: " + LastError(nullptr));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, InitAll, testing::Values(1, 3, 4),
                         [](const testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

TEST(InitAllArguments, RejectedAtOnce) {
  auto results = RunRanksRaw(1, [](const RankContext&) {
    FailureLog log;
    tesseraComm_t comms[2] = {nullptr, nullptr};
    for (int ndev : {0, -1}) {
      tesseraResult_t r = tesseraCommInitAll(comms, ndev, nullptr);
      log.Expect(r == tesseraInvalidArgument, "InitAll(ndev " + std::to_string(ndev) + "): " + Code(r));
      log.Expect(LastError(nullptr).find("ndev") != std::string::npos, "message does not name ndev: " + LastError(nullptr));
    }
    tesseraResult_t r = tesseraCommInitAll(nullptr, 2, nullptr);
    log.Expect(r == tesseraInvalidArgument, "InitAll(NULL comms): " + Code(r));
    log.Expect(LastError(nullptr).find("comms") != std::string::npos, "message does not name comms: " + LastError(nullptr));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// --- Split ----------------------------------------------------------------------------------

// What rank `rank` of the parent should be in its new communicator: the ranks of its
// color ordered by (key, parent rank). Returns the members in order.
std::vector<int> ExpectedMembers(const std::vector<int>& colors, const std::vector<int>& keys, int rank) {
  std::vector<int> members;
  for (int r = 0; r < static_cast<int>(colors.size()); ++r) {
    if (colors[r] == colors[rank]) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  return members;
}

// Checks newcomm against the expected members: count, rank, and an allgather of the
// parent ranks (so every member agrees on the order).
std::string CheckSplit(tesseraComm_t newcomm, const std::vector<int>& members, int parent_rank,
                       const std::string& what) {
  FailureLog log;
  int count = -1, rank = -1;
  tesseraCommCount(newcomm, &count);
  tesseraCommUserRank(newcomm, &rank);
  const int want_rank = static_cast<int>(std::find(members.begin(), members.end(), parent_rank) - members.begin());
  log.Expect(count == static_cast<int>(members.size()),
             what + ": count " + std::to_string(count) + ", want " + std::to_string(members.size()));
  log.Expect(rank == want_rank, what + ": parent rank " + std::to_string(parent_rank) + " became rank " +
                                    std::to_string(rank) + ", want " + std::to_string(want_rank));
  if (!log.ok()) return log.str();
  int32_t mine = parent_rank;
  std::vector<int32_t> all(members.size(), -1);
  tesseraResult_t r = tesseraAllGather(&mine, all.data(), 1, tesseraInt32, newcomm, nullptr);
  if (log.Expect(r == tesseraSuccess, what + ": allgather: " + Code(r))) {
    for (size_t i = 0; i < members.size(); ++i) {
      log.Expect(all[i] == members[i], what + ": member " + std::to_string(i) + " is parent rank " +
                                           std::to_string(all[i]) + ", want " + std::to_string(members[i]));
    }
  }
  log.Add(RunAndCheck(Collective::kAllReduce, tesseraInt64, rank, count, newcomm, 0));
  return log.str();
}

// 7 ranks: colors rank % 3 except rank 5 (NOCOLOR); keys with ties and negatives.
TEST(Split, ColorsKeysTiesAndNoColor) {
  const int nranks = 7;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    std::vector<int> colors, keys;
    for (int r = 0; r < nranks; ++r) {
      colors.push_back(r == 5 ? TESSERA_SPLIT_NOCOLOR : r % 3);
      keys.push_back((r * 5) % 4 - 1);  // -1, 0, 1, 2, -1, 0, 1: ties in every color
    }
    tesseraComm_t newcomm = reinterpret_cast<tesseraComm_t>(0x1);
    tesseraResult_t r = tesseraCommSplit(comm, colors[rank], keys[rank], &newcomm, nullptr);
    if (!log.Expect(r == tesseraSuccess, "split: " + Code(r))) return log.str();
    if (colors[rank] == TESSERA_SPLIT_NOCOLOR) {
      log.Expect(newcomm == nullptr, "NOCOLOR rank got a communicator");
    } else if (log.Expect(newcomm != nullptr, "split gave a NULL communicator")) {
      log.Add(CheckSplit(newcomm, ExpectedMembers(colors, keys, rank), rank,
                         "color " + std::to_string(colors[rank])));
      log.Expect(tesseraCommDestroy(newcomm) == tesseraSuccess, "destroy newcomm");
    }
    // The parent still works.
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, nranks, comm, 1));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

TEST(Split, EveryRankNoColor) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    tesseraComm_t newcomm = reinterpret_cast<tesseraComm_t>(0x1);
    tesseraResult_t r = tesseraCommSplit(comm, TESSERA_SPLIT_NOCOLOR, rank, &newcomm, nullptr);
    log.Expect(r == tesseraSuccess, "split with NOCOLOR everywhere: " + Code(r));
    log.Expect(newcomm == nullptr, "NOCOLOR gave a communicator");
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, 3, comm, 0));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// A split of a split, and a split with a config of its own (named, blocking).
TEST(Split, OfASplitAndWithAConfig) {
  const int nranks = 4;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    // Halves {0, 1} and {2, 3}, reversed by key.
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.commName = "half";
    tesseraComm_t half = nullptr;
    tesseraResult_t r = tesseraCommSplit(comm, rank / 2, -rank, &half, &config);
    if (!log.Expect(r == tesseraSuccess && half != nullptr, "split into halves: " + Code(r))) return log.str();
    const std::vector<int> half_members = rank < 2 ? std::vector<int>{1, 0} : std::vector<int>{3, 2};
    log.Add(CheckSplit(half, half_members, rank, "half"));
    // Split the half again: one color, key 0 for everyone: ordered by rank in the half.
    int half_rank = -1;
    tesseraCommUserRank(half, &half_rank);
    tesseraComm_t again = nullptr;
    r = tesseraCommSplit(half, 7, 0, &again, nullptr);
    if (log.Expect(r == tesseraSuccess && again != nullptr, "split of the half: " + Code(r))) {
      log.Add(CheckSplit(again, {0, 1}, half_rank, "split of the half"));
      log.Expect(tesseraCommDestroy(again) == tesseraSuccess, "destroy split of split");
    }
    log.Expect(tesseraCommDestroy(half) == tesseraSuccess, "destroy half");
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// Two split communicators per process, each driven by its own thread with allreduces
// (and other collectives) at the same time, while the parent stays usable.
TEST(Split, TwoSplitCommunicatorsUsedConcurrently) {
  const int nranks = 4;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    tesseraComm_t all = nullptr, pair = nullptr;
    tesseraResult_t r = tesseraCommSplit(comm, 0, nranks - rank, &all, nullptr);  // everyone, reversed
    log.Expect(r == tesseraSuccess && all != nullptr, "split (all, reversed): " + Code(r));
    r = tesseraCommSplit(comm, rank % 2, rank, &pair, nullptr);  // {0, 2} and {1, 3}
    log.Expect(r == tesseraSuccess && pair != nullptr, "split (pairs): " + Code(r));
    if (!log.ok()) {
      if (all != nullptr) tesseraCommDestroy(all);
      if (pair != nullptr) tesseraCommDestroy(pair);
      return log.str();
    }
    std::string errs[2];
    auto drive = [&](int which) {
      tesseraComm_t c = which == 0 ? all : pair;
      int n = 0, me = 0;
      tesseraCommCount(c, &n);
      tesseraCommUserRank(c, &me);
      const Collective kinds[] = {Collective::kAllReduce, Collective::kAllReduce, Collective::kReduceScatter,
                                  Collective::kAllGather, Collective::kBroadcast};
      for (int k = 0; k < 40 && errs[which].empty(); ++k) {
        const tesseraDataType_t type = k % 3 == 0 ? tesseraFloat32 : k % 3 == 1 ? tesseraInt32 : tesseraFloat16;
        errs[which] = RunAndCheck(kinds[k % 5], type, me, n, c, k, 1031 + 2 * k + which);
      }
    };
    std::thread second(drive, 1);
    drive(0);
    second.join();
    log.Add(errs[0].empty() ? "" : "comm of all ranks: " + errs[0]);
    log.Add(errs[1].empty() ? "" : "comm of pairs: " + errs[1]);
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat64, rank, nranks, comm, 0));
    log.Expect(tesseraCommDestroy(all) == tesseraSuccess, "destroy all");
    log.Expect(tesseraCommDestroy(pair) == tesseraSuccess, "destroy pair");
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

TEST(Split, BadArguments) {
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    tesseraResult_t r = tesseraCommSplit(comm, 0, rank, nullptr, nullptr);
    log.Expect(r == tesseraInvalidArgument, "split with a NULL newcomm: " + Code(r));
    log.Expect(LastError(nullptr).find("newcomm") != std::string::npos, "message does not name newcomm: " + LastError(nullptr));
    tesseraConfig_t bad = TESSERA_CONFIG_INITIALIZER;
    bad.magic = 1;
    tesseraComm_t newcomm = nullptr;
    r = tesseraCommSplit(comm, 0, rank, &newcomm, &bad);
    log.Expect(r == tesseraInvalidArgument, "split with a malformed config: " + Code(r));
    if (r == tesseraSuccess && newcomm != nullptr) tesseraCommDestroy(newcomm);
    log.Add(RunAndCheck(Collective::kAllReduce, tesseraFloat32, rank, 2, comm, 0));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

// --- Queries on a CPU build -------------------------------------------------------------------

TEST(CuDevice, NotSupportedOnACpuBuild) {
  auto results = RunRanks(2, [](int, tesseraComm_t comm) {
    FailureLog log;
    int device = -7;
    tesseraResult_t r = tesseraCommCuDevice(comm, &device);
    log.Expect(r == tesseraInvalidUsage, "tesseraCommCuDevice: " + Code(r) + " (want tesseraInvalidUsage)");
    log.Expect(LastError(nullptr).find("not supported") != std::string::npos,
               "message does not say \"not supported\": " + LastError(nullptr));
    log.Expect(device == -7, "tesseraCommCuDevice wrote " + std::to_string(device) + " on failure");
    r = tesseraCommCuDevice(nullptr, &device);
    log.Expect(r == tesseraInvalidArgument, "tesseraCommCuDevice(NULL comm): " + Code(r));
    r = tesseraCommCuDevice(comm, nullptr);
    log.Expect(r == tesseraInvalidArgument, "tesseraCommCuDevice(comm, NULL): " + Code(r));
    return log.str();
  }, CommOptions());
  EXPECT_EQ("", Failures(results));
}

TEST(Version, MatchesTheHeader) {
  int version = -1;
  ASSERT_EQ(tesseraSuccess, tesseraGetVersion(&version));
  EXPECT_EQ(TESSERA_VERSION_CODE, version);
  EXPECT_EQ(TESSERA_MAJOR * 10000 + TESSERA_MINOR * 100 + TESSERA_PATCH, version);
}

TEST(ErrorString, EveryCodeDistinctAndDescriptive) {
  std::set<std::string> seen;
  for (int code = 0; code < tesseraNumResults; ++code) {
    const char* s = tesseraGetErrorString(static_cast<tesseraResult_t>(code));
    ASSERT_NE(nullptr, s) << code;
    EXPECT_STRNE("", s) << code;
    EXPECT_TRUE(seen.insert(s).second) << CodeName(static_cast<tesseraResult_t>(code)) << " shares \"" << s << "\"";
  }
  EXPECT_NE(std::string::npos, std::string(tesseraGetErrorString(tesseraInProgress)).find("progress"));
  EXPECT_NE(std::string::npos, std::string(tesseraGetErrorString(tesseraInvalidUsage)).find("usage"));
  EXPECT_NE(std::string::npos, std::string(tesseraGetErrorString(tesseraSuccess)).find("success"));
  for (int code : {-1, static_cast<int>(tesseraNumResults), 1000}) {
    const char* s = tesseraGetErrorString(static_cast<tesseraResult_t>(code));
    ASSERT_NE(nullptr, s) << code;
    EXPECT_STRNE("", s) << code;
  }
}

}  // namespace
}  // namespace tessera_test
