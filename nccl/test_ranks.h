// test_ranks: runs a test body in N forked processes, one per rank, for the tests of the
// drop-in libnccl.so.2. Written against the real nccl.h and libc only: these tests see
// tessera through libnccl.so.2 and nothing else.
//
// Before forking, RunRanks maps a shared anonymous region. Child rank 0 calls
// ncclGetUniqueId (the rendezvous service lives in the calling process, so it must be a
// rank) and publishes the ids there; the other ranks wait for them with a deadline.
// Each child runs the body and writes its result there ("" for success, else what
// failed), then _exits. The parent waits for all with one deadline, kills those still
// running and reports each rank that failed, hung or died. No child outlives RunRanks.
#ifndef TESSERA_NCCL_TEST_RANKS_H_
#define TESSERA_NCCL_TEST_RANKS_H_

#include <nccl.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace nccl_test {

struct RankContext {
  int rank = 0;
  int nranks = 0;
  std::vector<ncclUniqueId> ids;  // created by rank 0
};

// Returns "" on success, otherwise a description of what failed on this rank.
using RankBody = std::function<std::string(const RankContext& ctx)>;

struct RankOptions {
  int timeout_ms = 60000;                  // for all ranks together
  int unique_ids = 1;                      // how many ids rank 0 creates
  std::map<std::string, std::string> env;  // set in every child before the body
};

// Runs body on nranks forked ranks. "" when every rank succeeded, else one line per rank
// that did not.
std::string RunRanks(int nranks, const RankBody& body, const RankOptions& opts = RankOptions());

// For bodies: ncclCommInitRank(comm, ctx.nranks, ctx.ids[id], ctx.rank); "" or the error.
std::string InitComm(const RankContext& ctx, ncclComm_t* comm, int id = 0);

// For bodies: blocks until `count` ranks have called ArriveAndWait(barrier, ...) (each
// barrier 0..7 once per RunRanks), or timeout_ms passed; false on timeout.
bool ArriveAndWait(int barrier, int count, int timeout_ms);

// Collects a body's failures as text.
class Checks {
 public:
  // Records `what` unless cond. Returns cond.
  bool Expect(bool cond, const std::string& what);
  // Records a mismatch unless got == want, naming `call` and ncclGetLastError(comm).
  bool ExpectCode(ncclResult_t got, ncclResult_t want, const std::string& call, ncclComm_t comm = nullptr);
  // Records a failure unless `text` contains `needle`.
  bool ExpectContains(const std::string& text, const std::string& needle, const std::string& what);
  // Appends another body's or helper's failures.
  void Add(const std::string& failures);
  bool ok() const { return text_.empty(); }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// "ncclInvalidArgument(4)", also for codes out of range.
std::string CodeName(ncclResult_t code);

// ncclGetLastError(comm) as a std::string.
std::string LastError(ncclComm_t comm);

}  // namespace nccl_test

#endif  // TESSERA_NCCL_TEST_RANKS_H_
