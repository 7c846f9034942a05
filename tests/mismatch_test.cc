// Mismatched calls (issue 15): when one rank's call differs from the others' at the same
// sequence number (another collective, count, datatype, operator or root), every rank
// fails promptly with an error that names both ranks and both calls, instead of hanging
// or silently corrupting data. With TESSERA_CHECK_CALLS=0 the same-sized mismatches
// (datatype, operator) "succeed", which shows that the check is what catches them.
//
// Four ranks; rank 1 makes the odd call, after one good allreduce (so the odd call is
// #2). Ranks that receive nothing from rank 1 learn of the failure from the failure
// notices of the rank that detected it. TESSERA_TIMEOUT_MS is 20 s and every rank must
// fail within kWithin, so a pass can never be a timeout. Over shm, tcp, ucx, and two
// emulated hosts (shm inside, tcp between: rank 1's host partner is rank 0). On shm the
// count case's 4 KiB goes on the host board and 8 KiB over links (recursive doubling):
// without the board's and the links' looks at each other's calls it hangs.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kRanks = 4;
// The rank that calls something else. In the broadcast from root 0 it is the root's
// successor, so that the root's send, too, waits on it (were it rank 2, rank 1 would
// take the root's whole message before it noticed, and the root would succeed).
constexpr int kOdd = 1;
constexpr double kWithin = 5.0;  // seconds; far below TESSERA_TIMEOUT_MS
constexpr size_t kCount = 1024;
// Rooted calls: a rank whose part of a small broadcast is done returns before anyone
// notices (its message waits in a buffer); a message larger than any transport's
// buffering keeps every rank in the call until the failure reaches it.
constexpr size_t kBigCount = size_t{8} << 20;  // float32: 32 MiB

enum class Kind { kAllReduce, kReduceScatter, kBroadcast };

struct Call {
  Kind kind = Kind::kAllReduce;
  size_t count = kCount;  // reduce-scatter: its recvcount
  tesseraDataType_t type = tesseraFloat32;
  tesseraRedOp_t op = tesseraSum;
  int root = 0;
  const char* described = "";  // as DescribeCall names it (seq #2)
};

struct MismatchCase {
  const char* name;
  Call normal, odd;
};

const MismatchCase kCases[] = {
    {"collective",
     {Kind::kAllReduce, kRanks * kCount, tesseraFloat32, tesseraSum, 0, "allreduce #2 (4096 x float32 = 16 KiB, sum)"},
     {Kind::kReduceScatter, kCount, tesseraFloat32, tesseraSum, 0, "reduce-scatter #2 (1024 x float32 = 4 KiB, sum)"}},
    {"count",
     {Kind::kAllReduce, kCount, tesseraFloat32, tesseraSum, 0, "allreduce #2 (1024 x float32 = 4 KiB, sum)"},
     {Kind::kAllReduce, 2 * kCount, tesseraFloat32, tesseraSum, 0, "allreduce #2 (2048 x float32 = 8 KiB, sum)"}},
    {"datatype",
     {Kind::kAllReduce, kCount, tesseraFloat32, tesseraSum, 0, "allreduce #2 (1024 x float32 = 4 KiB, sum)"},
     {Kind::kAllReduce, kCount, tesseraInt32, tesseraSum, 0, "allreduce #2 (1024 x int32 = 4 KiB, sum)"}},
    {"operator",
     {Kind::kAllReduce, kCount, tesseraFloat32, tesseraSum, 0, "allreduce #2 (1024 x float32 = 4 KiB, sum)"},
     {Kind::kAllReduce, kCount, tesseraFloat32, tesseraMax, 0, "allreduce #2 (1024 x float32 = 4 KiB, max)"}},
    {"root",
     {Kind::kBroadcast, kBigCount, tesseraFloat32, tesseraSum, 0, "broadcast #2 (8388608 x float32 = 32 MiB, root 0)"},
     {Kind::kBroadcast, kBigCount, tesseraFloat32, tesseraSum, 1, "broadcast #2 (8388608 x float32 = 32 MiB, root 1)"}},
};

enum class Wire { kShm, kTcp, kUcx, kHosts };

const char* WireName(Wire w) {
  switch (w) {
    case Wire::kShm:
      return "shm";
    case Wire::kTcp:
      return "tcp";
    case Wire::kUcx:
      return "ucx";
    case Wire::kHosts:
      return "hosts";
  }
  return "?";
}

RankOptions Options(Wire w, bool check) {
  RankOptions opts;
  opts.timeout = Milliseconds(40000);  // beyond the library's timeout: a hang shows as one
  opts.env["TESSERA_TIMEOUT_MS"] = "20000";
  opts.env["TESSERA_CHECK_CALLS"] = check ? "1" : "0";
  if (w == Wire::kShm) opts.env["TESSERA_TRANSPORT"] = "shm";
  if (w == Wire::kTcp) opts.env["TESSERA_TRANSPORT"] = "tcp";
  if (w == Wire::kUcx) opts.env["TESSERA_TRANSPORT"] = "ucx";
  if (w == Wire::kHosts) {
    opts.ranks_per_host = 2;
    opts.env["TESSERA_TRANSPORT"] = "shm,tcp";
  }
  return opts;
}

tesseraResult_t RunCall(const Call& c, tesseraComm_t comm) {
  // Every type here has 4-byte elements.
  std::vector<float> send(c.kind == Kind::kReduceScatter ? kRanks * c.count : c.count, 1.0f), recv(c.count);
  switch (c.kind) {
    case Kind::kAllReduce:
      return tesseraAllReduce(send.data(), recv.data(), c.count, c.type, c.op, comm, nullptr);
    case Kind::kReduceScatter:
      return tesseraReduceScatter(send.data(), recv.data(), c.count, c.type, c.op, comm, nullptr);
    case Kind::kBroadcast:
      return tesseraBroadcast(send.data(), recv.data(), c.count, c.type, c.root, comm, nullptr);
  }
  return tesseraInternalError;
}

struct Outcome {
  tesseraResult_t code = tesseraSuccess;
  std::string message;
  double seconds = 0;
  std::string Describe() const {
    return CodeName(code) + " after " + std::to_string(seconds) + " s: \"" + message + "\"";
  }
};

// One good allreduce (#1), then this rank's call (#2). The barrier keeps a rank that
// finishes #1 early from failing #2 while another still waits for #1's last message (it
// would then fail #1, with the failure of #2).
Outcome RunCase(const MismatchCase& mc, int rank, tesseraComm_t comm, RankChecks* c) {
  Outcome o;
  c->ExpectCode(RunCall(Call(), comm), tesseraSuccess, "allreduce #1");
  c->Expect(ArriveAndWait(1, kRanks, Milliseconds(20000)), "barrier after allreduce #1");
  const auto start = std::chrono::steady_clock::now();
  o.code = RunCall(rank == kOdd ? mc.odd : mc.normal, comm);
  o.seconds = SecondsSince(start);
  if (o.code != tesseraSuccess) o.message = LastError(comm);
  return o;
}

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Whether `text` says that some rank other than the odd one called `described`.
bool NamesNormalRank(const std::string& text, const std::string& described) {
  for (int r = 0; r < kRanks; ++r) {
    if (r != kOdd && Contains(text, "rank " + std::to_string(r) + " called " + described)) return true;
  }
  return false;
}

// UCX carries a digest of the call only: its error names the detecting rank's call
// and the other rank.
void CheckMessage(const MismatchCase& mc, Wire w, const Outcome& o, RankChecks* c) {
  const std::string& m = o.message;
  c->Expect(Contains(m, "mismatched calls: "), "no \"mismatched calls\": " + o.Describe());
  const std::string odd = "rank " + std::to_string(kOdd) + " called " + mc.odd.described;
  if (w != Wire::kUcx) {
    c->Expect(Contains(m, odd), "does not name " + odd + ": " + o.Describe());
    c->Expect(NamesNormalRank(m, mc.normal.described),
              std::string("does not name a rank that called ") + mc.normal.described + ": " + o.Describe());
    return;
  }
  const bool odd_detected = Contains(m, odd + " but rank ");
  const bool normal_detected =
      NamesNormalRank(m, mc.normal.described) && Contains(m, " but rank " + std::to_string(kOdd) + " sent a message");
  c->Expect(odd_detected || normal_detected, "does not name both ranks and one call: " + o.Describe());
}

// (transport, index in kCases)
using Param = std::tuple<Wire, size_t>;

class Mismatch : public testing::TestWithParam<Param> {
 protected:
  Wire wire() const { return std::get<0>(GetParam()); }
  const MismatchCase& mismatch() const { return kCases[std::get<1>(GetParam())]; }
};
class UncheckedMismatch : public Mismatch {};

TEST_P(Mismatch, EveryRankFailsNamingBothCalls) {
  const MismatchCase& mc = mismatch();
  const Wire w = wire();
  auto results = RunRanks(kRanks, [&mc, w](int rank, tesseraComm_t comm) {
    RankChecks c;
    const Outcome o = RunCase(mc, rank, comm, &c);
    printf("[ info ] %s over %s, rank %d: %s\n", mc.name, WireName(w), rank, o.Describe().c_str());
    c.Expect(o.code == tesseraInvalidUsage, "expected tesseraInvalidUsage(5), got " + o.Describe());
    c.Expect(o.seconds < kWithin, "took " + std::to_string(o.seconds) + " s, more than " + std::to_string(kWithin));
    CheckMessage(mc, w, o, &c);
    // Stay until every rank has its error: a rank that leaves early is a dead peer.
    ArriveAndWait(0, kRanks, Milliseconds(20000));
    return c.str();
  }, Options(w, /*check=*/true));
  EXPECT_EQ("", Failures(results));
}

// Same-sized mismatches without the check: every rank returns success (with wrong data),
// which is what the check exists to prevent.
TEST_P(UncheckedMismatch, Succeeds) {
  const MismatchCase& mc = mismatch();
  const Wire w = wire();
  auto results = RunRanks(kRanks, [&mc](int rank, tesseraComm_t comm) {
    RankChecks c;
    const Outcome o = RunCase(mc, rank, comm, &c);
    c.Expect(o.code == tesseraSuccess, "expected success without the check, got " + o.Describe());
    return c.str();
  }, Options(w, /*check=*/false));
  EXPECT_EQ("", Failures(results));
}

class EarlyFinisher : public testing::TestWithParam<Wire> {};

// A small broadcast where rank 1 names itself the root: rank 0 (the others' root) and
// rank 1 only send, their messages fit in the transport's buffers, and they are done
// before rank 2 finds the mismatch in rank 1's message. They fail their next call:
// from the failure notice, or on finding the other call's message still in the link.
// The barrier first: a rank still creating its communicator (the cost-model probe)
// when the failure is published would fail there instead.
TEST_P(EarlyFinisher, FailsItsNextCall) {
  const Wire w = GetParam();
  auto results = RunRanks(kRanks, [w](int rank, tesseraComm_t comm) {
    RankChecks c;
    c.Expect(ArriveAndWait(1, kRanks, Milliseconds(20000)), "barrier after creation");
    Call broadcast{Kind::kBroadcast, kCount, tesseraFloat32, tesseraSum, rank == kOdd ? 1 : 0, ""};
    Outcome o;
    const auto start = std::chrono::steady_clock::now();
    o.code = RunCall(broadcast, comm);
    if (o.code == tesseraSuccess) {
      c.Expect(rank == 0 || rank == 1, "only the two roots can be done before the mismatch is found");
      o.code = RunCall(Call(), comm);
    }
    o.seconds = SecondsSince(start);
    if (o.code != tesseraSuccess) o.message = LastError(comm);
    printf("[ info ] early finisher over %s, rank %d: %s\n", WireName(w), rank, o.Describe().c_str());
    c.Expect(o.code == tesseraInvalidUsage, "expected tesseraInvalidUsage(5), got " + o.Describe());
    c.Expect(Contains(o.message, "mismatched calls: ") &&
                 (Contains(o.message, "rank 1 called ") || Contains(o.message, "rank 1 sent ")),
             "no mismatch of rank 1's call named: " + o.Describe());
    ArriveAndWait(0, kRanks, Milliseconds(20000));
    return c.str();
  }, Options(w, /*check=*/true));
  EXPECT_EQ("", Failures(results));
}

// TESSERA_CHECK_CALLS is agreed at creation: a rank that sends zero stamps beside ranks
// that compare them would make them report mismatches that are not there.
TEST(CheckSetting, MustAgree) {
  RankOptions opts = Options(Wire::kShm, /*check=*/true);
  opts.env["TESSERA_TIMEOUT_MS"] = "2000";  // rank 0 waits up to this for its rendezvous service
  opts.env_for_rank = [](int rank) { return rank == kOdd ? EnvVars{{"TESSERA_CHECK_CALLS", "0"}} : EnvVars{}; };
  auto results = RunRanks(kRanks, [](int, tesseraComm_t) { return std::string("created a communicator"); }, opts);
  ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
  for (const RankResult& r : results) {
    printf("[ info ] %s\n", r.Describe().c_str());
    EXPECT_NE(r.message.find("TESSERA_CHECK_CALLS"), std::string::npos) << r.Describe();
  }
}

std::string WireParamName(const testing::TestParamInfo<Wire>& info) { return WireName(info.param); }

INSTANTIATE_TEST_SUITE_P(All, EarlyFinisher, testing::Values(Wire::kShm, Wire::kTcp, Wire::kUcx, Wire::kHosts),
                         WireParamName);

std::string CaseName(const testing::TestParamInfo<Param>& info) {
  return std::string(WireName(std::get<0>(info.param))) + "_" + kCases[std::get<1>(info.param)].name;
}

const auto kWires = testing::Values(Wire::kShm, Wire::kTcp, Wire::kUcx, Wire::kHosts);
INSTANTIATE_TEST_SUITE_P(All, Mismatch, testing::Combine(kWires, testing::Range(size_t{0}, std::size(kCases))),
                         CaseName);
// The datatype and operator cases: the same bytes move either way.
INSTANTIATE_TEST_SUITE_P(All, UncheckedMismatch, testing::Combine(kWires, testing::Values(size_t{2}, size_t{3})),
                         CaseName);

}  // namespace
}  // namespace tessera_test
