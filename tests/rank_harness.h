// rank_harness: runs one test body in N real processes, one per rank (forked from the
// test), the way Gloo's base_test runs one worker per rank.
//
// Before forking, the harness maps a shared anonymous region that carries
//  - the tesseraUniqueId(s): child rank 0 calls tesseraGetUniqueId (the rendezvous
//    service lives in the caller's process, so it must be a rank, not the test process)
//    and publishes them; the other ranks wait for them with a deadline;
//  - what the ranks swap with ExchangeWithRanks (e.g. transport addresses, for tests
//    of one transport below the communicator), barriers;
//  - each rank's result: "" for success or a failure message.
// Each child clears the inherited TESSERA_* variables (except TESSERA_DEBUG), applies the
// environment of RankOptions, creates its communicator (RunRanks) or not (RunRanksRaw),
// runs the body, destroys the communicator and _exits.
//
// The parent waits for every child with one overall deadline, SIGKILLs the ones still
// running at the deadline and reports where each one hung; a child that dies from a
// signal or exits without reporting is reported as such. No child outlives RunRanks.
// When the harness killed a rank, it removes the /dev/shm names of every rank of the run
// (nobody was left to). In an AddressSanitizer build each rank runs LeakSanitizer's
// check before it _exits and reports leaks as its failure (docs/sanitizers.md).
//
// Bodies run in the children: gtest assertions there are lost, so a body returns its
// failures as text (see RankChecks) and the test asserts on the returned results.
#ifndef TESSERA_TESTS_RANK_HARNESS_H_
#define TESSERA_TESTS_RANK_HARNESS_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera_test {

using Milliseconds = std::chrono::milliseconds;
using EnvVars = std::map<std::string, std::string>;

struct RankOptions {
  // Overall deadline for all ranks, from the first fork to the last exit.
  Milliseconds timeout{60000};
  // Environment applied to every rank, then env_for_rank(rank) on top.
  EnvVars env;
  std::function<EnvVars(int rank)> env_for_rank;
  // > 0: emulate hosts of this many consecutive ranks each, by giving every rank
  // TESSERA_HOST_ID=host<rank / ranks_per_host>.
  int ranks_per_host = 0;
  // How many unique ids rank 0 creates (RunRanks uses the first one). 0, for raw
  // bodies below the public API: none, and no call into tessera's API at all.
  int unique_ids = 1;
  // Once a rank has failed (reported a failure, or exited without reporting), wait this
  // long for the others, then kill them (reported as "stopped after rank N failed").
  // Negative: wait for everyone until `timeout`. Happy-path suites set it so that one
  // broken case does not cost a full library timeout.
  Milliseconds failure_grace{-1};
};

// What one rank did.
struct RankResult {
  int rank = -1;
  int pid = -1;            // the rank's process id
  bool reported = false;   // the child finished its body and wrote `message`
  std::string message;     // the body's result ("" = success) when reported
  bool hung = false;       // still running at the deadline: killed by the harness
  bool stopped = false;    // killed after another rank failed (failure_grace)
  std::string phase;       // where the child was when it stopped: "init", "body", ...
  int exit_code = -1;      // when it exited normally
  int signal = 0;          // when a signal killed it (other than the harness's SIGKILL)
  double seconds = 0;      // wall time from fork to exit, seen by the parent

  // Reported success, exited normally with code 0.
  bool ok() const { return reported && message.empty() && exit_code == 0; }
  // Died by itself (exit or signal) without reporting, e.g. a rank told to die.
  bool died() const { return !reported && !hung && !stopped; }
  std::string Describe() const;  // one line: "rank 2: killed by signal 11 in body"
};

// Handed to raw bodies: which rank this is and the published ids.
struct RankContext {
  int rank = 0;
  int nranks = 0;
  std::vector<tesseraUniqueId> ids;
};

using RankBody = std::function<std::string(int rank, tesseraComm_t comm)>;
using RawRankBody = std::function<std::string(const RankContext& ctx)>;

// Creates a communicator of nranks on every rank (ids[0]), runs body, destroys it.
// A failed tesseraCommInitRank or tesseraCommDestroy is reported as the rank's failure.
std::vector<RankResult> RunRanks(int nranks, const RankBody& body,
                                 const RankOptions& opts = RankOptions());

// Runs body without creating a communicator: the body creates (or not) what it needs.
std::vector<RankResult> RunRanksRaw(int nranks, const RawRankBody& body,
                                    const RankOptions& opts = RankOptions());

// "" when every rank is ok(), otherwise one line per rank that is not.
std::string Failures(const std::vector<RankResult>& results);

// For use inside a body: blocks until every rank in `ranks` has reported or exited
// (or `limit` passed); returns false on timeout. Lets a rank stay alive, silent, until
// the ranks that wait for it are done. Ranks that exit are seen through their phase.
bool WaitForRanksDone(const std::vector<int>& ranks, Milliseconds limit);

// For use inside a body: counts this rank in at barrier `barrier` (0..7) and blocks
// until `count` ranks have arrived (or `limit` passed); returns false on timeout. Each
// barrier is used once per RunRanks.
bool ArriveAndWait(int barrier, int count, Milliseconds limit);

// For use inside a body: publishes `mine` (at most 8 KiB) and fills *all with every
// rank's, indexed by rank (this rank's own included). Every rank must call it, once per
// RunRanks. False on timeout (`limit`) or a larger `mine`.
bool ExchangeWithRanks(const std::string& mine, std::vector<std::string>* all, Milliseconds limit);

// tesseraCommInitRank(comm, ctx.nranks, ctx.ids[id_index], ctx.rank): "" or a message
// with the code and tesseraGetLastError.
std::string InitComm(const RankContext& ctx, tesseraComm_t* comm, int id_index = 0);

// Runs `body` with this process's stderr (where tessera's log goes) in a temporary
// file, and returns what was written there while it ran.
std::string CaptureStderr(const std::function<void()>& body);

// Collects a body's failures as text.
class RankChecks {
 public:
  // Records `what` when cond is false. Returns cond.
  bool Expect(bool cond, const std::string& what);
  // Records a mismatch when got != want, with both names and the last error.
  bool ExpectCode(tesseraResult_t got, tesseraResult_t want, const std::string& call);
  // Records a failure unless `text` contains `needle`.
  bool ExpectContains(const std::string& text, const std::string& needle,
                      const std::string& what);
  bool ok() const { return failures_.empty(); }
  const std::string& str() const { return failures_; }

 private:
  std::string failures_;
};

// "tesseraInvalidArgument(4)"; also for codes out of range.
std::string CodeName(tesseraResult_t code);

// tesseraGetLastError(comm) as a std::string ("(null)" when it returns NULL).
std::string LastError(tesseraComm_t comm);

// Seconds since `start`.
double SecondsSince(std::chrono::steady_clock::time_point start);

// TESSERA_TEST_SWEEP=small (set by the sanitizer builds, .bazelrc): the parameterised
// suites run a covering subset of their cases instead of every combination (every
// value of every parameter still, and every pair of rank count and size), since a
// sanitized call is 5-10x slower. Read from the test process's environment; the
// harness clears TESSERA_* in the ranks.
bool SmallSweep();

// TESSERA_TEST_TRANSPORT of this test process ("" when unset): "ucx" runs the
// one-host suites over UCX (tests/BUILD).
std::string TestTransport();

}  // namespace tessera_test

#endif  // TESSERA_TESTS_RANK_HARNESS_H_
