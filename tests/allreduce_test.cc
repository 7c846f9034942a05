// Multi-process tests of tesseraAllReduce: every rank is a real process (rank_harness),
// results are compared exactly with a serial reference (integer-valued floats make the
// float32 sum exact whatever the order of additions).
//
// Parameterised over transport (shm = auto on one host; tcp = TESSERA_TRANSPORT=tcp;
// mixed = auto with ranks split over 2 emulated hosts) x ranks x count x in-place x
// multi-segment (small slots, chunks and 3 TCP streams, so that every path runs many
// pipelined segments) x algorithm: every combination on shm, a covering subset on the
// other transports and under the sanitizers (SmallCases). The suites are named Shm,
// Tcp, Mixed, and ShmBig, TcpBig, MixedBig for the 64 MiB cases; tests/BUILD runs each
// under its own target by --gtest_filter so that they run in parallel.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

enum class Transport { kShm, kTcp, kMixed };

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kShm: return "shm";
    case Transport::kTcp: return "tcp";
    case Transport::kMixed: return "mixed";
  }
  return "?";
}

void PrintTo(Transport t, std::ostream* os) { *os << TransportName(t); }

// Not divisible by any rank count here, nor by any slot or chunk size (prime).
constexpr size_t kOddCount = 100003;
// 16 Mi floats = 64 MiB per buffer.
constexpr size_t kBigCount = size_t{16} << 20;

// Settings for a transport; multi_segment shrinks every pipelining unit.
RankOptions OptionsFor(Transport t, int nranks, bool multi_segment, const char* algo = "auto") {
  RankOptions opts;
  opts.env["TESSERA_ALGO"] = algo;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(3000);
  opts.env["TESSERA_TIMEOUT_MS"] = "60000";
  if (t == Transport::kTcp) opts.env["TESSERA_TRANSPORT"] = "tcp";
  if (t == Transport::kMixed) opts.ranks_per_host = (nranks + 1) / 2;
  if (multi_segment) {
    opts.env["TESSERA_SHM_SLOT_BYTES"] = "4096";
    opts.env["TESSERA_SHM_SLOTS"] = "2";
    opts.env["TESSERA_SHM_BOARD_BYTES"] = "256";  // the board's rounds
    opts.env["TESSERA_TCP_CHUNK_BYTES"] = "4096";
    opts.env["TESSERA_TCP_STREAMS"] = "3";
  }
  return opts;
}

// Rank r's input: integers in [-15, 15], periodic in i with period 31.
float Input(size_t i, int rank) {
  return static_cast<float>(static_cast<int64_t>((i * 7 + static_cast<size_t>(rank) * 13) % 31) - 15);
}

// The serial sum over nranks ranks of Input(i, r), for i % 31.
std::vector<float> SumTable(int nranks) {
  std::vector<float> table(31, 0.0f);
  for (size_t j = 0; j < 31; ++j) {
    for (int r = 0; r < nranks; ++r) table[j] += Input(j, r);
  }
  return table;
}

void FillInput(std::vector<float>* buf, int rank) {
  float row[31];
  for (size_t j = 0; j < 31; ++j) row[j] = Input(j, rank);
  size_t j = 0;
  for (float& x : *buf) {
    x = row[j];
    if (++j == 31) j = 0;
  }
}

// Compares buf with a 31-periodic expectation; "" or the first mismatches.
std::string CompareWithTable(const float* buf, size_t count, const std::vector<float>& table,
                             const std::string& what) {
  size_t wrong = 0;
  std::string first;
  size_t j = 0;
  for (size_t i = 0; i < count; ++i) {
    if (buf[i] != table[j]) {
      if (wrong < 3) {
        first += " [" + std::to_string(i) + "]=" + std::to_string(buf[i]) + " want " +
                 std::to_string(table[j]);
      }
      ++wrong;
    }
    if (++j == 31) j = 0;
  }
  if (wrong == 0) return "";
  return what + ": " + std::to_string(wrong) + " of " + std::to_string(count) +
         " elements wrong:" + first;
}

// One float32 sum allreduce of `count` elements on comm, checked exactly.
std::string SumAndCheck(int rank, tesseraComm_t comm, size_t count, bool in_place) {
  int nranks = 0;
  if (tesseraCommCount(comm, &nranks) != tesseraSuccess) return "tesseraCommCount failed";
  std::vector<float> send(count);
  FillInput(&send, rank);
  std::vector<float> recv;
  float* out = send.data();
  if (!in_place) {
    recv.assign(count, std::nanf(""));
    out = recv.data();
  }
  std::string what = std::string(in_place ? "in-place" : "out-of-place") + " allreduce of " +
                     std::to_string(count) + " floats on rank " + std::to_string(rank) + " of " +
                     std::to_string(nranks);
  tesseraResult_t r =
      tesseraAllReduce(send.data(), out, count, tesseraFloat32, tesseraSum, comm, nullptr);
  if (r != tesseraSuccess) return what + " returned " + CodeName(r) + ": " + LastError(comm);
  std::string wrong = CompareWithTable(out, count, SumTable(nranks), what);
  if (!wrong.empty()) return wrong;
  if (!in_place) {
    std::vector<float> self_table(31);
    for (size_t j = 0; j < 31; ++j) self_table[j] = Input(j, rank);
    std::string touched = CompareWithTable(send.data(), count, self_table, what + " sendbuff");
    if (!touched.empty()) return "sendbuff modified: " + touched;
  }
  return "";
}

struct AllReduceCase {
  Transport transport;
  int nranks;
  size_t count;
  bool in_place;
  bool multi_segment;
  const char* algo = "auto";  // TESSERA_ALGO
};

std::string CaseName(const testing::TestParamInfo<AllReduceCase>& info) {
  const AllReduceCase& c = info.param;
  return std::string(TransportName(c.transport)) + "_r" + std::to_string(c.nranks) + "_c" +
         std::to_string(c.count) + (c.in_place ? "_inplace" : "_outofplace") +
         (c.multi_segment ? "_multiseg" : "") + "_" + c.algo;
}

// The cases of one transport: rank counts x counts x in-place x multi-segment x
// algorithm, and on shm the host board too. Every combination runs on shm (the fastest
// transport); elsewhere, and on shm under SmallSweep (the sanitizer builds), a covering
// subset runs: every (rank count, count) pair once, with the other three parameters
// turning through their 8 combinations, so that every rank count and every count meets
// both placements, both segmentings and both algorithms.
// Whether combination `turn` of `turns` runs for the r-th rank count and c-th count:
// all of them, or one per pair, turning with r + c.
bool Runs(bool every, size_t r, size_t c, int turn, int turns) {
  return every || turn == static_cast<int>((r + c) % turns);
}

std::vector<AllReduceCase> SmallCases(Transport t) {
  const bool every = t == Transport::kShm && TestTransport().empty() && !SmallSweep();
  const std::vector<int> rank_counts = {1, 2, 3, 4, 5, 8};
  const std::vector<size_t> counts = {0, 1, 2, 7, 13, 1031, 65537, kOddCount};
  const char* const algos[] = {"ring", "recursive_doubling"};
  std::vector<AllReduceCase> cases;
  for (size_t r = 0; r < rank_counts.size(); ++r) {
    for (size_t c = 0; c < counts.size(); ++c) {
      for (int turn = 0; turn < 8; ++turn) {
        if (!Runs(every, r, c, turn, 8)) continue;
        cases.push_back({t, rank_counts[r], counts[c], (turn & 1) != 0, (turn & 2) != 0, algos[turn >> 2]});
      }
    }
  }
  if (t == Transport::kShm) {
    // The host board (every rank on one host): many rounds of it, in small slots too.
    const std::vector<int> board_ranks = {2, 3, 8};
    const std::vector<size_t> board_counts = {0, 1, 13, 1031, kOddCount};
    for (size_t r = 0; r < board_ranks.size(); ++r) {
      for (size_t c = 0; c < board_counts.size(); ++c) {
        for (int turn = 0; turn < 4; ++turn) {
          if (!Runs(every, r, c, turn, 4)) continue;
          cases.push_back({t, board_ranks[r], board_counts[c], (turn & 1) != 0, (turn & 2) != 0, "board"});
        }
      }
    }
  }
  return cases;
}

std::vector<AllReduceCase> BigCases(Transport t, std::vector<int> rank_counts, bool multi) {
  std::vector<AllReduceCase> cases;
  for (int nranks : rank_counts) {
    for (bool in_place : {false, true}) cases.push_back({t, nranks, kBigCount, in_place, multi});
  }
  return cases;
}

void PrintTo(const AllReduceCase& c, std::ostream* os) {
  *os << TransportName(c.transport) << " nranks " << c.nranks << " count " << c.count
      << (c.in_place ? " in-place" : " out-of-place") << (c.multi_segment ? " multi-segment" : "")
      << " algo " << c.algo;
}

class AllReduceSum : public testing::TestWithParam<AllReduceCase> {};

TEST_P(AllReduceSum, MatchesSerialSum) {
  const AllReduceCase& c = GetParam();
  RankOptions opts = OptionsFor(c.transport, c.nranks, c.multi_segment, c.algo);
  auto results = RunRanks(
      c.nranks,
      [&](int rank, tesseraComm_t comm) { return SumAndCheck(rank, comm, c.count, c.in_place); },
      opts);
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Shm, AllReduceSum, testing::ValuesIn(SmallCases(Transport::kShm)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Tcp, AllReduceSum, testing::ValuesIn(SmallCases(Transport::kTcp)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Mixed, AllReduceSum, testing::ValuesIn(SmallCases(Transport::kMixed)),
                         CaseName);

std::vector<AllReduceCase> ShmBigCases() {
  auto cases = BigCases(Transport::kShm, {2, 4, 8}, false);
  auto multi = BigCases(Transport::kShm, {2, 4}, true);
  cases.insert(cases.end(), multi.begin(), multi.end());
  return cases;
}

std::vector<AllReduceCase> TcpBigCases() {
  auto cases = BigCases(Transport::kTcp, {2, 4}, false);
  auto multi = BigCases(Transport::kTcp, {2}, true);
  cases.insert(cases.end(), multi.begin(), multi.end());
  return cases;
}
INSTANTIATE_TEST_SUITE_P(ShmBig, AllReduceSum, testing::ValuesIn(ShmBigCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(TcpBig, AllReduceSum,
                         testing::ValuesIn(TcpBigCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(MixedBig, AllReduceSum,
                         testing::ValuesIn(BigCases(Transport::kMixed, {4}, false)), CaseName);

// --- Tests run once per transport ------------------------------------------------------

struct TransportCase {
  Transport transport;
  bool multi_segment;
};

std::string TransportCaseName(const testing::TestParamInfo<TransportCase>& info) {
  return std::string(TransportName(info.param.transport)) +
         (info.param.multi_segment ? "_multiseg" : "");
}

void PrintTo(const TransportCase& t, std::ostream* os) {
  *os << TransportName(t.transport) << (t.multi_segment ? " multi-segment" : "");
}

class AllReduceSequence : public testing::TestWithParam<TransportCase> {};

// Many allreduces of different sizes in a row on one communicator: leftover state from
// one call (a stale slot, an unread chunk, a counter) corrupts a later one.
TEST_P(AllReduceSequence, DifferentSizesInARow) {
  const TransportCase& t = GetParam();
  const std::vector<size_t> counts = {1031, 1, 0, 65537, 7, kOddCount, 2, 13, 262147, 1, 1031};
  for (int nranks : {3, 4}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    auto results = RunRanks(
        nranks,
        [&](int rank, tesseraComm_t comm) {
          for (size_t k = 0; k < counts.size(); ++k) {
            std::string err = SumAndCheck(rank, comm, counts[k], k % 2 == 0);
            if (!err.empty()) return "call #" + std::to_string(k) + ": " + err;
          }
          return std::string();
        },
        OptionsFor(t.transport, nranks, t.multi_segment));
    EXPECT_EQ("", Failures(results));
  }
}

// Two communicators over the same ranks, used alternately from one thread.
TEST_P(AllReduceSequence, TwoCommunicatorsAlternately) {
  const TransportCase& t = GetParam();
  const int nranks = 3;
  RankOptions opts = OptionsFor(t.transport, nranks, t.multi_segment);
  opts.unique_ids = 2;
  auto results = RunRanksRaw(
      nranks,
      [&](const RankContext& ctx) {
        tesseraComm_t a = nullptr, b = nullptr;
        std::string err = InitComm(ctx, &a, 0);
        if (!err.empty()) return "comm a: " + err;
        err = InitComm(ctx, &b, 1);
        if (!err.empty()) {
          tesseraCommDestroy(a);
          return "comm b: " + err;
        }
        const std::vector<size_t> counts = {1031, 65537, 7, kOddCount};
        for (size_t k = 0; k < counts.size() && err.empty(); ++k) {
          err = SumAndCheck(ctx.rank, k % 2 ? b : a, counts[k], false);
          if (err.empty()) err = SumAndCheck(ctx.rank, k % 2 ? a : b, counts[k] + 1, true);
          if (!err.empty()) err = "round " + std::to_string(k) + ": " + err;
        }
        if (tesseraCommDestroy(a) != tesseraSuccess) err += " destroy a failed";
        if (tesseraCommDestroy(b) != tesseraSuccess) err += " destroy b failed";
        return err;
      },
      opts);
  EXPECT_EQ("", Failures(results));
}

// Two communicators used at the same time from two threads of each process (allowed by
// the header's thread-safety contract).
TEST_P(AllReduceSequence, TwoCommunicatorsConcurrently) {
  const TransportCase& t = GetParam();
  const int nranks = 3;
  RankOptions opts = OptionsFor(t.transport, nranks, t.multi_segment);
  opts.unique_ids = 2;
  auto results = RunRanksRaw(
      nranks,
      [&](const RankContext& ctx) {
        tesseraComm_t comms[2] = {nullptr, nullptr};
        std::string errs[2];
        // Creation also concurrently: each id's rendezvous is independent.
        std::thread init1([&] { errs[1] = InitComm(ctx, &comms[1], 1); });
        errs[0] = InitComm(ctx, &comms[0], 0);
        init1.join();
        if (!errs[0].empty() || !errs[1].empty()) {
          for (tesseraComm_t c : comms) {
            if (c != nullptr) tesseraCommDestroy(c);
          }
          return "init: " + errs[0] + " / " + errs[1];
        }
        auto work = [&](int which) {
          const size_t counts[] = {kOddCount, 1031, 65537, 13};
          for (int k = 0; k < 4 && errs[which].empty(); ++k) {
            errs[which] = SumAndCheck(ctx.rank, comms[which], counts[k] + which, k % 2 == 0);
          }
        };
        std::thread second(work, 1);
        work(0);
        second.join();
        std::string err;
        for (int i = 0; i < 2; ++i) {
          if (!errs[i].empty()) err += "comm " + std::to_string(i) + ": " + errs[i] + "; ";
          if (tesseraCommDestroy(comms[i]) != tesseraSuccess) err += "destroy failed; ";
        }
        return err;
      },
      opts);
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Shm, AllReduceSequence,
                         testing::Values(TransportCase{Transport::kShm, false},
                                         TransportCase{Transport::kShm, true}),
                         TransportCaseName);
INSTANTIATE_TEST_SUITE_P(Tcp, AllReduceSequence,
                         testing::Values(TransportCase{Transport::kTcp, false},
                                         TransportCase{Transport::kTcp, true}),
                         TransportCaseName);
INSTANTIATE_TEST_SUITE_P(Mixed, AllReduceSequence,
                         testing::Values(TransportCase{Transport::kMixed, false},
                                         TransportCase{Transport::kMixed, true}),
                         TransportCaseName);

// --- Hosts interleaved: rank r on host r % 2 (no two neighbours share a host) ----------

class AllReduceInterleavedHosts : public testing::TestWithParam<int> {};

TEST_P(AllReduceInterleavedHosts, MatchesSerialSum) {
  const int nranks = GetParam();
  RankOptions opts = OptionsFor(Transport::kShm, nranks, false);
  opts.env_for_rank = [](int rank) {
    return EnvVars{{"TESSERA_HOST_ID", "host" + std::to_string(rank % 2)}};
  };
  auto results = RunRanks(
      nranks,
      [&](int rank, tesseraComm_t comm) {
        std::string err = SumAndCheck(rank, comm, 1031, false);
        if (err.empty()) err = SumAndCheck(rank, comm, kOddCount, true);
        return err;
      },
      opts);
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Mixed, AllReduceInterleavedHosts, testing::Values(3, 4, 5, 8),
                         [](const testing::TestParamInfo<int>& info) {
                           return "r" + std::to_string(info.param);
                         });

// --- Other float32 operators and other data types --------------------------------------
// tessera may support only some of them. A supported one must be exact; an unsupported
// one must return tesseraInvalidArgument with a message, on every rank alike.

// Rank r's input for product: {-1, 0, 1, 2}, so products over 8 ranks stay exact.
float ProdInput(size_t i, int rank) {
  return static_cast<float>(static_cast<int64_t>((i * 5 + static_cast<size_t>(rank) * 3) % 4) - 1);
}

// One float32 allreduce with `op`; "" when correct or cleanly unsupported (noted in *note).
std::string CheckFloatOp(int rank, tesseraComm_t comm, tesseraRedOp_t op, const char* op_name,
                         size_t count, std::string* note) {
  int nranks = 0;
  tesseraCommCount(comm, &nranks);
  auto input = [&](size_t i, int r) { return op == tesseraProd ? ProdInput(i, r) : Input(i, r); };
  std::vector<float> send(count), recv(count, std::nanf(""));
  for (size_t i = 0; i < count; ++i) send[i] = input(i, rank);
  tesseraResult_t res =
      tesseraAllReduce(send.data(), recv.data(), count, tesseraFloat32, op, comm, nullptr);
  std::string what = std::string("float32 ") + op_name + " allreduce of " +
                     std::to_string(count);
  if (res != tesseraSuccess) {
    std::string msg = LastError(nullptr);
    if (res != tesseraInvalidArgument) {
      return what + ": unsupported must be tesseraInvalidArgument, got " + CodeName(res) + ": " + msg;
    }
    if (msg.empty() || msg == "(null)") return what + ": InvalidArgument without a message";
    *note = std::string(op_name) + " unsupported (" + msg + ")";
    return "";
  }
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    float want = input(i, 0);
    for (int r = 1; r < nranks; ++r) {
      float x = input(i, r);
      switch (op) {
        case tesseraProd: want *= x; break;
        case tesseraMax: want = x > want ? x : want; break;
        case tesseraMin: want = x < want ? x : want; break;
        default: want += x; break;
      }
    }
    bool equal = recv[i] == want;
    if (op == tesseraAvg) {
      want /= static_cast<float>(nranks);
      // Sum then divide, or scale then sum: allow a few ulps.
      equal = std::fabs(recv[i] - want) <= 4e-6f * std::fmax(1.0f, std::fabs(want));
    }
    if (!equal) {
      if (wrong < 3) first += " [" + std::to_string(i) + "]=" + std::to_string(recv[i]) +
                              " want " + std::to_string(want);
      ++wrong;
    }
  }
  if (wrong != 0) return what + ": " + std::to_string(wrong) + " wrong:" + first;
  *note = std::string(op_name) + " supported";
  return "";
}

// IEEE half bits of a float that is a small integer (exact in half).
uint16_t HalfBits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if ((bits & 0x7fffffff) == 0) return sign;
  int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ff));
}

uint16_t Bfloat16Bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// Sum allreduce of one data type; values small integers so that every type holds them.
std::string CheckTypeSum(int rank, tesseraComm_t comm, tesseraDataType_t type,
                         const char* type_name, size_t count, std::string* note) {
  int nranks = 0;
  tesseraCommCount(comm, &nranks);
  const bool is_unsigned = type == tesseraUint8 || type == tesseraUint32 || type == tesseraUint64;
  auto value = [&](size_t i, int r) {
    float v = Input(i, r);
    return is_unsigned ? v + 15.0f : v;  // [0, 30] for unsigned types
  };
  size_t elem = 0;
  switch (type) {
    case tesseraInt8: case tesseraUint8: elem = 1; break;
    case tesseraFloat16: case tesseraBfloat16: elem = 2; break;
    case tesseraInt32: case tesseraUint32: case tesseraFloat32: elem = 4; break;
    default: elem = 8; break;
  }
  // Encodes a small integer value as `type`, into dst.
  auto encode = [&](float v, unsigned char* dst) {
    switch (type) {
      case tesseraInt8: { int8_t x = static_cast<int8_t>(v); memcpy(dst, &x, 1); break; }
      case tesseraUint8: { uint8_t x = static_cast<uint8_t>(v); memcpy(dst, &x, 1); break; }
      case tesseraInt32: { int32_t x = static_cast<int32_t>(v); memcpy(dst, &x, 4); break; }
      case tesseraUint32: { uint32_t x = static_cast<uint32_t>(v); memcpy(dst, &x, 4); break; }
      case tesseraInt64: { int64_t x = static_cast<int64_t>(v); memcpy(dst, &x, 8); break; }
      case tesseraUint64: { uint64_t x = static_cast<uint64_t>(v); memcpy(dst, &x, 8); break; }
      case tesseraFloat16: { uint16_t x = HalfBits(v); memcpy(dst, &x, 2); break; }
      case tesseraBfloat16: { uint16_t x = Bfloat16Bits(v); memcpy(dst, &x, 2); break; }
      case tesseraFloat32: memcpy(dst, &v, 4); break;
      default: { double x = v; memcpy(dst, &x, 8); break; }
    }
  };
  std::vector<unsigned char> send(count * elem), recv(count * elem, 0xEE), want(count * elem);
  for (size_t i = 0; i < count; ++i) {
    encode(value(i, rank), &send[i * elem]);
    float sum = 0;
    for (int r = 0; r < nranks; ++r) sum += value(i, r);
    encode(sum, &want[i * elem]);
  }
  tesseraResult_t res =
      tesseraAllReduce(send.data(), recv.data(), count, type, tesseraSum, comm, nullptr);
  std::string what = std::string(type_name) + " sum allreduce of " + std::to_string(count);
  if (res != tesseraSuccess) {
    std::string msg = LastError(nullptr);
    if (res != tesseraInvalidArgument) {
      return what + ": unsupported must be tesseraInvalidArgument, got " + CodeName(res) + ": " + msg;
    }
    if (msg.empty() || msg == "(null)") return what + ": InvalidArgument without a message";
    *note = std::string(type_name) + " unsupported (" + msg + ")";
    return "";
  }
  for (size_t i = 0; i < count; ++i) {
    if (memcmp(&recv[i * elem], &want[i * elem], elem) != 0) {
      return what + ": element " + std::to_string(i) + " wrong";
    }
  }
  *note = std::string(type_name) + " supported";
  return "";
}

class AllReduceOtherOps : public testing::TestWithParam<Transport> {};

TEST_P(AllReduceOtherOps, Float32OpsAndDataTypes) {
  const int nranks = 3;
  auto results = RunRanks(
      nranks,
      [&](int rank, tesseraComm_t comm) {
        std::string err, notes;
        const std::pair<tesseraRedOp_t, const char*> ops[] = {
            {tesseraProd, "prod"}, {tesseraMax, "max"}, {tesseraMin, "min"}, {tesseraAvg, "avg"}};
        for (const auto& op : ops) {
          for (size_t count : {size_t{1031}, kOddCount}) {
            std::string note;
            std::string e = CheckFloatOp(rank, comm, op.first, op.second, count, &note);
            if (!e.empty()) err += e + "; ";
            if (count == kOddCount) notes += note + "; ";
          }
        }
        const std::pair<tesseraDataType_t, const char*> types[] = {
            {tesseraInt8, "int8"},       {tesseraUint8, "uint8"},     {tesseraInt32, "int32"},
            {tesseraUint32, "uint32"},   {tesseraInt64, "int64"},     {tesseraUint64, "uint64"},
            {tesseraFloat16, "float16"}, {tesseraFloat64, "float64"}, {tesseraBfloat16, "bfloat16"}};
        for (const auto& type : types) {
          for (size_t count : {size_t{1031}, kOddCount}) {
            std::string note;
            std::string e = CheckTypeSum(rank, comm, type.first, type.second, count, &note);
            if (!e.empty()) err += e + "; ";
            if (count == kOddCount) notes += note + "; ";
          }
        }
        if (rank == 0) printf("[ info ] %s: %s\n", "operators and types", notes.c_str());
        // The communicator still works after any unsupported call.
        if (err.empty()) err = SumAndCheck(rank, comm, 1031, true);
        return err;
      },
      OptionsFor(GetParam(), nranks, false));
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Shm, AllReduceOtherOps, testing::Values(Transport::kShm),
                         [](const testing::TestParamInfo<Transport>&) { return "shm"; });
INSTANTIATE_TEST_SUITE_P(Tcp, AllReduceOtherOps, testing::Values(Transport::kTcp),
                         [](const testing::TestParamInfo<Transport>&) { return "tcp"; });

}  // namespace
}  // namespace tessera_test
