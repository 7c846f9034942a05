// Groups (tesseraGroupStart / tesseraGroupEnd) and point-to-point: nesting, 100 mixed
// operations in one group, rings of send/recv posted in either order, all-pairs
// exchanges, sends to oneself, several communicators in one group (across processes,
// and one thread driving every rank of tesseraCommInitAll), and argument errors inside a
// group. Each rank is a real process (rank_harness); results are checked against serial
// references (collective_calls, typed_values).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/collective_calls.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

RankOptions GroupOptions() {
  RankOptions opts;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = "30000";
  return opts;
}

std::string Code(tesseraResult_t r) { return CodeName(r) + ": " + LastError(nullptr); }

// The datatypes every reduction supports (no fp8).
std::vector<tesseraDataType_t> ReducibleTypes() {
  std::vector<tesseraDataType_t> types;
  for (tesseraDataType_t t : AllDataTypes()) {
    if (!IsFp8Type(t)) types.push_back(t);
  }
  return types;
}

// --- Nesting ------------------------------------------------------------------------------

// Inner Ends do nothing: the calls are recorded and run at the outermost End only.
TEST(Groups, NestedOnlyTheOutermostEndRuns) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    PreparedCall reduce({Collective::kAllReduce, tesseraFloat32, OpKind::kSum, false, 0, 1031, 0}, rank, nranks);
    PreparedCall gather({Collective::kAllGather, tesseraInt64, OpKind::kCopy, false, 0, 77, 1}, rank, nranks);
    PreparedCall bcast({Collective::kBroadcast, tesseraBfloat16, OpKind::kCopy, false, 2, 513, 2}, rank, nranks);
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "outer GroupStart");
    log.Expect(reduce.Issue(comm, &step) == tesseraSuccess, "recorded allreduce: " + step);
    log.Expect(tesseraGroupStart() == tesseraSuccess, "second GroupStart");
    log.Expect(gather.Issue(comm, &step) == tesseraSuccess, "recorded allgather");
    log.Expect(tesseraGroupStart() == tesseraSuccess, "third GroupStart");
    log.Expect(bcast.Issue(comm, &step) == tesseraSuccess, "recorded broadcast");
    tesseraResult_t r = tesseraGroupEnd();
    log.Expect(r == tesseraSuccess, "third (inner) GroupEnd: " + Code(r));
    r = tesseraGroupEnd();
    log.Expect(r == tesseraSuccess, "second (inner) GroupEnd: " + Code(r));
    log.Expect(reduce.Untouched() && gather.Untouched() && bcast.Untouched(),
               "an inner GroupEnd ran recorded operations (only the outermost End may)");
    r = tesseraGroupEnd();
    log.Expect(r == tesseraSuccess, "outermost GroupEnd: " + Code(r));
    log.Add(reduce.Check());
    log.Add(gather.Check());
    log.Add(bcast.Check());
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// As in NCCL: an End without a Start is a usage error, and leaves no group open.
TEST(Groups, EndWithoutStartIsInvalidUsage) {
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    tesseraResult_t r = tesseraGroupEnd();
    log.Expect(r == tesseraInvalidUsage, "GroupEnd without GroupStart: " + Code(r) + " (want tesseraInvalidUsage)");
    // Balanced again: a group works normally afterwards.
    PreparedCall call({Collective::kAllReduce, tesseraInt32, OpKind::kMax, false, 0, 100, 0}, rank, 2);
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    log.Expect(call.Issue(comm, &step) == tesseraSuccess, "recorded allreduce");
    r = tesseraGroupEnd();
    log.Expect(r == tesseraSuccess, "GroupEnd: " + Code(r));
    log.Add(call.Check());
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// --- 100 mixed operations -------------------------------------------------------------

class HundredOperations : public testing::TestWithParam<int> {};

// 100 operations of every kind (all collectives and send/recv rings; every datatype and
// operator; in place or not; moving roots; several counts) recorded in one group on one
// communicator, run by one GroupEnd, every result checked.
TEST_P(HundredOperations, InOneGroup) {
  const int nranks = GetParam();
  auto results = RunRanks(nranks, [nranks](int rank, tesseraComm_t comm) {
    FailureLog log;
    const std::vector<Collective> kinds = AllCollectives();
    const std::vector<tesseraDataType_t> types = ReducibleTypes();
    const std::vector<OpKind> ops = AllReductionKinds();
    const size_t counts[] = {1, 7, 1031, 4099};
    std::vector<std::unique_ptr<PreparedCall>> calls;
    for (int k = 0; k < 100; ++k) {
      const Collective kind = kinds[k % kinds.size()];
      const std::vector<bool> placements = Placements(kind);
      CallSpec s{kind,
                 types[(k * 7) % types.size()],
                 Reduces(kind) ? ops[(k / 3) % ops.size()] : OpKind::kCopy,
                 placements[(k / 10) % placements.size()],
                 k % nranks,
                 counts[k % 4],
                 k};
      calls.push_back(std::make_unique<PreparedCall>(s, rank, nranks));
    }
    for (auto& call : calls) {
      tesseraResult_t r = call->CreateOp(comm);
      if (!log.Expect(r == tesseraSuccess, call->what() + ": create op: " + Code(r))) return log.str();
    }
    tesseraResult_t r = tesseraGroupStart();
    if (!log.Expect(r == tesseraSuccess, "GroupStart: " + Code(r))) return log.str();
    for (auto& call : calls) {
      std::string step;
      r = call->Issue(comm, &step);
      log.Expect(r == tesseraSuccess, call->what() + ": recording " + step + ": " + Code(r));
    }
    auto start = std::chrono::steady_clock::now();
    r = tesseraGroupEnd();
    const double seconds = SecondsSince(start);
    if (log.Expect(r == tesseraSuccess, "GroupEnd of 100 operations: " + Code(r))) {
      for (auto& call : calls) log.Add(call->Check());
    }
    for (auto& call : calls) {
      r = call->DestroyOp(comm);
      log.Expect(r == tesseraSuccess, call->what() + ": destroy op: " + Code(r));
    }
    if (rank == 0) printf("[ info ] GroupEnd of 100 operations on %d ranks: %.3f s\n", nranks, seconds);
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HundredOperations, testing::Values(1, 2, 3, 4, 7),
                         [](const testing::TestParamInfo<int>& info) {
                           return "r" + std::to_string(info.param);
                         });

// Many small groups in a row: nothing from one group leaks into the next.
TEST(Groups, TwoHundredSmallGroupsInARow) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    for (int g = 0; g < 200 && log.ok(); ++g) {
      PreparedCall reduce({Collective::kAllReduce, tesseraFloat64, OpKind::kSum, g % 2 == 0, 0, static_cast<size_t>(1 + g % 5), g},
                          rank, nranks);
      PreparedCall ring({Collective::kSendRecv, tesseraUint8, OpKind::kCopy, false, 0, static_cast<size_t>(3 + g % 4), g}, rank, nranks);
      std::string step;
      log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
      log.Expect(reduce.Issue(comm, &step) == tesseraSuccess, "record allreduce " + step);
      log.Expect(ring.Issue(comm, &step) == tesseraSuccess, "record ring " + step);
      tesseraResult_t r = tesseraGroupEnd();
      if (!log.Expect(r == tesseraSuccess, "group " + std::to_string(g) + ": GroupEnd: " + Code(r))) break;
      log.Add(reduce.Check());
      log.Add(ring.Check());
    }
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// --- Send/recv rings and exchanges --------------------------------------------------------

enum class RingOrder { kSendFirst, kRecvFirst, kByParity };

const char* RingOrderName(RingOrder o) {
  switch (o) {
    case RingOrder::kSendFirst: return "send-then-recv";
    case RingOrder::kRecvFirst: return "recv-then-send";
    case RingOrder::kByParity: return "by-parity";
  }
  return "?";
}

class SendRecvRing : public testing::TestWithParam<int> {};

// A ring in both directions (to next and previous, from previous and next), posted in
// one group in each order on every rank, with messages large enough (4 MiB) that no
// transport can buffer them whole: only progressing sends and receives together avoids
// a deadlock.
TEST_P(SendRecvRing, BothOrdersInAGroupNoDeadlock) {
  const int nranks = GetParam();
  auto results = RunRanks(nranks, [nranks](int rank, tesseraComm_t comm) {
    FailureLog log;
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    auto value = [](int from, int to, size_t i) { return static_cast<float>((from * 31 + to * 7 + i) % 1021); };
    for (size_t count : {size_t{1}, size_t{1031}, size_t{1} << 20}) {
      std::vector<float> to_next(count), to_prev(count);
      for (size_t i = 0; i < count; ++i) {
        to_next[i] = value(rank, next, i);
        to_prev[i] = value(rank, prev, i);
      }
      for (RingOrder order : {RingOrder::kSendFirst, RingOrder::kRecvFirst, RingOrder::kByParity}) {
        std::vector<float> from_prev(count, -1.0f), from_next(count, -1.0f);
        const bool send_first = order == RingOrder::kSendFirst || (order == RingOrder::kByParity && rank % 2 == 0);
        const std::string what = std::string(RingOrderName(order)) + " count " + std::to_string(count) +
                                 " on rank " + std::to_string(rank);
        tesseraResult_t r = tesseraGroupStart();
        auto sends = [&] {
          tesseraResult_t a = tesseraSend(to_next.data(), count, tesseraFloat32, next, comm, nullptr);
          tesseraResult_t b = tesseraSend(to_prev.data(), count, tesseraFloat32, prev, comm, nullptr);
          log.Expect(a == tesseraSuccess && b == tesseraSuccess, what + ": recording sends: " + Code(a));
        };
        auto recvs = [&] {
          tesseraResult_t a = tesseraRecv(from_prev.data(), count, tesseraFloat32, prev, comm, nullptr);
          tesseraResult_t b = tesseraRecv(from_next.data(), count, tesseraFloat32, next, comm, nullptr);
          log.Expect(a == tesseraSuccess && b == tesseraSuccess, what + ": recording receives: " + Code(a));
        };
        if (send_first) {
          sends();
          recvs();
        } else {
          recvs();
          sends();
        }
        r = tesseraGroupEnd();
        if (!log.Expect(r == tesseraSuccess, what + ": GroupEnd: " + Code(r))) return log.str();
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          if (from_prev[i] != value(prev, rank, i) || from_next[i] != value(next, rank, i)) ++wrong;
        }
        log.Expect(wrong == 0, what + ": " + std::to_string(wrong) + " elements wrong");
      }
    }
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// Every rank sends a different block to every other rank and receives from each, posted
// in a different order on every rank (rotated, reversed), in one group.
TEST_P(SendRecvRing, AllPairsExchangeInScrambledOrder) {
  const int nranks = GetParam();
  auto results = RunRanks(nranks, [nranks](int rank, tesseraComm_t comm) {
    FailureLog log;
    const size_t count = 65537;
    auto value = [](int from, int to, size_t i) { return static_cast<int64_t>(from * 1000003 + to * 1009 + i); };
    std::vector<std::vector<int64_t>> out(nranks), in(nranks);
    for (int q = 0; q < nranks; ++q) {
      out[q].resize(count);
      in[q].assign(count, -1);
      for (size_t i = 0; i < count; ++i) out[q][i] = value(rank, q, i);
    }
    // Receives first on odd ranks; peers in rotated order, reversed on ranks 1 mod 3.
    std::vector<int> peers;
    for (int k = 1; k < nranks; ++k) peers.push_back((rank + k) % nranks);
    if (rank % 3 == 1) std::reverse(peers.begin(), peers.end());
    tesseraResult_t r = tesseraGroupStart();
    for (int pass = 0; pass < 2; ++pass) {
      const bool sending = (pass == 0) == (rank % 2 == 0);
      for (int q : peers) {
        r = sending ? tesseraSend(out[q].data(), count, tesseraInt64, q, comm, nullptr)
                    : tesseraRecv(in[q].data(), count, tesseraInt64, q, comm, nullptr);
        log.Expect(r == tesseraSuccess, std::string(sending ? "send to " : "recv from ") + std::to_string(q) + ": " + Code(r));
      }
    }
    r = tesseraGroupEnd();
    if (!log.Expect(r == tesseraSuccess, "GroupEnd on rank " + std::to_string(rank) + ": " + Code(r))) return log.str();
    for (int q : peers) {
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += in[q][i] != value(q, rank, i);
      log.Expect(wrong == 0, "rank " + std::to_string(rank) + ": block from rank " + std::to_string(q) + ": " +
                                 std::to_string(wrong) + " elements wrong");
    }
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SendRecvRing, testing::Values(2, 3, 4, 7),
                         [](const testing::TestParamInfo<int>& info) {
                           return "r" + std::to_string(info.param);
                         });

// The smallest all-pairs exchange where ranks post their peers in different orders:
// 3 ranks, one element to each peer, one group; ranks 0 and 2 post sends and receives
// in the order (rank + 1, rank + 2), rank 1 posts them in the order (0, 2). Matching
// must be by peer, whatever the order of posting.
TEST(SendRecvOrder, PeersPostedInDifferentOrdersOnDifferentRanks) {
  const int nranks = 3;
  for (bool reverse_sends : {true, false}) {
    SCOPED_TRACE(reverse_sends ? "rank 1 posts its sends in the other order"
                               : "rank 1 posts its receives in the other order");
    auto results = RunRanks(nranks, [reverse_sends](int rank, tesseraComm_t comm) {
      FailureLog log;
      std::vector<int> send_order = {(rank + 1) % nranks, (rank + 2) % nranks};
      std::vector<int> recv_order = send_order;
      if (rank == 1) {
        if (reverse_sends) send_order = {0, 2};
        else recv_order = {0, 2};
      }
      int64_t out[nranks], in[nranks];
      for (int q = 0; q < nranks; ++q) {
        out[q] = 10 * rank + q;  // rank r sends 10 r + q to rank q
        in[q] = -1;
      }
      tesseraGroupStart();
      for (int q : send_order) {
        log.Expect(tesseraSend(&out[q], 1, tesseraInt64, q, comm, nullptr) == tesseraSuccess, "record send");
      }
      for (int q : recv_order) {
        log.Expect(tesseraRecv(&in[q], 1, tesseraInt64, q, comm, nullptr) == tesseraSuccess, "record recv");
      }
      tesseraResult_t r = tesseraGroupEnd();
      if (!log.Expect(r == tesseraSuccess, "GroupEnd on rank " + std::to_string(rank) + ": " + Code(r))) {
        return log.str();
      }
      for (int q = 0; q < nranks; ++q) {
        if (q == rank) continue;
        log.Expect(in[q] == 10 * q + rank, "rank " + std::to_string(rank) + " got " + std::to_string(in[q]) +
                                               " from rank " + std::to_string(q) + ", want " +
                                               std::to_string(10 * q + rank));
      }
      // Stay until every rank has its data, so that this test is about the order of
      // posting only (exits are SenderExitsAfterItsSendCompleted's).
      ArriveAndWait(0, nranks, Milliseconds(20000));
      return log.str();
    }, GroupOptions());
    EXPECT_EQ("", Failures(results));
  }
}

// A send that has completed (tesseraSend returned before the receiver posted its
// receive, the data fitting in the transport) is delivered even if its sender then
// destroys its communicator and exits: otherwise a program's last send could fail on the
// receiving side depending on timing.
TEST(SendRecvOrder, SenderExitsAfterItsSendCompleted) {
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    std::vector<int32_t> buf(4096);  // 16 KiB: within one shared-memory slot
    if (rank == 0) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<int32_t>(i * 3 + 1);
      tesseraResult_t r = tesseraSend(buf.data(), buf.size(), tesseraInt32, 1, comm, nullptr);
      log.Expect(r == tesseraSuccess, "send: " + Code(r));
      return log.str();  // the harness destroys the communicator and exits at once
    }
    // If the send completes without the receive (it fits in the transport), rank 0 has
    // exited by now; if tessera waits for the receive, rank 0 is still in tesseraSend.
    usleep(300 * 1000);
    printf("[ info ] the sender %s when the receive was posted\n",
           WaitForRanksDone({0}, Milliseconds(0)) ? "had finished" : "was still sending");
    tesseraResult_t r = tesseraRecv(buf.data(), buf.size(), tesseraInt32, 0, comm, nullptr);
    if (log.Expect(r == tesseraSuccess, "receive after the sender exited: " + Code(r))) {
      size_t wrong = 0;
      for (size_t i = 0; i < buf.size(); ++i) wrong += buf[i] != static_cast<int32_t>(i * 3 + 1);
      log.Expect(wrong == 0, std::to_string(wrong) + " elements wrong");
    }
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// --- Sending to oneself ---------------------------------------------------------------------

// Inside a group, as NCCL allows: sends to oneself are matched with receives from
// oneself in issue order, whichever is posted first.
TEST(SendToSelf, InAGroupMatchedInOrder) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    std::vector<int32_t> a(1031), b(1031), x(1031, -1), y(1031, -1);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<int32_t>(rank * 100000 + i);
      b[i] = static_cast<int32_t>(-rank * 100000 - static_cast<int>(i) - 1);
    }
    for (bool recv_first : {false, true}) {
      const std::string what = std::string(recv_first ? "recv-then-send" : "send-then-recv") + " to self on rank " +
                               std::to_string(rank);
      std::fill(x.begin(), x.end(), -1);
      std::fill(y.begin(), y.end(), -1);
      tesseraResult_t codes[5];
      codes[0] = tesseraGroupStart();
      if (recv_first) {
        codes[1] = tesseraRecv(x.data(), x.size(), tesseraInt32, rank, comm, nullptr);
        codes[2] = tesseraRecv(y.data(), y.size(), tesseraInt32, rank, comm, nullptr);
        codes[3] = tesseraSend(a.data(), a.size(), tesseraInt32, rank, comm, nullptr);
        codes[4] = tesseraSend(b.data(), b.size(), tesseraInt32, rank, comm, nullptr);
      } else {
        codes[1] = tesseraSend(a.data(), a.size(), tesseraInt32, rank, comm, nullptr);
        codes[2] = tesseraSend(b.data(), b.size(), tesseraInt32, rank, comm, nullptr);
        codes[3] = tesseraRecv(x.data(), x.size(), tesseraInt32, rank, comm, nullptr);
        codes[4] = tesseraRecv(y.data(), y.size(), tesseraInt32, rank, comm, nullptr);
      }
      for (tesseraResult_t c : codes) log.Expect(c == tesseraSuccess, what + ": recording: " + Code(c));
      tesseraResult_t r = tesseraGroupEnd();
      if (!log.Expect(r == tesseraSuccess, what + ": GroupEnd: " + Code(r))) continue;
      log.Expect(x == a, what + ": first receive did not get the first send");
      log.Expect(y == b, what + ": second receive did not get the second send");
    }
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

// Outside a group a send to oneself blocks until its data has moved, which no receive can
// do: it must not hang. Whatever tessera answers (an immediate usage error, or a timeout
// naming the operation) is printed; it must come within the timeout, with a message.
TEST(SendToSelf, UngroupedDoesNotHang) {
  constexpr int kTimeoutMs = 2000;
  RankOptions opts = GroupOptions();
  opts.env["TESSERA_TIMEOUT_MS"] = std::to_string(kTimeoutMs);
  opts.timeout = Milliseconds(30000);
  auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    float buf[16] = {0};
    auto start = std::chrono::steady_clock::now();
    tesseraResult_t r = tesseraSend(buf, 16, tesseraFloat32, rank, comm, nullptr);
    const double seconds = SecondsSince(start);
    const std::string msg = LastError(nullptr);
    printf("[ info ] rank %d: ungrouped send to self: %s after %.3f s: %s\n", rank, CodeName(r).c_str(), seconds,
           r == tesseraSuccess ? "" : msg.c_str());
    log.Expect(seconds < kTimeoutMs / 1000.0 + 2.0, "send to self took " + std::to_string(seconds) + " s");
    log.Expect(r != tesseraSuccess, "an ungrouped send to self with no receive reported success");
    log.Expect(r == tesseraSuccess || (!msg.empty() && msg != "(null)"), "no message for " + CodeName(r));
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// --- Several communicators in one group ---------------------------------------------------

// Two communicators over the same processes, both driven inside one group.
TEST(Groups, TwoCommunicatorsInOneGroup) {
  const int nranks = 3;
  RankOptions opts = GroupOptions();
  opts.unique_ids = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    tesseraComm_t a = nullptr, b = nullptr;
    std::string err = InitComm(ctx, &a, 0);
    if (err.empty()) err = InitComm(ctx, &b, 1);
    if (!err.empty()) {
      if (a != nullptr) tesseraCommDestroy(a);
      return err;
    }
    FailureLog log;
    const int rank = ctx.rank;
    PreparedCall on_a({Collective::kAllReduce, tesseraFloat32, OpKind::kSum, false, 0, 65537, 0}, rank, nranks);
    PreparedCall on_b({Collective::kAllGather, tesseraInt32, OpKind::kCopy, false, 0, 1031, 1}, rank, nranks);
    PreparedCall ring_b({Collective::kSendRecv, tesseraFloat64, OpKind::kCopy, false, 0, 4099, 2}, rank, nranks);
    PreparedCall second_a({Collective::kReduceScatter, tesseraUint8, OpKind::kMax, true, 0, 100, 3}, rank, nranks);
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    log.Expect(on_a.Issue(a, &step) == tesseraSuccess, "record on a");
    log.Expect(on_b.Issue(b, &step) == tesseraSuccess, "record on b");
    log.Expect(ring_b.Issue(b, &step) == tesseraSuccess, "record ring on b");
    log.Expect(second_a.Issue(a, &step) == tesseraSuccess, "record second on a");
    tesseraResult_t r = tesseraGroupEnd();
    if (log.Expect(r == tesseraSuccess, "GroupEnd: " + Code(r))) {
      log.Add(on_a.Check());
      log.Add(on_b.Check());
      log.Add(ring_b.Check());
      log.Add(second_a.Check());
    }
    log.Expect(tesseraCommDestroy(a) == tesseraSuccess, "destroy a");
    log.Expect(tesseraCommDestroy(b) == tesseraSuccess, "destroy b");
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

class InitAllGroup : public testing::TestWithParam<int> {};

// tesseraCommInitAll in one process, then one thread drives every rank inside one
// group: an allreduce on each communicator, then a group of mixed collectives and a
// send/recv ring on all of them.
TEST_P(InitAllGroup, OneThreadDrivesEveryRank) {
  const int ndev = GetParam();
  auto results = RunRanksRaw(1, [ndev](const RankContext&) {
    FailureLog log;
    std::vector<tesseraComm_t> comms(ndev, nullptr);
    tesseraResult_t r = tesseraCommInitAll(comms.data(), ndev, nullptr);
    if (!log.Expect(r == tesseraSuccess, "tesseraCommInitAll(" + std::to_string(ndev) + "): " + Code(r))) {
      return log.str();
    }
    for (int i = 0; i < ndev; ++i) {
      int count = -1, rank = -1;
      tesseraCommCount(comms[i], &count);
      tesseraCommUserRank(comms[i], &rank);
      log.Expect(count == ndev && rank == i, "comms[" + std::to_string(i) + "] is rank " + std::to_string(rank) +
                                                 " of " + std::to_string(count));
    }
    // One allreduce per communicator.
    std::vector<std::unique_ptr<PreparedCall>> calls;
    for (int i = 0; i < ndev; ++i) {
      calls.push_back(std::make_unique<PreparedCall>(
          CallSpec{Collective::kAllReduce, tesseraFloat32, OpKind::kSum, i % 2 == 1, 0, 100003, 0}, i, ndev));
    }
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    std::string step;
    for (int i = 0; i < ndev; ++i) log.Expect(calls[i]->Issue(comms[i], &step) == tesseraSuccess, "record allreduce");
    r = tesseraGroupEnd();
    if (log.Expect(r == tesseraSuccess, "GroupEnd (allreduce on every rank): " + Code(r))) {
      for (auto& c : calls) log.Add(c->Check());
    }
    // Mixed: on each communicator, in the same order, several collectives and a ring.
    calls.clear();
    const Collective kinds[] = {Collective::kBroadcast, Collective::kAllGather, Collective::kReduceScatter,
                                Collective::kSendRecv, Collective::kAlltoAll, Collective::kReduce};
    for (int i = 0; i < ndev; ++i) {
      int k = 0;
      for (Collective kind : kinds) {
        CallSpec s{kind, tesseraInt32, Reduces(kind) ? OpKind::kSum : OpKind::kCopy, false, k % ndev, 1031, k};
        calls.push_back(std::make_unique<PreparedCall>(s, i, ndev));
        ++k;
      }
    }
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    const size_t per_comm = sizeof(kinds) / sizeof(kinds[0]);
    for (size_t c = 0; c < calls.size(); ++c) {
      r = calls[c]->Issue(comms[c / per_comm], &step);
      log.Expect(r == tesseraSuccess, calls[c]->what() + ": record " + step + ": " + Code(r));
    }
    r = tesseraGroupEnd();
    if (log.Expect(r == tesseraSuccess, "GroupEnd (mixed on every rank): " + Code(r))) {
      for (auto& c : calls) log.Add(c->Check());
    }
    for (tesseraComm_t c : comms) log.Expect(tesseraCommDestroy(c) == tesseraSuccess, "destroy: " + LastError(nullptr));
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, InitAllGroup, testing::Values(1, 2, 4, 7),
                         [](const testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

// --- Errors in a group ----------------------------------------------------------------------

// A bad argument in a group: the call answers tesseraInvalidArgument and is not
// recorded (tessera.h, Groups); the valid operation recorded beside it runs correctly
// at GroupEnd, nothing hangs and the communicator works afterwards.
TEST(Groups, ArgumentErrorInsideAGroup) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    PreparedCall good({Collective::kAllReduce, tesseraFloat32, OpKind::kSum, false, 0, 1031, 0}, rank, nranks);
    float buf[4] = {0};
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    log.Expect(good.Issue(comm, &step) == tesseraSuccess, "record the valid allreduce");
    tesseraResult_t bad = tesseraBroadcast(buf, buf, 4, tesseraFloat32, -1, comm, nullptr);
    const std::string bad_msg = LastError(nullptr);
    tesseraResult_t end = tesseraGroupEnd();
    const std::string end_msg = LastError(nullptr);
    log.Expect(bad == tesseraInvalidArgument, "broadcast with root -1 in a group: call " + CodeName(bad) + " (" +
                                                  bad_msg + "), GroupEnd " + CodeName(end) + " (" + end_msg + ")");
    if (rank == 0) {
      printf("[ info ] bad call in a group: call %s, GroupEnd %s, the valid allreduce %s\n", CodeName(bad).c_str(),
             CodeName(end).c_str(), good.Untouched() ? "did not run" : "ran");
    }
    // The refused call was not recorded: the group holds the valid allreduce alone.
    if (log.Expect(end == tesseraSuccess, "GroupEnd after a refused call: " + CodeName(end) + " (" + end_msg + ")")) {
      log.Add(good.Check());
    }
    PreparedCall after({Collective::kAllReduce, tesseraInt64, OpKind::kSum, true, 0, 1031, 1}, rank, nranks);
    tesseraResult_t r = after.Issue(comm, &step);
    if (log.Expect(r == tesseraSuccess, "allreduce after the failed group: " + Code(r))) log.Add(after.Check());
    return log.str();
  }, GroupOptions());
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
