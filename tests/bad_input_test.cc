// Bad input to the C API: every wrong argument returns tesseraInvalidArgument (or
// tesseraInvalidUsage for inconsistencies between ranks), names the offending argument
// in tesseraGetLastError, and neither crashes nor hangs. Calls that need a communicator
// or a rendezvous run in real rank processes (rank_harness).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

// Timeouts for tests where something is expected to fail: short library timeout, and a
// harness deadline well beyond it so that a hang shows as a hang.
constexpr int kLibraryTimeoutMs = 3000;
constexpr double kSlackSeconds = 2.0;

RankOptions FailingOptions() {
  RankOptions opts;
  opts.timeout = Milliseconds(20000);
  opts.env["TESSERA_TIMEOUT_MS"] = std::to_string(kLibraryTimeoutMs);
  return opts;
}

// Byte offset of the secret inside a tesseraUniqueId (bootstrap/rendezvous.cc's
// EncodeUniqueId: magic 0-7, IPv4 8-11, port 12-13, secret 16-23).
constexpr int kSecretOffset = 16;

// Expects `got == want` and both the comm's and the thread's last error to name `arg`.
void ExpectRejected(RankChecks* checks, tesseraResult_t got, tesseraResult_t want,
                    tesseraComm_t comm, const std::string& arg, const std::string& call) {
  if (!checks->ExpectCode(got, want, call)) return;
  checks->ExpectContains(LastError(nullptr), arg, call + ": tesseraGetLastError(NULL)");
  if (comm != nullptr) {
    checks->ExpectContains(LastError(comm), arg, call + ": tesseraGetLastError(comm)");
  }
}

TEST(Version, IsTheHeadersCode) {
  int version = -1;
  ASSERT_EQ(tesseraSuccess, tesseraGetVersion(&version));
  EXPECT_EQ(TESSERA_VERSION_CODE, version);
  EXPECT_EQ(tesseraInvalidArgument, tesseraGetVersion(nullptr));
  EXPECT_NE(std::string::npos, LastError(nullptr).find("version")) << LastError(nullptr);
}

TEST(ErrorString, EveryCodeHasItsOwn) {
  std::set<std::string> seen;
  for (int code = 0; code < tesseraNumResults; ++code) {
    const char* s = tesseraGetErrorString(static_cast<tesseraResult_t>(code));
    ASSERT_NE(nullptr, s) << code;
    EXPECT_STRNE("", s) << code;
    EXPECT_TRUE(seen.insert(s).second) << "code " << code << " shares its string: " << s;
  }
  const char* invalid = tesseraGetErrorString(tesseraInvalidArgument);
  EXPECT_NE(nullptr, strstr(invalid, "invalid")) << invalid;
  EXPECT_NE(nullptr, strstr(tesseraGetErrorString(tesseraTimeout), "time")) << "timeout";
  for (int code : {-1, 9, 42}) {
    const char* s = tesseraGetErrorString(static_cast<tesseraResult_t>(code));
    ASSERT_NE(nullptr, s) << code;
    EXPECT_STRNE("", s) << code;
  }
}

TEST(LastError, NeverNull) {
  EXPECT_NE(nullptr, tesseraGetLastError(nullptr));
}

TEST(AllReduceArguments, RejectedWithTheArgumentNamed) {
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    float send[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float recv[8] = {0};
    const tesseraResult_t kInvalid = tesseraInvalidArgument;
    ExpectRejected(&c, tesseraAllReduce(nullptr, recv, 4, tesseraFloat32, tesseraSum, comm, nullptr),
                   kInvalid, comm, "sendbuff", "null sendbuff");
    ExpectRejected(&c, tesseraAllReduce(send, nullptr, 4, tesseraFloat32, tesseraSum, comm, nullptr),
                   kInvalid, comm, "recvbuff", "null recvbuff");
    // count * sizeof(type) overflows size_t (the buffers are never read).
    ExpectRejected(&c, tesseraAllReduce(send, recv, SIZE_MAX / 4 + 1, tesseraFloat32, tesseraSum, comm, nullptr),
                   kInvalid, comm, "count", "float32 count SIZE_MAX/4+1");
    ExpectRejected(&c, tesseraAllReduce(send, recv, SIZE_MAX, tesseraFloat64, tesseraSum, comm, nullptr),
                   kInvalid, comm, "count", "float64 count SIZE_MAX");
    ExpectRejected(&c, tesseraAllReduce(send, recv, SIZE_MAX / 2 + 1, tesseraBfloat16, tesseraSum, comm, nullptr),
                   kInvalid, comm, "count", "bfloat16 count SIZE_MAX/2+1");
    for (int type : {42, -1, static_cast<int>(tesseraNumTypes)}) {
      ExpectRejected(&c, tesseraAllReduce(send, recv, 4, static_cast<tesseraDataType_t>(type), tesseraSum, comm, nullptr),
                     kInvalid, comm, "datatype", "datatype " + std::to_string(type));
    }
    for (int op : {42, -1, static_cast<int>(tesseraNumOps)}) {
      ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, static_cast<tesseraRedOp_t>(op), comm, nullptr),
                     kInvalid, comm, "op", "op " + std::to_string(op));
    }
    int fake_stream = 0;
    ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, tesseraSum, comm, &fake_stream),
                   kInvalid, comm, "stream", "non-NULL stream");
    ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, tesseraSum, nullptr, nullptr),
                   kInvalid, nullptr, "comm", "null comm");

    // Rejected calls leave the communicator healthy.
    tesseraResult_t async = tesseraInternalError;
    c.ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "tesseraCommGetAsyncError");
    c.ExpectCode(async, tesseraSuccess, "async error after rejected calls");

    // count 0 is a valid no-op, with null buffers too (a collective: both ranks call it).
    c.ExpectCode(tesseraAllReduce(nullptr, nullptr, 0, tesseraFloat32, tesseraSum, comm, nullptr),
                 tesseraSuccess, "count 0 with null buffers");
    c.ExpectCode(tesseraAllReduce(send, recv, 0, tesseraFloat32, tesseraSum, comm, nullptr),
                 tesseraSuccess, "count 0");

    // And a real allreduce still works.
    if (c.ExpectCode(tesseraAllReduce(send, recv, 8, tesseraFloat32, tesseraSum, comm, nullptr),
                     tesseraSuccess, "valid allreduce after rejected calls")) {
      for (int i = 0; i < 8; ++i) c.Expect(recv[i] == 2 * send[i], "wrong sum at " + std::to_string(i));
    }
    (void)rank;
    return c.str();
  });
  EXPECT_EQ("", Failures(results));
}

TEST(CommQueries, CountAndRank) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    int count = -1, user_rank = -1;
    c.ExpectCode(tesseraCommCount(comm, &count), tesseraSuccess, "tesseraCommCount");
    c.Expect(count == 3, "tesseraCommCount gave " + std::to_string(count));
    c.ExpectCode(tesseraCommUserRank(comm, &user_rank), tesseraSuccess, "tesseraCommUserRank");
    c.Expect(user_rank == rank, "tesseraCommUserRank gave " + std::to_string(user_rank));
    ExpectRejected(&c, tesseraCommCount(comm, nullptr), tesseraInvalidArgument, comm, "count",
                   "tesseraCommCount(comm, NULL)");
    ExpectRejected(&c, tesseraCommUserRank(comm, nullptr), tesseraInvalidArgument, comm, "rank",
                   "tesseraCommUserRank(comm, NULL)");
    ExpectRejected(&c, tesseraCommCount(nullptr, &count), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommCount(NULL, &count)");
    ExpectRejected(&c, tesseraCommUserRank(nullptr, &user_rank), tesseraInvalidArgument, nullptr,
                   "comm", "tesseraCommUserRank(NULL, &rank)");
    tesseraResult_t async;
    ExpectRejected(&c, tesseraCommGetAsyncError(nullptr, &async), tesseraInvalidArgument, nullptr,
                   "comm", "tesseraCommGetAsyncError(NULL, ...)");
    ExpectRejected(&c, tesseraCommGetAsyncError(comm, nullptr), tesseraInvalidArgument, comm,
                   "asyncError", "tesseraCommGetAsyncError(comm, NULL)");
    ExpectRejected(&c, tesseraCommDestroy(nullptr), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommDestroy(NULL)");
    ExpectRejected(&c, tesseraCommAbort(nullptr), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommAbort(NULL)");
    return c.str();
  });
  EXPECT_EQ("", Failures(results));
}

// Calls on other threads while the handle is destroyed: each finds it live (and the
// destroy waits for it) or rejects it, never touching freed memory (ASan runs this).
TEST(DestroyedComm, CallsOnOtherThreadsSeeItLiveOrRejected) {
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    std::atomic<int> rejected{0}, wrong{0}, ready{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t) {
      callers.emplace_back([&] {
        ready.fetch_add(1);
        for (;;) {
          int n = 0;
          const tesseraResult_t r = tesseraCommCount(comm, &n);
          if (r == tesseraInvalidArgument) break;
          if (r != tesseraSuccess || n != 2) wrong.fetch_add(1);
        }
        rejected.fetch_add(1);
      });
    }
    while (ready.load() < 3) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RankChecks c;
    c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "tesseraCommDestroy beside calls");
    for (std::thread& t : callers) t.join();
    c.Expect(rejected.load() == 3, "every caller saw the handle rejected");
    c.Expect(wrong.load() == 0, "a call on a live handle failed");
    return c.str();
  });
  EXPECT_EQ("", Failures(results));
}

// A destroyed handle is answered with InvalidArgument by every function, not a crash.
TEST(DestroyedComm, EveryFunctionRejectsIt) {
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    RankChecks c;
    int count = 0;  // this thread has validated the handle: a later check may skip the lock
    c.ExpectCode(tesseraCommCount(comm, &count), tesseraSuccess, "tesseraCommCount before destroying");
    c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "first tesseraCommDestroy");
    float buf[4] = {1, 2, 3, 4};
    ExpectRejected(&c, tesseraAllReduce(buf, buf, 4, tesseraFloat32, tesseraSum, comm, nullptr),
                   tesseraInvalidArgument, nullptr, "comm", "tesseraAllReduce on a destroyed comm");
    int n = 0;
    ExpectRejected(&c, tesseraCommCount(comm, &n), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommCount on a destroyed comm");
    ExpectRejected(&c, tesseraCommUserRank(comm, &n), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommUserRank on a destroyed comm");
    tesseraResult_t async;
    ExpectRejected(&c, tesseraCommGetAsyncError(comm, &async), tesseraInvalidArgument, nullptr,
                   "comm", "tesseraCommGetAsyncError on a destroyed comm");
    c.Expect(tesseraGetLastError(comm) != nullptr, "tesseraGetLastError(destroyed) is NULL");
    ExpectRejected(&c, tesseraCommDestroy(comm), tesseraInvalidArgument, nullptr, "comm",
                   "second tesseraCommDestroy");
    ExpectRejected(&c, tesseraCommAbort(comm), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommAbort on a destroyed comm");
    return c.str();
  });
  EXPECT_EQ("", Failures(results));
}

// Local argument checks of tesseraCommInitRank and tesseraGetUniqueId: immediate, and
// they leave the id usable.
TEST(InitArguments, RejectedWithTheArgumentNamed) {
  auto results = RunRanksRaw(1, [](const RankContext& ctx) {
    RankChecks c;
    const tesseraUniqueId& id = ctx.ids[0];
    auto start = std::chrono::steady_clock::now();
    ExpectRejected(&c, tesseraCommInitRank(nullptr, 1, id, 0), tesseraInvalidArgument, nullptr,
                   "comm", "tesseraCommInitRank(NULL comm pointer)");
    for (int nranks : {0, -1, -100}) {
      tesseraComm_t comm = reinterpret_cast<tesseraComm_t>(0x1);
      ExpectRejected(&c, tesseraCommInitRank(&comm, nranks, id, 0), tesseraInvalidArgument,
                     nullptr, "nranks", "nranks " + std::to_string(nranks));
      c.Expect(comm == nullptr, "*comm not set to NULL after a failed init (nranks)");
    }
    for (int rank : {-1, 1, 7}) {
      tesseraComm_t comm = reinterpret_cast<tesseraComm_t>(0x1);
      ExpectRejected(&c, tesseraCommInitRank(&comm, 1, id, rank), tesseraInvalidArgument, nullptr,
                     "rank", "rank " + std::to_string(rank) + " of 1");
      c.Expect(comm == nullptr, "*comm not set to NULL after a failed init (rank)");
    }
    ExpectRejected(&c, tesseraGetUniqueId(nullptr), tesseraInvalidArgument, nullptr, "uniqueId",
                   "tesseraGetUniqueId(NULL)");
    ExpectRejected(&c, tesseraCommInitFromEnv(nullptr), tesseraInvalidArgument, nullptr, "comm",
                   "tesseraCommInitFromEnv(NULL)");
    double seconds = SecondsSince(start);
    c.Expect(seconds < 1.0, "argument checks took " + std::to_string(seconds) + " s");
    // The id is still good for a real communicator.
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    c.Expect(err.empty(), "init with the id after rejected calls: " + err);
    if (comm != nullptr) c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "destroy");
    return c.str();
  }, FailingOptions());
  EXPECT_EQ("", Failures(results));
}

// Ids that were not made by tesseraGetUniqueId: refused at once, never a connection
// attempt to whatever address the bytes might spell.
TEST(GarbageId, InvalidArgument) {
  auto results = RunRanksRaw(1, [](const RankContext& ctx) {
    RankChecks c;
    tesseraUniqueId zeros, pattern, no_port;
    memset(&zeros, 0, sizeof(zeros));
    memset(&pattern, 0xAB, sizeof(pattern));
    no_port = ctx.ids[0];
    memset(no_port.internal + 12, 0, 2);  // a real id with its port erased
    const std::pair<const tesseraUniqueId*, const char*> ids[] = {
        {&zeros, "all-zero id"}, {&pattern, "0xAB-filled id"}, {&no_port, "id without port"}};
    for (const auto& id : ids) {
      auto start = std::chrono::steady_clock::now();
      tesseraComm_t comm = reinterpret_cast<tesseraComm_t>(0x1);
      ExpectRejected(&c, tesseraCommInitRank(&comm, 1, *id.first, 0), tesseraInvalidArgument,
                     nullptr, "commId", id.second);
      c.Expect(comm == nullptr, std::string(id.second) + ": *comm not NULL");
      double seconds = SecondsSince(start);
      c.Expect(seconds < 1.0, std::string(id.second) + " took " + std::to_string(seconds) + " s");
    }
    return c.str();
  }, FailingOptions());
  EXPECT_EQ("", Failures(results));
}

// A rendezvous-related test's per-process outcome: code, message and time of init.
struct InitOutcome {
  tesseraResult_t code;
  std::string message;
  double seconds;
};

std::string Encode(const InitOutcome& o) {
  return std::to_string(static_cast<int>(o.code)) + "|" + std::to_string(o.seconds) + "|" + o.message;
}

// Process 3 is an imposter: rank 2 of 3 with a wrong secret. It is refused alone; the
// real ranks 0..2 form the communicator and it works. The real rank 2 joins only after
// the imposter is done, so that the imposter meets a rendezvous still waiting for it
// (once all ranks have joined, the service is gone and there is nobody to refuse it).
TEST(WrongSecret, ImposterRefusedRealRanksSucceed) {
  auto results = RunRanksRaw(4, [](const RankContext& ctx) {
    RankChecks c;
    tesseraUniqueId id = ctx.ids[0];
    const bool imposter = ctx.rank == 3;
    if (imposter) id.internal[kSecretOffset] ^= 0x5A;
    if (ctx.rank == 2 && !WaitForRanksDone({3}, Milliseconds(10000))) return std::string("imposter hung");
    auto start = std::chrono::steady_clock::now();
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, 3, id, imposter ? 2 : ctx.rank);
    double seconds = SecondsSince(start);
    c.Expect(seconds < kLibraryTimeoutMs / 1000.0 + kSlackSeconds,
             "init returned after " + std::to_string(seconds) + " s");
    if (imposter) {
      c.Expect(r != tesseraSuccess, "the imposter with a wrong secret was accepted");
      c.ExpectCode(r, tesseraInvalidArgument, "imposter's init");
      c.ExpectContains(LastError(nullptr), "secret", "imposter's error");
      if (comm != nullptr) tesseraCommDestroy(comm);
      return c.str();
    }
    if (!c.ExpectCode(r, tesseraSuccess, "real rank's init (the imposter must not disturb it)")) {
      return c.str();
    }
    float buf[3] = {1, 2, 3};
    if (c.ExpectCode(tesseraAllReduce(buf, buf, 3, tesseraFloat32, tesseraSum, comm, nullptr),
                     tesseraSuccess, "allreduce")) {
      c.Expect(buf[0] == 3 && buf[1] == 6 && buf[2] == 9, "wrong sum");
    }
    c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "destroy");
    return c.str();
  }, FailingOptions());
  EXPECT_EQ("", Failures(results));
}

// Runs an init per process with (nranks, rank) from `claims`, and returns each outcome.
// Fails the test if a process hung, crashed, or took longer than the timeout + slack.
std::vector<InitOutcome> InitWithClaims(const std::vector<std::pair<int, int>>& claims,
                                        const RankOptions& opts) {
  auto results = RunRanksRaw(static_cast<int>(claims.size()), [&](const RankContext& ctx) {
    auto start = std::chrono::steady_clock::now();
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, claims[ctx.rank].first, ctx.ids[0],
                                            claims[ctx.rank].second);
    InitOutcome o{r, r == tesseraSuccess ? "" : LastError(nullptr), SecondsSince(start)};
    if (comm != nullptr) tesseraCommDestroy(comm);
    return "outcome:" + Encode(o);  // parsed below; never "" so it is always visible
  }, opts);
  std::vector<InitOutcome> outcomes;
  for (const RankResult& res : results) {
    EXPECT_TRUE(res.reported && res.message.rfind("outcome:", 0) == 0) << res.Describe();
    if (!res.reported || res.message.rfind("outcome:", 0) != 0) continue;
    std::string rest = res.message.substr(8);
    size_t a = rest.find('|'), b = rest.find('|', a + 1);
    InitOutcome o{static_cast<tesseraResult_t>(std::stoi(rest.substr(0, a))),
                  rest.substr(b + 1), std::stod(rest.substr(a + 1, b - a - 1))};
    EXPECT_LT(o.seconds, kLibraryTimeoutMs / 1000.0 + kSlackSeconds) << "process " << res.rank;
    outcomes.push_back(o);
  }
  return outcomes;
}

std::string Describe(const std::vector<InitOutcome>& outcomes) {
  std::string out;
  for (size_t p = 0; p < outcomes.size(); ++p) {
    out += "process " + std::to_string(p) + ": " + CodeName(outcomes[p].code) + " after " +
           std::to_string(outcomes[p].seconds) + " s: " + outcomes[p].message + "\n";
  }
  return out;
}

// Two processes claim rank 1 of 3: nobody can succeed (rank 2 never comes), and the
// duplicate is named rather than left to a timeout.
TEST(InconsistentRanks, TwoProcessesClaimTheSameRank) {
  auto outcomes = InitWithClaims({{3, 0}, {3, 1}, {3, 1}}, FailingOptions());
  ASSERT_EQ(3u, outcomes.size());
  int named = 0;
  for (const InitOutcome& o : outcomes) {
    EXPECT_NE(tesseraSuccess, o.code) << Describe(outcomes);
    if (o.code == tesseraInvalidUsage && o.message.find("rank 1") != std::string::npos) ++named;
  }
  EXPECT_EQ(3, named) << "every process should learn of the duplicate rank 1\n" << Describe(outcomes);
  printf("%s", Describe(outcomes).c_str());
}

TEST(InconsistentRanks, NranksDiffersBetweenRanks) {
  auto outcomes = InitWithClaims({{2, 0}, {3, 1}}, FailingOptions());
  ASSERT_EQ(2u, outcomes.size());
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(tesseraInvalidUsage, o.code) << Describe(outcomes);
    EXPECT_NE(std::string::npos, o.message.find("nranks")) << Describe(outcomes);
  }
  printf("%s", Describe(outcomes).c_str());
}

// A setting that must agree (here TESSERA_SHM_SLOTS) differs on one rank: named.
TEST(InconsistentRanks, SettingDiffersBetweenRanks) {
  RankOptions opts = FailingOptions();
  opts.env_for_rank = [](int rank) {
    return rank == 1 ? EnvVars{{"TESSERA_SHM_SLOTS", "4"}} : EnvVars{};
  };
  auto outcomes = InitWithClaims({{2, 0}, {2, 1}}, opts);
  ASSERT_EQ(2u, outcomes.size());
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(tesseraInvalidUsage, o.code) << Describe(outcomes);
    EXPECT_NE(std::string::npos, o.message.find("TESSERA_SHM_SLOTS")) << Describe(outcomes);
  }
}

// A file of measured choices (TESSERA_ALGO_TABLE) must say the same on every rank: one
// rank reading another is named, like any setting that must agree.
TEST(InconsistentRanks, MeasuredChoicesDifferBetweenRanks) {
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "/choices_a.txt") << "allreduce 1x2 8 recursive_doubling\n";
  std::ofstream(dir + "/choices_b.txt") << "allreduce 1x2 8 ring\n";
  RankOptions opts = FailingOptions();
  opts.env_for_rank = [dir](int rank) {
    return EnvVars{{"TESSERA_ALGO_TABLE", dir + (rank == 1 ? "/choices_b.txt" : "/choices_a.txt")}};
  };
  auto outcomes = InitWithClaims({{2, 0}, {2, 1}}, opts);
  ASSERT_EQ(2u, outcomes.size());
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(tesseraInvalidUsage, o.code) << Describe(outcomes);
    EXPECT_NE(std::string::npos, o.message.find("TESSERA_ALGO_TABLE")) << Describe(outcomes);
  }
}

// A malformed line of measured choices, or an algorithm no collective has: an
// InvalidArgument naming the file and the line, at init.
TEST(BadSetting, MeasuredChoicesNameTheirBadLine) {
  const std::string path = testing::TempDir() + "/choices_bad.txt";
  for (const char* text : {"# sweep\nallreduce 2x2 eight ring\n", "# sweep\nallreduce 2x2 8 quickest\n"}) {
    std::ofstream(path) << text;
    auto results = RunRanksRaw(1, [&path](const RankContext& ctx) {
      RankChecks c;
      setenv("TESSERA_ALGO_TABLE", path.c_str(), 1);
      tesseraComm_t comm = nullptr;
      ExpectRejected(&c, tesseraCommInitRank(&comm, 1, ctx.ids[0], 0), tesseraInvalidArgument, nullptr,
                     path + ":2:", "init with a bad TESSERA_ALGO_TABLE");
      if (comm != nullptr) tesseraCommDestroy(comm);
      return c.str();
    }, FailingOptions());
    EXPECT_EQ("", Failures(results)) << text;
  }
}

// A malformed setting is an InvalidArgument naming the variable, at init (set in the
// body, after rank 0 has created the id with good settings).
TEST(BadSetting, InvalidArgumentNamingTheVariable) {
  auto results = RunRanksRaw(1, [](const RankContext& ctx) {
    RankChecks c;
    setenv("TESSERA_TIMEOUT_MS", "soon", 1);
    tesseraComm_t comm = nullptr;
    ExpectRejected(&c, tesseraCommInitRank(&comm, 1, ctx.ids[0], 0), tesseraInvalidArgument,
                   nullptr, "TESSERA_TIMEOUT_MS", "init with TESSERA_TIMEOUT_MS=soon");
    if (comm != nullptr) tesseraCommDestroy(comm);
    return c.str();
  }, FailingOptions());
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
