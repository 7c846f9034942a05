// The collective matrix: every collective x every datatype x every reduction operator
// (sum, prod, max, min, avg and a PreMulSum operator) x in-place / out-of-place x ranks
// {1, 2, 3, 4, 7}, each rank a real process (rank_harness), every result compared with
// a serial reference (typed_values).
//
// One test per (collective, nranks) runs the whole type x op x placement x count loop on
// one communicator: a communicator per call would spend the time on creation. The root
// of rooted collectives moves with every call, so every root is used. Inputs are small
// integers chosen so that every result is exact in every datatype (int8 included), and
// are periodic (kPeriod) so that references cost nothing for large counts; except:
//  - avg of floats, compared within a tolerance that admits sum-then-divide and
//    NCCL's scale-then-sum (see AverageTolerance);
//  - fp8: reductions must answer tesseraInvalidArgument "not supported"; data movement
//    may work (and must then be exact) or answer tesseraInvalidArgument with a message.
// Buffers a collective must not write (sendbuffs, non-root recvbuffs) are checked
// unchanged. The calls and their checks are collective_calls.h's.
//
// Suites are named after the collective (AllReduce, Reduce, ...; TcpAll and HostsAll run
// every collective over TCP and over two emulated hosts; AllReduceAlgos forces each
// allreduce algorithm) so that tests/BUILD can run them under separate targets with
// --gtest_filter.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/collective_calls.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

enum class Variant { kDefault, kTcp, kHosts };

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kDefault: return "shm";
    case Variant::kTcp: return "tcp";
    case Variant::kHosts: return "hosts";
  }
  return "?";
}

// Counts, not multiples of kPeriod: tiny (fewer elements than ranks), odd, and large
// enough to cross slot and chunk boundaries. The largest (2.4 MB of float64 per rank
// block) runs for a few datatypes only, to keep the time reasonable.
const size_t kCounts[] = {1, 7, 1031, 65537};
const size_t kBigCount = 300007;
const tesseraDataType_t kBigCountTypes[] = {tesseraInt8, tesseraBfloat16, tesseraFloat32, tesseraFloat64};

// Under SmallSweep (the sanitizer builds): every datatype, operator and placement
// still, at the tiny count; the slot-crossing count for the few datatypes of the
// largest, and not the largest: every kernel and path still runs, on fewer bytes, since
// the sanitized builds run each call 5-10x slower.
const bool kSmallMatrix = SmallSweep();

std::vector<std::pair<size_t, tesseraDataType_t>> MatrixSizes() {
  std::vector<std::pair<size_t, tesseraDataType_t>> sizes;
  if (kSmallMatrix) {
    for (tesseraDataType_t type : AllDataTypes()) sizes.push_back({7, type});
    for (tesseraDataType_t type : kBigCountTypes) sizes.push_back({65537, type});
    return sizes;
  }
  for (size_t count : kCounts) {
    for (tesseraDataType_t type : AllDataTypes()) sizes.push_back({count, type});
  }
  for (tesseraDataType_t type : kBigCountTypes) sizes.push_back({kBigCount, type});
  return sizes;
}

// What one call did: a failure ("" if none); fatal when the communicator cannot be used
// any more; a note for an accepted "not supported" answer, reported once per test.
struct Outcome {
  std::string failure;
  bool fatal = false;
  std::string note;
};

bool SaysNotSupported(const std::string& message) {
  return message.find("not supported") != std::string::npos;
}

// Runs one call and checks everything it must and must not have written.
Outcome RunCall(const CallSpec& s, int rank, int nranks, tesseraComm_t comm) {
  Outcome out;
  PreparedCall call(s, rank, nranks);
  tesseraResult_t r = call.CreateOp(comm);
  if (r != tesseraSuccess) {
    std::string msg = LastError(nullptr);
    if (IsFp8Type(s.type) && r == tesseraInvalidArgument && SaysNotSupported(msg)) {
      out.note = "tesseraRedOpCreatePreMulSum(" + TypeName(s.type) + "): " + msg;
    } else {
      out.failure = call.what() + ": tesseraRedOpCreatePreMulSum returned " + CodeName(r) + ": " + msg;
    }
    return out;
  }
  std::string step;
  r = call.Issue(comm, &step);
  const std::string message = r == tesseraSuccess ? "" : LastError(nullptr);
  tesseraResult_t d = call.DestroyOp(comm);
  if (d != tesseraSuccess) {
    out.failure = call.what() + ": tesseraRedOpDestroy returned " + CodeName(d) + ": " + LastError(nullptr);
  }

  // fp8: reductions must be refused; data movement may be, with a message.
  if (IsFp8Type(s.type) && Reduces(s.kind)) {
    if (r == tesseraInvalidArgument && SaysNotSupported(message)) {
      out.note = "fp8 reductions: " + message;
      return out;
    }
    out.failure = call.what() + ": an fp8 reduction must return tesseraInvalidArgument \"not supported\", got " +
                  CodeName(r) + (message.empty() ? "" : ": " + message);
    out.fatal = IsFatal(r);
    return out;
  }
  if (IsFp8Type(s.type) && r == tesseraInvalidArgument && !message.empty() && message != "(null)") {
    out.note = std::string(CollectiveName(s.kind)) + " of fp8: " + message;
    return out;
  }
  if (r != tesseraSuccess) {
    out.failure = call.what() + ": " + step + " returned " + CodeName(r) + ": " + message;
    out.fatal = IsFatal(r);
    return out;
  }
  if (out.failure.empty()) out.failure = call.Check();
  return out;
}

// The whole matrix of one collective on comm: counts x types x ops x placements.
std::string RunMatrix(Collective kind, int rank, tesseraComm_t comm) {
  int nranks = 0;
  if (tesseraCommCount(comm, &nranks) != tesseraSuccess) return "tesseraCommCount failed";
  FailureLog log;
  std::vector<std::string> notes;
  int call_index = 0;
  int calls = 0;
  // Every (count, type) of the matrix: kCounts x all types, then kBigCount x a few.
  for (const auto& size : MatrixSizes()) {
    for (OpKind op : OpsOf(kind)) {
      for (bool in_place : Placements(kind)) {
        CallSpec s{kind, size.second, op, in_place, call_index % nranks, size.first, call_index};
        ++call_index;
        Outcome o = RunCall(s, rank, nranks, comm);
        ++calls;
        log.Add(o.failure);
        if (o.fatal) return log.str() + "(stopped: the communicator is broken)";
        if (!o.note.empty()) {
          bool seen = false;
          for (const std::string& n : notes) seen = seen || n == o.note;
          if (!seen && notes.size() < 4) notes.push_back(o.note);
        }
      }
    }
  }
  if (rank == 0) {
    printf("[ info ] %s on %d ranks: %d calls\n", CollectiveName(kind), nranks, calls);
    for (const std::string& n : notes) printf("[ info ]   accepted: %s\n", n.c_str());
    fflush(stdout);
  }
  return log.str();
}

struct MatrixCase {
  Collective kind;
  int nranks;
  Variant variant;
  const char* algo = "auto";  // TESSERA_ALGO (allreduce)
  int ranks_per_host = 0;     // kHosts: 0 means two hosts
};

void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << CollectiveName(c.kind) << " on " << c.nranks << " ranks (" << VariantName(c.variant) << ", algo "
      << c.algo << ")";
}

std::string MatrixCaseName(const testing::TestParamInfo<MatrixCase>& info) {
  const MatrixCase& c = info.param;
  std::string name = std::string(CollectiveName(c.kind)) + "_" + VariantName(c.variant) + "_r" +
                     std::to_string(c.nranks);
  if (c.ranks_per_host > 0) name += "_per_host" + std::to_string(c.ranks_per_host);
  if (std::string(c.algo) != "auto") name += std::string("_") + c.algo;
  return name;
}

RankOptions MatrixOptions(const MatrixCase& c) {
  RankOptions opts;
  opts.timeout = Milliseconds(150000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = "30000";
  opts.env["TESSERA_ALGO"] = c.algo;
  // The expected fp8 refusals would log thousands of warnings; every failure's message
  // is in the test's output anyway. TESSERA_DEBUG set by the caller wins.
  if (getenv("TESSERA_DEBUG") == nullptr) opts.env["TESSERA_DEBUG"] = "NONE";
  if (c.variant == Variant::kTcp) {
    opts.env["TESSERA_TRANSPORT"] = "tcp";
    opts.env["TESSERA_TCP_CHUNK_BYTES"] = "4096";
    opts.env["TESSERA_TCP_STREAMS"] = "3";
  }
  if (c.variant == Variant::kHosts) {
    opts.ranks_per_host = c.ranks_per_host > 0 ? c.ranks_per_host : (c.nranks + 1) / 2;
    opts.env["TESSERA_SHM_SLOT_BYTES"] = "4096";
    opts.env["TESSERA_SHM_SLOTS"] = "2";
    opts.env["TESSERA_TCP_CHUNK_BYTES"] = "4096";
  }
  return opts;
}

class CollectiveMatrix : public testing::TestWithParam<MatrixCase> {};

TEST_P(CollectiveMatrix, EveryTypeOpAndPlacement) {
  const MatrixCase& c = GetParam();
  auto results = RunRanks(
      c.nranks,
      [&](int rank, tesseraComm_t comm) {
        std::string forced;
        if (std::string(c.algo) != "auto") {
          // The forced algorithm applies here: it is the one that runs.
          const char* name = tesseraAllReduceAlgorithm(comm, 65537, tesseraFloat32);
          if (name == nullptr || std::string(name) != c.algo) {
            forced = std::string("TESSERA_ALGO=") + c.algo + " but tesseraAllReduceAlgorithm answers " +
                     (name == nullptr ? "NULL" : name) + "\n";
          }
        }
        return forced + RunMatrix(c.kind, rank, comm);
      },
      MatrixOptions(c));
  EXPECT_EQ("", Failures(results));
}

std::vector<MatrixCase> RankCounts(Collective kind, Variant variant, std::vector<int> counts) {
  std::vector<MatrixCase> cases;
  for (int n : counts) cases.push_back({kind, n, variant});
  return cases;
}

// The one-host rank counts of the matrix; under SmallSweep 7 ranks are left out: 7
// sanitized processes on 2 cores take about the time of the other counts together.
std::vector<MatrixCase> OneHostRanks(Collective kind, std::vector<int> counts) {
  if (kSmallMatrix) counts.erase(std::remove(counts.begin(), counts.end(), 7), counts.end());
  return RankCounts(kind, Variant::kDefault, counts);
}

std::vector<MatrixCase> Ranks12347(Collective kind) { return OneHostRanks(kind, {1, 2, 3, 4, 7}); }

std::vector<MatrixCase> EveryCollective(Variant variant, int nranks) {
  std::vector<MatrixCase> cases;
  for (Collective kind : AllCollectives()) cases.push_back({kind, nranks, variant});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllReduce, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kAllReduce)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(Reduce, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kReduce)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(ReduceScatter, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kReduceScatter)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(Broadcast, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kBroadcast)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(Bcast, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kBcast)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(AllGather, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kAllGather)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(AlltoAll, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kAlltoAll)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(Gather, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kGather)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(Scatter, CollectiveMatrix,
                         testing::ValuesIn(Ranks12347(Collective::kScatter)), MatrixCaseName);
// Send/recv between distinct ranks; sending to oneself is group_test's.
INSTANTIATE_TEST_SUITE_P(SendRecv, CollectiveMatrix,
                         testing::ValuesIn(OneHostRanks(Collective::kSendRecv, {2, 3, 4, 7})),
                         MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(TcpAll, CollectiveMatrix,
                         testing::ValuesIn(EveryCollective(Variant::kTcp, 3)), MatrixCaseName);
INSTANTIATE_TEST_SUITE_P(HostsAll, CollectiveMatrix,
                         testing::ValuesIn(EveryCollective(Variant::kHosts, 4)), MatrixCaseName);

// The allreduce matrix through every algorithm forced (docs/algorithms.md), on emulated
// hosts so that the hierarchical and torus ones apply: 2 hosts x 2 ranks, 3 hosts x 2.
std::vector<MatrixCase> AllReduceAlgorithms() {
  std::vector<MatrixCase> cases;
  for (const char* algo : {"ring", "recursive_doubling", "rabenseifner", "torus", "hierarchical",
                           "hierarchical_leader", "hierarchical_doubling"}) {
    cases.push_back({Collective::kAllReduce, 4, Variant::kHosts, algo, 2});
  }
  for (const char* algo : {"torus", "hierarchical", "hierarchical_leader", "hierarchical_doubling"}) {
    cases.push_back({Collective::kAllReduce, 6, Variant::kHosts, algo, 2});
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(AllReduceAlgos, CollectiveMatrix, testing::ValuesIn(AllReduceAlgorithms()),
                         MatrixCaseName);

// --- count 0 ----------------------------------------------------------------------------

// count 0 is a valid no-op for every collective and datatype, with null buffers too.
TEST(CountZero, EveryCollectiveIsANoOp) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    for (tesseraDataType_t t : AllDataTypes()) {
      const std::string type = " " + TypeName(t) + " on rank " + std::to_string(rank);
      const bool fp8 = IsFp8Type(t);
      auto expect = [&](tesseraResult_t r, const std::string& call, bool reduction) {
        // fp8 reductions may be refused before the count is looked at.
        if (fp8 && reduction && r == tesseraInvalidArgument) return;
        log.Expect(r == tesseraSuccess, call + type + " count 0: " + CodeName(r) + ": " + LastError(nullptr));
      };
      expect(tesseraAllReduce(nullptr, nullptr, 0, t, tesseraSum, comm, nullptr), "allreduce", true);
      expect(tesseraReduce(nullptr, nullptr, 0, t, tesseraMax, 1, comm, nullptr), "reduce", true);
      expect(tesseraReduceScatter(nullptr, nullptr, 0, t, tesseraMin, comm, nullptr), "reducescatter", true);
      expect(tesseraBroadcast(nullptr, nullptr, 0, t, 2, comm, nullptr), "broadcast", false);
      expect(tesseraBcast(nullptr, 0, t, 0, comm, nullptr), "bcast", false);
      expect(tesseraAllGather(nullptr, nullptr, 0, t, comm, nullptr), "allgather", false);
      expect(tesseraAlltoAll(nullptr, nullptr, 0, t, comm, nullptr), "alltoall", false);
      expect(tesseraGather(nullptr, nullptr, 0, t, 1, comm, nullptr), "gather", false);
      expect(tesseraScatter(nullptr, nullptr, 0, t, 2, comm, nullptr), "scatter", false);
      const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
      tesseraResult_t g = tesseraGroupStart();
      tesseraResult_t s = tesseraSend(nullptr, 0, t, next, comm, nullptr);
      tesseraResult_t r = tesseraRecv(nullptr, 0, t, prev, comm, nullptr);
      tesseraResult_t e = tesseraGroupEnd();
      log.Expect(g == tesseraSuccess && s == tesseraSuccess && r == tesseraSuccess && e == tesseraSuccess,
                 "grouped send/recv" + type + " count 0: start " + CodeName(g) + " send " + CodeName(s) +
                     " recv " + CodeName(r) + " end " + CodeName(e) + ": " + LastError(nullptr));
    }
    // No rank exits while another may still set up a link to it: over UCX a rank whose
    // zero-byte sends completed at once left before its peer's endpoint reached it.
    log.Expect(ArriveAndWait(0, 3, Milliseconds(20000)), "the ranks never all finished");
    return log.str();
  });
  EXPECT_EQ("", Failures(results));
}

// --- Buffers that only the root uses ----------------------------------------------------

// The header says which buffers only the root uses (Broadcast's sendbuff, Reduce's and
// Gather's recvbuff, Scatter's sendbuff); as in NCCL, the other ranks may pass NULL.
TEST(RootOnlyBuffers, OtherRanksMayPassNull) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    const int root = 1;
    const bool is_root = rank == root;
    float mine[4], all[12], got[4];
    for (int i = 0; i < 4; ++i) mine[i] = static_cast<float>(10 * rank + i);
    for (int i = 0; i < 12; ++i) all[i] = static_cast<float>(100 + i);
    auto call = [&](tesseraResult_t r, const std::string& what) {
      return log.Expect(r == tesseraSuccess, what + " on rank " + std::to_string(rank) + ": " +
                                                 CodeName(r) + ": " + LastError(nullptr));
    };
    if (call(tesseraBroadcast(is_root ? mine : nullptr, got, 4, tesseraFloat32, root, comm, nullptr),
             "broadcast with NULL sendbuff off the root")) {
      for (int i = 0; i < 4; ++i) log.Expect(got[i] == 10 * root + i, "broadcast: wrong data");
    }
    float sum[4] = {0, 0, 0, 0};
    if (call(tesseraReduce(mine, is_root ? sum : nullptr, 4, tesseraFloat32, tesseraSum, root, comm, nullptr),
             "reduce with NULL recvbuff off the root") && is_root) {
      for (int i = 0; i < 4; ++i) log.Expect(sum[i] == 30 + 3 * i, "reduce: wrong sum");
    }
    float gathered[12];
    if (call(tesseraGather(mine, is_root ? gathered : nullptr, 4, tesseraFloat32, root, comm, nullptr),
             "gather with NULL recvbuff off the root") && is_root) {
      for (int i = 0; i < 12; ++i) log.Expect(gathered[i] == 10 * (i / 4) + i % 4, "gather: wrong data");
    }
    if (call(tesseraScatter(is_root ? all : nullptr, got, 4, tesseraFloat32, root, comm, nullptr),
             "scatter with NULL sendbuff off the root")) {
      for (int i = 0; i < 4; ++i) log.Expect(got[i] == 100 + 4 * rank + i, "scatter: wrong data");
    }
    return log.str();
  });
  EXPECT_EQ("", Failures(results));
}

// --- PreMulSum scalars --------------------------------------------------------------------

// tesseraScalarHostImmediate reads the scalar once, at creation; tesseraScalarDevice
// (host memory on this build) reads it when each collective starts.
TEST(PreMulSumScalar, ImmediateIsReadOnceDeviceAtEachCall) {
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    double scalar = 3.0;
    tesseraRedOp_t immediate, device;
    if (!log.Expect(tesseraRedOpCreatePreMulSum(&immediate, &scalar, tesseraFloat64,
                                                tesseraScalarHostImmediate, comm) == tesseraSuccess,
                    "create immediate: " + LastError(nullptr)) ||
        !log.Expect(tesseraRedOpCreatePreMulSum(&device, &scalar, tesseraFloat64, tesseraScalarDevice,
                                                comm) == tesseraSuccess,
                    "create device: " + LastError(nullptr))) {
      return log.str();
    }
    log.Expect(immediate != device, "two live operators share the value " + std::to_string(immediate));
    log.Expect(immediate >= tesseraNumOps && device >= tesseraNumOps, "created operators below tesseraNumOps");
    double x = rank + 1.0, y = 0;  // sum over ranks of x: 6
    for (double s : {3.0, 5.0}) {
      scalar = s;  // changed after creation
      tesseraResult_t r = tesseraAllReduce(&x, &y, 1, tesseraFloat64, immediate, comm, nullptr);
      log.Expect(r == tesseraSuccess && y == 18.0,
                 "immediate operator with scalar " + std::to_string(s) + " later: got " + std::to_string(y) +
                     " (" + CodeName(r) + "), want 18 = 3 * 6");
      r = tesseraAllReduce(&x, &y, 1, tesseraFloat64, device, comm, nullptr);
      log.Expect(r == tesseraSuccess && y == 6.0 * s,
                 "device operator with scalar " + std::to_string(s) + ": got " + std::to_string(y) + " (" +
                     CodeName(r) + "), want " + std::to_string(6.0 * s));
    }
    log.Expect(tesseraRedOpDestroy(immediate, comm) == tesseraSuccess, "destroy immediate: " + LastError(nullptr));
    log.Expect(tesseraRedOpDestroy(device, comm) == tesseraSuccess, "destroy device: " + LastError(nullptr));
    return log.str();
  });
  EXPECT_EQ("", Failures(results));
}

// Many operators alive at once, each with its own scalar, then destroyed and created
// again: no operator is confused with another, ids may be reused only after a destroy.
TEST(PreMulSumScalar, ManyOperatorsAliveAtOnce) {
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    for (int round = 0; round < 2; ++round) {
      std::vector<tesseraRedOp_t> ops(40);
      for (size_t k = 0; k < ops.size(); ++k) {
        int32_t scalar = static_cast<int32_t>(k) + 1;
        if (!log.Expect(tesseraRedOpCreatePreMulSum(&ops[k], &scalar, tesseraInt32, tesseraScalarHostImmediate,
                                                    comm) == tesseraSuccess,
                        "create #" + std::to_string(k) + ": " + LastError(nullptr))) {
          return log.str();
        }
      }
      for (size_t k = 0; k < ops.size(); ++k) {
        int32_t x = rank + 1, y = 0;  // sum over 2 ranks: 3
        tesseraResult_t r = tesseraAllReduce(&x, &y, 1, tesseraInt32, ops[k], comm, nullptr);
        log.Expect(r == tesseraSuccess && y == 3 * static_cast<int32_t>(k + 1),
                   "round " + std::to_string(round) + " op #" + std::to_string(k) + ": got " +
                       std::to_string(y) + " (" + CodeName(r) + ")");
      }
      for (tesseraRedOp_t op : ops) {
        log.Expect(tesseraRedOpDestroy(op, comm) == tesseraSuccess, "destroy: " + LastError(nullptr));
      }
    }
    return log.str();
  });
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
