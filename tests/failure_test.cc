// "Never hang": peers that die, stay silent or get aborted make the waiting calls fail
// within the communicator's timeout (TESSERA_TIMEOUT_MS, 3 s here) plus a little slack,
// with a message naming the operation and the peer; nothing is left in /dev/shm.
//
// The ShmLeak tests count /dev/shm entries named tessera*, so they must not run beside
// other tessera tests: tests/BUILD runs them in a target of their own, tagged exclusive.
#include <dlfcn.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kTimeoutMs = 3000;
constexpr double kSlackSeconds = 2.0;
constexpr double kWithin = kTimeoutMs / 1000.0 + kSlackSeconds;
constexpr size_t kCount = 65537;

enum class Transport { kShm, kTcp };

RankOptions FailureOptions(Transport t) {
  RankOptions opts;
  opts.timeout = Milliseconds(30000);  // far beyond kWithin: a hang shows as a hang
  opts.env["TESSERA_TIMEOUT_MS"] = std::to_string(kTimeoutMs);
  if (t == Transport::kTcp) opts.env["TESSERA_TRANSPORT"] = "tcp";
  return opts;
}

void PrintTo(Transport t, std::ostream* os) { *os << (t == Transport::kShm ? "shm" : "tcp"); }

std::string TransportName(const testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kShm ? "shm" : "tcp";
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// The outcome of one collective call on a rank.
struct CallOutcome {
  tesseraResult_t code = tesseraSuccess;
  std::string message;  // tesseraGetLastError(comm) when it failed
  double seconds = 0;
};

CallOutcome TimedAllReduce(tesseraComm_t comm, size_t count) {
  std::vector<float> buf(count, 1.0f);
  auto start = std::chrono::steady_clock::now();
  CallOutcome o;
  o.code = tesseraAllReduce(buf.data(), buf.data(), count, tesseraFloat32, tesseraSum, comm, nullptr);
  o.seconds = SecondsSince(start);
  if (o.code != tesseraSuccess) o.message = LastError(comm);
  return o;
}

// tesseraCommInitRank into *comm, timed; the message from tesseraGetLastError(NULL).
CallOutcome TimedInit(const RankContext& ctx, tesseraComm_t* comm) {
  auto start = std::chrono::steady_clock::now();
  CallOutcome o;
  o.code = tesseraCommInitRank(comm, ctx.nranks, ctx.ids[0], ctx.rank);
  o.seconds = SecondsSince(start);
  o.message = o.code == tesseraSuccess ? "" : LastError(nullptr);
  return o;
}

std::string Describe(const CallOutcome& o) {
  return CodeName(o.code) + " after " + std::to_string(o.seconds) + " s: \"" + o.message + "\"";
}

// Checks a call that must fail because of a peer: code in `allowed`, in time, and the
// message contains each of `needles` (case-insensitive).
void ExpectPeerFailure(RankChecks* c, const CallOutcome& o, std::set<tesseraResult_t> allowed,
                       const std::vector<std::string>& needles, const std::string& what) {
  c->Expect(allowed.count(o.code) == 1, what + ": unexpected result " + Describe(o));
  c->Expect(o.seconds < kWithin, what + ": took " + std::to_string(o.seconds) + " s, more than " +
                                     std::to_string(kWithin) + " s");
  for (const std::string& needle : needles) {
    c->Expect(Lower(o.message).find(Lower(needle)) != std::string::npos,
              what + ": message does not name \"" + needle + "\": " + Describe(o));
  }
}

const std::set<tesseraResult_t> kPeerGone = {tesseraRemoteError, tesseraTimeout};

class PeerFailure : public testing::TestWithParam<Transport> {};

// (a) Rank 2 exits right after init; ranks 0 and 1 fail naming it.
void PeerExitsAfterInit(Transport t, size_t count) {
  auto results = RunRanks(3, [count](int rank, tesseraComm_t comm) {
    if (rank == 2) _exit(0);
    RankChecks c;
    CallOutcome o = TimedAllReduce(comm, count);
    ExpectPeerFailure(&c, o, kPeerGone, {"rank 2", "[culprit: rank 2]"}, "allreduce with rank 2 gone");
    printf("[ info ] rank %d: %s\n", rank, Describe(o).c_str());
    // Do not destroy (and so disappear) before the other survivor has its error.
    ArriveAndWait(0, 2, Milliseconds(20000));
    return c.str();
  }, FailureOptions(t));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_TRUE(results[2].died()) << results[2].Describe();
}
TEST_P(PeerFailure, PeerExitsAfterInit) { PeerExitsAfterInit(GetParam(), kCount); }

// 16M-element allreduces, repeated until one fails, during which rank 2 raises `signo`
// on itself 20 ms in (the links are all set up before, so it lands in a data transfer).
// Rank 2 never returns from here.
CallOutcome BigAllReduceWhileRank2Raises(int rank, int signo, tesseraComm_t comm) {
  const size_t big = size_t{16} << 20;
  std::vector<float> buf(big, 1.0f);
  // Every rank has filled its buffer before rank 2's clock starts: under TSan the fill
  // took over 2 s, and a rank still in it when rank 2 died was named a culprit too
  // (rightly: it had not called yet), where rank 2 alone is expected.
  float one = 1.0f;
  CallOutcome o;
  o.code = tesseraAllReduce(&one, &one, 1, tesseraFloat32, tesseraSum, comm, nullptr);
  if (rank == 2 && o.code == tesseraSuccess) {
    std::thread([signo] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      raise(signo);
    }).detach();
  }
  // One 64 MiB allreduce can finish in less than the 20 ms on a quiet host, so the
  // ranks repeat it until one fails: the signal lands in one of them.
  for (int call = 0; call < 200 && o.code == tesseraSuccess; ++call) {
    auto start = std::chrono::steady_clock::now();
    o.code = tesseraAllReduce(buf.data(), buf.data(), big, tesseraFloat32, tesseraSum, comm, nullptr);
    o.seconds = SecondsSince(start);
  }
  if (o.code != tesseraSuccess) o.message = LastError(comm);
  if (rank == 2) pause();
  printf("[ info ] rank %d: %s\n", rank, Describe(o).c_str());
  return o;
}

// A rank killed (SIGKILL) in the middle of a large allreduce: the others fail in time.
// A small allreduce first sets up every link, so the kill lands in the data transfer.
TEST_P(PeerFailure, PeerKilledDuringAllReduce) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    CallOutcome warm_up = TimedAllReduce(comm, 1031);
    if (!c.ExpectCode(warm_up.code, tesseraSuccess, "warm-up allreduce")) return c.str();
    const CallOutcome o = BigAllReduceWhileRank2Raises(rank, SIGKILL, comm);
    if (o.code != tesseraSuccess) {
      ExpectPeerFailure(&c, o, kPeerGone, {"[culprit: rank 2]"}, "allreduce while rank 2 is killed");
    }
    ArriveAndWait(0, 2, Milliseconds(20000));
    return c.str();
  }, FailureOptions(GetParam()));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_EQ(SIGKILL, results[2].signal) << results[2].Describe();
}

// (b) Rank 2 stays alive but never calls the collective: the others time out, naming
// the operation.
void SilentPeerTimesOut(Transport t, size_t count) {
  auto results = RunRanks(3, [count](int rank, tesseraComm_t comm) {
    if (rank == 2) {
      bool done = WaitForRanksDone({0, 1}, Milliseconds(25000));
      return std::string(done ? "" : "ranks 0 and 1 never finished");
    }
    RankChecks c;
    CallOutcome o = TimedAllReduce(comm, count);
    ExpectPeerFailure(&c, o, {tesseraTimeout}, {"rank 2", "has not called allreduce #1", "[culprit: rank 2]"},
                      "allreduce with rank 2 silent");
    c.Expect(o.seconds >= kTimeoutMs / 1000.0 * 0.9,
             "timed out before the timeout: " + Describe(o));
    printf("[ info ] rank %d: %s\n", rank, Describe(o).c_str());
    ArriveAndWait(0, 2, Milliseconds(20000));
    return c.str();
  }, FailureOptions(t));
  EXPECT_EQ("", Failures(results));
}
TEST_P(PeerFailure, SilentPeerTimesOut) { SilentPeerTimesOut(GetParam(), kCount); }

// The same two where an allreduce of 8 bytes goes on the host board (transport/
// host_board.h): its waits name the rank gone or silent as the links' do.
TEST(BoardFailure, PeerExitsAfterInit) { PeerExitsAfterInit(Transport::kShm, 2); }
TEST(BoardFailure, SilentPeerTimesOut) { SilentPeerTimesOut(Transport::kShm, 2); }

// Rank 2 is stopped (SIGSTOP) in the middle of a large allreduce: every survivor times
// out naming rank 2 as the culprit, stopped, and no survivor blames another. Rank 0
// then kills it.
TEST_P(PeerFailure, StoppedPeerIsTheCulprit) {
  auto results = RunRanks(4, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    std::vector<int32_t> pids(4);
    int32_t mine = getpid();
    const tesseraResult_t r = tesseraAllGather(&mine, pids.data(), 1, tesseraInt32, comm, nullptr);
    if (!c.ExpectCode(r, tesseraSuccess, "allgather of pids")) return c.str();
    const CallOutcome o = BigAllReduceWhileRank2Raises(rank, SIGSTOP, comm);
    ExpectPeerFailure(&c, o, kPeerGone, {"[culprit: rank 2]", "stopped"}, "allreduce while rank 2 is stopped");
    ArriveAndWait(0, 3, Milliseconds(20000));
    if (rank == 0) kill(pids[2], SIGKILL);
    return c.str();
  }, FailureOptions(GetParam()));
  ASSERT_EQ(4u, results.size());
  for (int r : {0, 1, 3}) EXPECT_TRUE(results[r].ok()) << results[r].Describe();
  EXPECT_EQ(SIGKILL, results[2].signal) << results[2].Describe();
}

// (c) tesseraCommAbort from a second thread unblocks a collective that cannot complete
// (the peer never calls it; the timeout is long, so only the abort can end the wait).
TEST_P(PeerFailure, AbortFromAnotherThread) {
  RankOptions opts = FailureOptions(GetParam());
  opts.env["TESSERA_TIMEOUT_MS"] = "60000";
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    if (ctx.rank == 1) {
      WaitForRanksDone({0}, Milliseconds(25000));
      tesseraCommDestroy(comm);
      return std::string();
    }
    RankChecks c;
    using Clock = std::chrono::steady_clock;
    std::atomic<int64_t> abort_start_us{0}, abort_end_us{0};
    std::atomic<int> abort_result{-1};
    const Clock::time_point t0 = Clock::now();
    auto us_since_t0 = [t0] {
      return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    };
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      abort_start_us = us_since_t0();
      abort_result = tesseraCommAbort(comm);
      abort_end_us = us_since_t0();
    });
    std::vector<float> buf(kCount, 1.0f);
    tesseraResult_t r =
        tesseraAllReduce(buf.data(), buf.data(), kCount, tesseraFloat32, tesseraSum, comm, nullptr);
    // comm may already be freed by the abort: read the thread's message, not comm's.
    std::string message = LastError(nullptr);
    int64_t returned_us = us_since_t0();
    aborter.join();
    c.Expect(abort_start_us > 0 && returned_us >= abort_start_us,
             "allreduce returned (" + CodeName(r) + ") before the abort was called");
    double after_abort = (returned_us - abort_start_us) / 1e6;
    c.Expect(after_abort < 2.0, "allreduce returned " + std::to_string(after_abort) +
                                    " s after tesseraCommAbort");
    c.ExpectCode(r, tesseraRemoteError, "allreduce interrupted by tesseraCommAbort");
    c.Expect(Lower(message).find("abort") != std::string::npos,
             "message does not say aborted: \"" + message + "\"");
    c.ExpectCode(static_cast<tesseraResult_t>(abort_result.load()), tesseraSuccess, "tesseraCommAbort");
    double abort_seconds = (abort_end_us - abort_start_us) / 1e6;
    c.Expect(abort_seconds < 2.0, "tesseraCommAbort took " + std::to_string(abort_seconds) + " s");
    printf("[ info ] aborted allreduce returned %s after %.3f s, abort took %.3f s: %s\n",
           CodeName(r).c_str(), after_abort, abort_seconds, message.c_str());
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// tesseraCommAbort with nothing in flight is a destroy.
TEST_P(PeerFailure, AbortIdleComm) {
  auto results = RunRanksRaw(2, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    RankChecks c;
    auto start = std::chrono::steady_clock::now();
    c.ExpectCode(tesseraCommAbort(comm), tesseraSuccess, "tesseraCommAbort of an idle comm");
    c.Expect(SecondsSince(start) < 1.0, "abort of an idle comm took " +
                                            std::to_string(SecondsSince(start)) + " s");
    return c.str();
  }, FailureOptions(GetParam()));
  EXPECT_EQ("", Failures(results));
}

// (d) After a failure the communicator is broken: the async error reports it, and the
// next collective returns the same error at once.
TEST_P(PeerFailure, BrokenCommFailsFast) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    if (rank == 2) _exit(0);
    RankChecks c;
    tesseraResult_t async = tesseraInternalError;
    c.ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "GetAsyncError");
    c.ExpectCode(async, tesseraSuccess, "async error before any failure");
    CallOutcome first = TimedAllReduce(comm, kCount);
    ExpectPeerFailure(&c, first, kPeerGone, {}, "first allreduce");
    c.ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "GetAsyncError");
    c.ExpectCode(async, first.code, "async error after the failure");
    CallOutcome second = TimedAllReduce(comm, kCount);
    c.ExpectCode(second.code, first.code, "second allreduce on the broken comm");
    c.Expect(second.seconds < 0.1, "second allreduce waited " + std::to_string(second.seconds) + " s");
    c.Expect(!second.message.empty() && second.message != "(null)",
             "second allreduce without a message");
    // The comm keeps its own error even after another call fails on this thread.
    c.ExpectCode(tesseraGetVersion(nullptr), tesseraInvalidArgument, "tesseraGetVersion(NULL)");
    c.Expect(LastError(comm) == first.message,
             "tesseraGetLastError(comm) after another failure: \"" + LastError(comm) +
                 "\", want the comm's own \"" + first.message + "\"");
    c.Expect(LastError(nullptr).find("version") != std::string::npos,
             "tesseraGetLastError(NULL) is not the thread's last failure: " + LastError(nullptr));
    CallOutcome empty = TimedAllReduce(comm, 0);
    c.Expect(empty.code == first.code, "count-0 allreduce on a broken comm (every later collective returns the "
                                       "same error): " + Describe(empty));
    printf("[ info ] rank %d: first %s; second %s\n", rank, Describe(first).c_str(),
           Describe(second).c_str());
    ArriveAndWait(0, 2, Milliseconds(20000));
    return c.str();
  }, FailureOptions(GetParam()));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
}

// tesseraCommInitRank on every rank while rank 2 exits (code 3) 200 ms after it started
// creating; rank 1 joins only once rank 2 is gone (a fixed sleep failed under TSan, whose
// ranks start hundreds of ms apart). Rank 2 never returns from here.
CallOutcome InitWhileRank2Dies(const RankContext& ctx, tesseraComm_t* comm) {
  if (ctx.rank == 2) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      _exit(3);
    }).detach();
  }
  if (ctx.rank == 1) WaitForRanksDone({2}, Milliseconds(10000));
  const CallOutcome o = TimedInit(ctx, comm);
  if (ctx.rank == 2) pause();  // init returned before the exit: wait for it
  printf("[ info ] rank %d: init %s\n", ctx.rank, Describe(o).c_str());
  return o;
}

// (f) Rank 2 dies while blocked in tesseraCommInitRank (rank 1 has not joined yet).
// Rank 2 did reach the rendezvous, so an init that sets links up lazily may succeed;
// then the first allreduce must fail. Either way: in time, naming rank 2.
TEST_P(PeerFailure, PeerDiesDuringInit) {
  auto results = RunRanksRaw(3, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    const CallOutcome o = InitWhileRank2Dies(ctx, &comm);
    RankChecks c;
    if (o.code == tesseraSuccess) {
      CallOutcome a = TimedAllReduce(comm, kCount);
      printf("[ info ] rank %d: allreduce %s\n", ctx.rank, Describe(a).c_str());
      ExpectPeerFailure(&c, a, kPeerGone, {"rank 2"}, "allreduce after rank 2 died in init");
      ArriveAndWait(0, 2, Milliseconds(20000));
      tesseraCommDestroy(comm);
    } else {
      ExpectPeerFailure(&c, o, kPeerGone, {"rank 2"}, "init with rank 2 dead");
      c.Expect(comm == nullptr, "failed init left *comm non-NULL");
    }
    return c.str();
  }, FailureOptions(GetParam()));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_EQ(3, results[2].exit_code) << results[2].Describe();
}

// (f'') The same with the rendezvous' table forwarded down a chain (fanout 1: the
// service sends it to rank 0, rank 0 to rank 1, ...): rank 2 dies before forwarding
// it, so rank 3 fails at once naming rank 2, and rank 4 gets rank 3's failure, which
// names rank 2 too. Ranks 0 and 1 get the table and fail later, naming rank 2 or 3.
TEST_P(PeerFailure, PeerDiesBeforeForwardingTheTable) {
  RankOptions opts = FailureOptions(GetParam());
  opts.env["TESSERA_BOOTSTRAP_FANOUT"] = "1";
  auto results = RunRanksRaw(5, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    const CallOutcome o = InitWhileRank2Dies(ctx, &comm);
    RankChecks c;
    if (ctx.rank >= 3) {
      ExpectPeerFailure(&c, o, kPeerGone, {"[culprit: rank 2]", "forwards the table"}, "init below rank 2");
      c.Expect(o.seconds < 3.0, "init below rank 2 failed only after " + std::to_string(o.seconds) + " s");
    } else if (o.code == tesseraSuccess) {
      CallOutcome a = TimedAllReduce(comm, kCount);
      printf("[ info ] rank %d: allreduce %s\n", ctx.rank, Describe(a).c_str());
      ExpectPeerFailure(&c, a, kPeerGone, {"rank"}, "allreduce after rank 2 died in init");
    } else {
      ExpectPeerFailure(&c, o, kPeerGone, {"rank"}, "init with rank 2 dead");
    }
    if (ctx.rank >= 3) WaitForRanksDone({0, 1}, Milliseconds(25000));  // alive while 0 and 1 diagnose
    if (comm != nullptr) tesseraCommDestroy(comm);
    return c.str();
  }, opts);
  ASSERT_EQ(5u, results.size());
  for (int r : {0, 1, 3, 4}) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
  EXPECT_EQ(3, results[2].exit_code) << results[2].Describe();
}

// (f') The process that holds the rendezvous (rank 0, which created the id) dies
// before anyone joins: the others fail in time.
TEST_P(PeerFailure, RendezvousHostDies) {
  auto results = RunRanksRaw(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) _exit(0);
    tesseraComm_t comm = nullptr;
    const CallOutcome o = TimedInit(ctx, &comm);
    RankChecks c;
    ExpectPeerFailure(&c, o, kPeerGone, {"rendezvous"}, "init with the rendezvous gone");
    printf("[ info ] rank %d: init %s\n", ctx.rank, Describe(o).c_str());
    if (comm != nullptr) tesseraCommDestroy(comm);
    return c.str();
  }, FailureOptions(GetParam()));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_TRUE(results[2].ok()) << results[2].Describe();
}

// A rank that never calls tesseraCommInitRank: the others time out naming it.
TEST_P(PeerFailure, MissingRankTimesOutInInit) {
  auto results = RunRanksRaw(3, [](const RankContext& ctx) {
    if (ctx.rank == 2) {
      WaitForRanksDone({0, 1}, Milliseconds(25000));
      return std::string();
    }
    tesseraComm_t comm = nullptr;
    const CallOutcome o = TimedInit(ctx, &comm);
    RankChecks c;
    ExpectPeerFailure(&c, o, {tesseraTimeout}, {"2"}, "init without rank 2");
    printf("[ info ] rank %d: init %s\n", ctx.rank, Describe(o).c_str());
    if (comm != nullptr) tesseraCommDestroy(comm);
    return c.str();
  }, FailureOptions(GetParam()));
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Shm, PeerFailure, testing::Values(Transport::kShm), TransportName);
INSTANTIATE_TEST_SUITE_P(Tcp, PeerFailure, testing::Values(Transport::kTcp), TransportName);

// --- (e) Nothing left in /dev/shm ------------------------------------------------------

std::vector<std::string> TesseraShmEntries() {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind("tessera", 0) == 0) names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + " ";
  return out;
}

// After a clean run and after runs where a rank died, /dev/shm holds no more tessera
// entries than before.
TEST(ShmLeak, NothingLeftAfterDeathsAndDestroy) {
  const std::vector<std::string> before = TesseraShmEntries();
  // A clean run.
  auto clean = RunRanks(4, [](int, tesseraComm_t comm) {
    CallOutcome o = TimedAllReduce(comm, kCount);
    return o.code == tesseraSuccess ? std::string() : Describe(o);
  }, FailureOptions(Transport::kShm));
  EXPECT_EQ("", Failures(clean));
  EXPECT_EQ(Join(before), Join(TesseraShmEntries())) << "after a clean run";
  // Rank 3 exits after init; the others fail and destroy their comms.
  auto died = RunRanks(4, [](int rank, tesseraComm_t comm) {
    if (rank == 3) _exit(0);
    CallOutcome o = TimedAllReduce(comm, kCount);
    ArriveAndWait(0, 3, Milliseconds(20000));
    return o.code != tesseraSuccess ? std::string() : "allreduce succeeded without rank 3";
  }, FailureOptions(Transport::kShm));
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(died[r].ok()) << died[r].Describe();
  EXPECT_EQ(Join(before), Join(TesseraShmEntries())) << "after rank 3 died";
}

// The worst moment to die: right after creating one's own segment, before the peers
// have mapped it (and so before it is unlinked). This test binary interposes ftruncate,
// which libtessera.so calls right after creating its segment, so rank 2 dies exactly
// there, every time. The peers fail; nothing may remain.
std::atomic<bool> g_exit_after_ftruncate{false};

}  // namespace
}  // namespace tessera_test

extern "C" int ftruncate(int fd, off_t length) {
  using Fn = int (*)(int, off_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "ftruncate"));
  int rc = real(fd, length);
  if (tessera_test::g_exit_after_ftruncate.load()) _exit(5);
  return rc;
}

namespace tessera_test {
namespace {

// Three ranks create a communicator over shared memory while rank 2 dies at `trigger`
// (exit code `exit_code`, in a system call of its set-up, interposed below): ranks 0 and
// 1 fail in time naming rank 2, at creation or at their first allreduce, and nothing of
// anyone is left in /dev/shm.
void ExpectCleanDeathInSetUp(std::atomic<bool>* trigger, int exit_code, const std::string& what) {
  const std::vector<std::string> before = TesseraShmEntries();
  auto results = RunRanksRaw(3, [trigger, what](const RankContext& ctx) {
    if (ctx.rank == 2) trigger->store(true);
    tesseraComm_t comm = nullptr;
    const CallOutcome o = TimedInit(ctx, &comm);
    if (ctx.rank == 2) return "rank 2 did not die " + what + "; init: " + Describe(o);
    RankChecks c;
    if (o.code == tesseraSuccess) {
      CallOutcome a = TimedAllReduce(comm, kCount);
      ExpectPeerFailure(&c, a, kPeerGone, {"[culprit: rank 2]"}, "allreduce after rank 2 died " + what);
      ArriveAndWait(0, 2, Milliseconds(20000));
      tesseraCommDestroy(comm);
    } else {
      ExpectPeerFailure(&c, o, kPeerGone, {"[culprit: rank 2]"}, "init while rank 2 died " + what);
      ArriveAndWait(0, 2, Milliseconds(20000));
    }
    printf("[ info ] rank %d: init %s\n", ctx.rank, Describe(o).c_str());
    return c.str();
  }, FailureOptions(Transport::kShm));
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_EQ(exit_code, results[2].exit_code) << results[2].Describe();
  EXPECT_EQ(Join(before), Join(TesseraShmEntries()))
      << "entries left after rank 2 (pid " << results[2].pid << ") died " << what;
}

TEST(ShmLeak, RankDiesRightAfterCreatingItsSegment) {
  ExpectCleanDeathInSetUp(&g_exit_after_ftruncate, 5, "right after creating its segment");
}

// The last moment to die with a name in /dev/shm: as it removes its own segment's name,
// once every local peer has mapped the segment. Nobody waits for it any more, so the
// peers' set-up succeeds and only their teardown can remove the name (the fault suite's
// segv_unlink case, tests/faults). Interposed like ftruncate above: rank 2 exits in its
// first shm_unlink, which is its own segment's.
std::atomic<bool> g_exit_in_shm_unlink{false};

}  // namespace
}  // namespace tessera_test

extern "C" int shm_unlink(const char* name) {
  using Fn = int (*)(const char*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "shm_unlink"));
  if (tessera_test::g_exit_in_shm_unlink.load()) _exit(6);
  return real(name);
}

namespace tessera_test {
namespace {

TEST(ShmLeak, RankDiesAsItUnlinksItsSegment) {
  ExpectCleanDeathInSetUp(&g_exit_in_shm_unlink, 6, "unlinking its segment");
}

}  // namespace
}  // namespace tessera_test
