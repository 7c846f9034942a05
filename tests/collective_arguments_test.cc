// Bad arguments to the collectives, PreMulSum operators and send/recv: each answered at
// once with the right code (tesseraInvalidArgument), a message naming the argument, and
// a communicator that still works afterwards. Every rank makes the same bad calls, as a
// program with the bug would; none of them may wait for a peer.
#include <chrono>
#include <climits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

RankOptions ArgumentOptions() {
  RankOptions opts;
  opts.timeout = Milliseconds(60000);
  opts.failure_grace = Milliseconds(5000);
  // Short: a bad call that wrongly waits for peers shows as a timeout, not a hang.
  opts.env["TESSERA_TIMEOUT_MS"] = "5000";
  return opts;
}

// Expects `got == want`, the thread's last error to name `arg`, and (for a live comm)
// the comm's last error too.
void ExpectRejected(RankChecks* c, tesseraResult_t got, tesseraResult_t want, tesseraComm_t comm,
                    const std::string& arg, const std::string& call) {
  if (!c->ExpectCode(got, want, call)) return;
  c->ExpectContains(LastError(nullptr), arg, call + ": tesseraGetLastError(NULL)");
  if (comm != nullptr) c->ExpectContains(LastError(comm), arg, call + ": tesseraGetLastError(comm)");
}

// A valid float32 sum allreduce still works on comm, and no error is pending.
void ExpectHealthy(RankChecks* c, tesseraComm_t comm, int nranks, const std::string& after) {
  tesseraResult_t async = tesseraInternalError;
  c->ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "tesseraCommGetAsyncError");
  c->ExpectCode(async, tesseraSuccess, "async error after " + after);
  float x[3] = {1, 2, 3};
  if (c->ExpectCode(tesseraAllReduce(x, x, 3, tesseraFloat32, tesseraSum, comm, nullptr), tesseraSuccess,
                    "allreduce after " + after)) {
    c->Expect(x[0] == nranks && x[1] == 2 * nranks && x[2] == 3 * nranks, "wrong sum after " + after);
  }
}

TEST(CollectiveArguments, RootOutOfRange) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float send[12] = {0}, recv[12] = {0};
    auto start = std::chrono::steady_clock::now();
    for (int root : {-1, nranks, INT_MAX, INT_MIN}) {
      const std::string r = " root " + std::to_string(root);
      ExpectRejected(&c, tesseraBroadcast(send, recv, 4, tesseraFloat32, root, comm, nullptr),
                     tesseraInvalidArgument, comm, "root", "tesseraBroadcast" + r);
      ExpectRejected(&c, tesseraBcast(recv, 4, tesseraFloat32, root, comm, nullptr),
                     tesseraInvalidArgument, comm, "root", "tesseraBcast" + r);
      ExpectRejected(&c, tesseraReduce(send, recv, 4, tesseraFloat32, tesseraSum, root, comm, nullptr),
                     tesseraInvalidArgument, comm, "root", "tesseraReduce" + r);
      ExpectRejected(&c, tesseraGather(send, recv, 4, tesseraFloat32, root, comm, nullptr),
                     tesseraInvalidArgument, comm, "root", "tesseraGather" + r);
      ExpectRejected(&c, tesseraScatter(send, recv, 4, tesseraFloat32, root, comm, nullptr),
                     tesseraInvalidArgument, comm, "root", "tesseraScatter" + r);
    }
    double seconds = SecondsSince(start);
    c.Expect(seconds < 1.0, "rejecting bad roots took " + std::to_string(seconds) + " s");
    ExpectHealthy(&c, comm, nranks, "bad roots");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// Every function that takes a communicator refuses NULL, naming it.
TEST(CollectiveArguments, NullComm) {
  auto results = RunRanksRaw(1, [](const RankContext&) {
    RankChecks c;
    float b[4] = {0}, d[4] = {0};
    const tesseraResult_t kInv = tesseraInvalidArgument;
    ExpectRejected(&c, tesseraAllReduce(b, d, 4, tesseraFloat32, tesseraSum, nullptr, nullptr), kInv, nullptr, "comm", "tesseraAllReduce");
    ExpectRejected(&c, tesseraBroadcast(b, d, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraBroadcast");
    ExpectRejected(&c, tesseraBcast(b, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraBcast");
    ExpectRejected(&c, tesseraReduce(b, d, 4, tesseraFloat32, tesseraSum, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraReduce");
    ExpectRejected(&c, tesseraAllGather(b, d, 4, tesseraFloat32, nullptr, nullptr), kInv, nullptr, "comm", "tesseraAllGather");
    ExpectRejected(&c, tesseraReduceScatter(b, d, 4, tesseraFloat32, tesseraSum, nullptr, nullptr), kInv, nullptr, "comm", "tesseraReduceScatter");
    ExpectRejected(&c, tesseraAlltoAll(b, d, 4, tesseraFloat32, nullptr, nullptr), kInv, nullptr, "comm", "tesseraAlltoAll");
    ExpectRejected(&c, tesseraGather(b, d, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraGather");
    ExpectRejected(&c, tesseraScatter(b, d, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraScatter");
    ExpectRejected(&c, tesseraSend(b, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraSend");
    ExpectRejected(&c, tesseraRecv(d, 4, tesseraFloat32, 0, nullptr, nullptr), kInv, nullptr, "comm", "tesseraRecv");
    float scalar = 2;
    tesseraRedOp_t op;
    ExpectRejected(&c, tesseraRedOpCreatePreMulSum(&op, &scalar, tesseraFloat32, tesseraScalarHostImmediate, nullptr),
                   kInv, nullptr, "comm", "tesseraRedOpCreatePreMulSum");
    ExpectRejected(&c, tesseraRedOpDestroy(static_cast<tesseraRedOp_t>(tesseraNumOps), nullptr), kInv, nullptr,
                   "comm", "tesseraRedOpDestroy");
    tesseraComm_t newcomm = nullptr;
    ExpectRejected(&c, tesseraCommSplit(nullptr, 0, 0, &newcomm, nullptr), kInv, nullptr, "comm", "tesseraCommSplit");
    ExpectRejected(&c, tesseraCommFinalize(nullptr), kInv, nullptr, "comm", "tesseraCommFinalize");
    // Inside a group too, the call itself refuses it (nothing is recorded).
    tesseraResult_t start = tesseraGroupStart();
    tesseraResult_t call = tesseraAllReduce(b, d, 4, tesseraFloat32, tesseraSum, nullptr, nullptr);
    tesseraResult_t end = tesseraGroupEnd();
    c.Expect(start == tesseraSuccess, "tesseraGroupStart: " + CodeName(start));
    c.Expect(call == kInv, "tesseraAllReduce(NULL comm) in a group: call " + CodeName(call) + ", group end " +
                               CodeName(end) + " (want tesseraInvalidArgument from the call): " + LastError(nullptr));
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// Operator values that name no operator: above the built-ins and never created, and
// out of the enum's range.
TEST(CollectiveArguments, UnknownOp) {
  const int nranks = 2;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float send[4] = {1, 2, 3, 4}, recv[4] = {0};
    for (int value : {99, static_cast<int>(tesseraNumOps), -1, static_cast<int>(tesseraMaxRedOp)}) {
      const auto op = static_cast<tesseraRedOp_t>(value);
      const std::string v = " op " + std::to_string(value);
      ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, op, comm, nullptr),
                     tesseraInvalidArgument, comm, "op", "tesseraAllReduce" + v);
      ExpectRejected(&c, tesseraReduce(send, recv, 4, tesseraFloat32, op, 0, comm, nullptr),
                     tesseraInvalidArgument, comm, "op", "tesseraReduce" + v);
      ExpectRejected(&c, tesseraReduceScatter(send, recv, 2, tesseraFloat32, op, comm, nullptr),
                     tesseraInvalidArgument, comm, "op", "tesseraReduceScatter" + v);
      ExpectRejected(&c, tesseraRedOpDestroy(op, comm), tesseraInvalidArgument, comm, "op",
                     "tesseraRedOpDestroy" + v);
    }
    // The built-in operators cannot be destroyed.
    for (tesseraRedOp_t op : {tesseraSum, tesseraProd, tesseraMax, tesseraMin, tesseraAvg}) {
      ExpectRejected(&c, tesseraRedOpDestroy(op, comm), tesseraInvalidArgument, comm, "op",
                     "tesseraRedOpDestroy(built-in " + std::to_string(op) + ")");
    }
    ExpectHealthy(&c, comm, nranks, "unknown ops");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// Create, destroy, use: the destroyed operator is unknown again.
TEST(CollectiveArguments, DestroyedPreMulSumOp) {
  const int nranks = 2;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float scalar = 2, send[4] = {1, 2, 3, 4}, recv[4] = {0};
    tesseraRedOp_t op;
    if (!c.ExpectCode(tesseraRedOpCreatePreMulSum(&op, &scalar, tesseraFloat32, tesseraScalarHostImmediate, comm),
                      tesseraSuccess, "create")) {
      return c.str();
    }
    if (c.ExpectCode(tesseraAllReduce(send, recv, 4, tesseraFloat32, op, comm, nullptr), tesseraSuccess,
                     "allreduce with the live operator")) {
      c.Expect(recv[0] == 2 * nranks * 1 && recv[3] == 2 * nranks * 4, "wrong PreMulSum result");
    }
    c.ExpectCode(tesseraRedOpDestroy(op, comm), tesseraSuccess, "destroy");
    ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, op, comm, nullptr),
                   tesseraInvalidArgument, comm, "op", "tesseraAllReduce with a destroyed operator");
    ExpectRejected(&c, tesseraReduce(send, recv, 4, tesseraFloat32, op, 0, comm, nullptr),
                   tesseraInvalidArgument, comm, "op", "tesseraReduce with a destroyed operator");
    ExpectRejected(&c, tesseraReduceScatter(send, recv, 2, tesseraFloat32, op, comm, nullptr),
                   tesseraInvalidArgument, comm, "op", "tesseraReduceScatter with a destroyed operator");
    ExpectRejected(&c, tesseraRedOpDestroy(op, comm), tesseraInvalidArgument, comm, "op",
                   "second tesseraRedOpDestroy");
    ExpectHealthy(&c, comm, nranks, "a destroyed operator");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// An operator belongs to the communicator and datatype it was created for. (Operator
// values are per communicator, as in NCCL: comm A has none here, so B's is unknown to A.)
TEST(CollectiveArguments, PreMulSumOpOfAnotherCommOrDatatype) {
  const int nranks = 2;
  RankOptions opts = ArgumentOptions();
  opts.unique_ids = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    tesseraComm_t a = nullptr, b = nullptr;
    std::string err = InitComm(ctx, &a, 0);
    if (err.empty()) err = InitComm(ctx, &b, 1);
    if (!err.empty()) {
      if (a != nullptr) tesseraCommDestroy(a);
      return err;
    }
    RankChecks c;
    float scalar = 3, send[4] = {1, 2, 3, 4}, recv[4] = {0};
    tesseraRedOp_t op_b;
    if (c.ExpectCode(tesseraRedOpCreatePreMulSum(&op_b, &scalar, tesseraFloat32, tesseraScalarHostImmediate, b),
                     tesseraSuccess, "create on comm b")) {
      ExpectRejected(&c, tesseraAllReduce(send, recv, 4, tesseraFloat32, op_b, a, nullptr),
                     tesseraInvalidArgument, a, "op", "comm b's operator used on comm a");
      ExpectRejected(&c, tesseraRedOpDestroy(op_b, a), tesseraInvalidArgument, a, "op",
                     "comm b's operator destroyed through comm a");
      int32_t isend[4] = {1, 2, 3, 4}, irecv[4];
      double dsend[4] = {1, 2, 3, 4}, drecv[4];
      ExpectRejected(&c, tesseraAllReduce(isend, irecv, 4, tesseraInt32, op_b, b, nullptr),
                     tesseraInvalidArgument, b, "op", "float32 operator used with int32");
      ExpectRejected(&c, tesseraAllReduce(dsend, drecv, 4, tesseraFloat64, op_b, b, nullptr),
                     tesseraInvalidArgument, b, "op", "float32 operator used with float64");
      // Still good where it belongs.
      if (c.ExpectCode(tesseraAllReduce(send, recv, 4, tesseraFloat32, op_b, b, nullptr), tesseraSuccess,
                       "comm b's operator on comm b")) {
        c.Expect(recv[1] == 3 * nranks * 2, "wrong PreMulSum on comm b: " + std::to_string(recv[1]));
      }
      c.ExpectCode(tesseraRedOpDestroy(op_b, b), tesseraSuccess, "destroy on comm b");
    }
    ExpectHealthy(&c, a, nranks, "comm b's operator on comm a");
    c.ExpectCode(tesseraCommDestroy(a), tesseraSuccess, "destroy a");
    c.ExpectCode(tesseraCommDestroy(b), tesseraSuccess, "destroy b");
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

TEST(CollectiveArguments, PreMulSumCreateArguments) {
  auto results = RunRanks(1, [](int, tesseraComm_t comm) {
    RankChecks c;
    float scalar = 2;
    tesseraRedOp_t op;
    ExpectRejected(&c, tesseraRedOpCreatePreMulSum(nullptr, &scalar, tesseraFloat32, tesseraScalarHostImmediate, comm),
                   tesseraInvalidArgument, comm, "op", "NULL op pointer");
    ExpectRejected(&c, tesseraRedOpCreatePreMulSum(&op, nullptr, tesseraFloat32, tesseraScalarHostImmediate, comm),
                   tesseraInvalidArgument, comm, "scalar", "NULL scalar");
    for (int type : {-1, static_cast<int>(tesseraNumTypes), 42}) {
      ExpectRejected(&c, tesseraRedOpCreatePreMulSum(&op, &scalar, static_cast<tesseraDataType_t>(type),
                                                     tesseraScalarHostImmediate, comm),
                     tesseraInvalidArgument, comm, "datatype", "datatype " + std::to_string(type));
    }
    for (int residence : {-1, 2, 7}) {
      ExpectRejected(&c, tesseraRedOpCreatePreMulSum(&op, &scalar, tesseraFloat32,
                                                     static_cast<tesseraScalarResidence_t>(residence), comm),
                     tesseraInvalidArgument, comm, "residence", "residence " + std::to_string(residence));
    }
    ExpectHealthy(&c, comm, 1, "bad PreMulSum arguments");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

TEST(CollectiveArguments, PeerOutOfRange) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float buf[4] = {0};
    for (int peer : {-1, nranks, INT_MAX}) {
      const std::string p = " peer " + std::to_string(peer);
      ExpectRejected(&c, tesseraSend(buf, 4, tesseraFloat32, peer, comm, nullptr), tesseraInvalidArgument,
                     comm, "peer", "tesseraSend" + p);
      ExpectRejected(&c, tesseraRecv(buf, 4, tesseraFloat32, peer, comm, nullptr), tesseraInvalidArgument,
                     comm, "peer", "tesseraRecv" + p);
      // In a group: refused by the call itself, never run.
      tesseraResult_t start = tesseraGroupStart();
      tesseraResult_t send = tesseraSend(buf, 4, tesseraFloat32, peer, comm, nullptr);
      tesseraResult_t end = tesseraGroupEnd();
      c.Expect(start == tesseraSuccess, "tesseraGroupStart: " + CodeName(start));
      c.Expect(send == tesseraInvalidArgument, "grouped tesseraSend" + p + ": call " + CodeName(send) +
                                                   ", group end " + CodeName(end) + ": " + LastError(nullptr));
      c.ExpectContains(LastError(nullptr), "peer", "grouped tesseraSend" + p);
    }
    ExpectHealthy(&c, comm, nranks, "bad peers");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// Null buffers with count > 0 (only buffers that every rank uses), unknown datatypes and
// non-NULL streams, for every collective.
TEST(CollectiveArguments, BuffersDatatypesAndStreams) {
  const int nranks = 2;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float s[8] = {0}, r[8] = {0};
    const tesseraResult_t kInv = tesseraInvalidArgument;
    const tesseraDataType_t f = tesseraFloat32;
    ExpectRejected(&c, tesseraBroadcast(s, nullptr, 4, f, 0, comm, nullptr), kInv, comm, "recvbuff", "broadcast NULL recvbuff");
    ExpectRejected(&c, tesseraBcast(nullptr, 4, f, 0, comm, nullptr), kInv, comm, "buff", "bcast NULL buff");
    ExpectRejected(&c, tesseraReduce(nullptr, r, 4, f, tesseraSum, 0, comm, nullptr), kInv, comm, "sendbuff", "reduce NULL sendbuff");
    ExpectRejected(&c, tesseraAllGather(nullptr, r, 4, f, comm, nullptr), kInv, comm, "sendbuff", "allgather NULL sendbuff");
    ExpectRejected(&c, tesseraAllGather(s, nullptr, 4, f, comm, nullptr), kInv, comm, "recvbuff", "allgather NULL recvbuff");
    ExpectRejected(&c, tesseraReduceScatter(nullptr, r, 4, f, tesseraSum, comm, nullptr), kInv, comm, "sendbuff", "reducescatter NULL sendbuff");
    ExpectRejected(&c, tesseraReduceScatter(s, nullptr, 4, f, tesseraSum, comm, nullptr), kInv, comm, "recvbuff", "reducescatter NULL recvbuff");
    ExpectRejected(&c, tesseraAlltoAll(nullptr, r, 4, f, comm, nullptr), kInv, comm, "sendbuff", "alltoall NULL sendbuff");
    ExpectRejected(&c, tesseraAlltoAll(s, nullptr, 4, f, comm, nullptr), kInv, comm, "recvbuff", "alltoall NULL recvbuff");
    ExpectRejected(&c, tesseraGather(nullptr, r, 4, f, 0, comm, nullptr), kInv, comm, "sendbuff", "gather NULL sendbuff");
    ExpectRejected(&c, tesseraScatter(s, nullptr, 4, f, 0, comm, nullptr), kInv, comm, "recvbuff", "scatter NULL recvbuff");
    ExpectRejected(&c, tesseraSend(nullptr, 4, f, 0, comm, nullptr), kInv, comm, "sendbuff", "send NULL sendbuff");
    ExpectRejected(&c, tesseraRecv(nullptr, 4, f, 0, comm, nullptr), kInv, comm, "recvbuff", "recv NULL recvbuff");

    for (int type : {-1, static_cast<int>(tesseraNumTypes), 42}) {
      const auto t = static_cast<tesseraDataType_t>(type);
      const std::string d = " datatype " + std::to_string(type);
      ExpectRejected(&c, tesseraBroadcast(s, r, 4, t, 0, comm, nullptr), kInv, comm, "datatype", "broadcast" + d);
      ExpectRejected(&c, tesseraReduce(s, r, 4, t, tesseraSum, 0, comm, nullptr), kInv, comm, "datatype", "reduce" + d);
      ExpectRejected(&c, tesseraAllGather(s, r, 4, t, comm, nullptr), kInv, comm, "datatype", "allgather" + d);
      ExpectRejected(&c, tesseraReduceScatter(s, r, 4, t, tesseraSum, comm, nullptr), kInv, comm, "datatype", "reducescatter" + d);
      ExpectRejected(&c, tesseraAlltoAll(s, r, 4, t, comm, nullptr), kInv, comm, "datatype", "alltoall" + d);
      ExpectRejected(&c, tesseraGather(s, r, 4, t, 0, comm, nullptr), kInv, comm, "datatype", "gather" + d);
      ExpectRejected(&c, tesseraScatter(s, r, 4, t, 0, comm, nullptr), kInv, comm, "datatype", "scatter" + d);
      ExpectRejected(&c, tesseraSend(s, 4, t, 0, comm, nullptr), kInv, comm, "datatype", "send" + d);
      ExpectRejected(&c, tesseraRecv(r, 4, t, 0, comm, nullptr), kInv, comm, "datatype", "recv" + d);
    }

    int fake = 0;
    void* stream = &fake;
    ExpectRejected(&c, tesseraBroadcast(s, r, 4, f, 0, comm, stream), kInv, comm, "stream", "broadcast stream");
    ExpectRejected(&c, tesseraBcast(r, 4, f, 0, comm, stream), kInv, comm, "stream", "bcast stream");
    ExpectRejected(&c, tesseraReduce(s, r, 4, f, tesseraSum, 0, comm, stream), kInv, comm, "stream", "reduce stream");
    ExpectRejected(&c, tesseraAllGather(s, r, 4, f, comm, stream), kInv, comm, "stream", "allgather stream");
    ExpectRejected(&c, tesseraReduceScatter(s, r, 4, f, tesseraSum, comm, stream), kInv, comm, "stream", "reducescatter stream");
    ExpectRejected(&c, tesseraAlltoAll(s, r, 4, f, comm, stream), kInv, comm, "stream", "alltoall stream");
    ExpectRejected(&c, tesseraGather(s, r, 4, f, 0, comm, stream), kInv, comm, "stream", "gather stream");
    ExpectRejected(&c, tesseraScatter(s, r, 4, f, 0, comm, stream), kInv, comm, "stream", "scatter stream");
    ExpectRejected(&c, tesseraSend(s, 4, f, 0, comm, stream), kInv, comm, "stream", "send stream");
    ExpectRejected(&c, tesseraRecv(r, 4, f, 0, comm, stream), kInv, comm, "stream", "recv stream");

    // A count whose byte size overflows size_t.
    const size_t huge = SIZE_MAX / 2;
    ExpectRejected(&c, tesseraAllGather(s, r, huge, f, comm, nullptr), kInv, comm, "count", "allgather overflowing count");
    ExpectRejected(&c, tesseraAlltoAll(s, r, huge, f, comm, nullptr), kInv, comm, "count", "alltoall overflowing count");
    ExpectRejected(&c, tesseraReduceScatter(s, r, huge, f, tesseraSum, comm, nullptr), kInv, comm, "count",
                   "reducescatter overflowing count");
    ExpectRejected(&c, tesseraBroadcast(s, r, huge, f, 0, comm, nullptr), kInv, comm, "count", "broadcast overflowing count");

    ExpectHealthy(&c, comm, nranks, "bad buffers, datatypes and streams");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

// Buffers that overlap without following the in-place rules, where tessera can see it
// (docs/semantics.md): AllReduce and AlltoAll with recvbuff inside sendbuff but not equal.
TEST(CollectiveArguments, OverlapOutsideTheInPlaceRules) {
  const int nranks = 2;
  auto results = RunRanks(nranks, [](int, tesseraComm_t comm) {
    RankChecks c;
    float buf[64] = {0};
    ExpectRejected(&c, tesseraAllReduce(buf, buf + 1, 16, tesseraFloat32, tesseraSum, comm, nullptr),
                   tesseraInvalidArgument, comm, "overlap", "allreduce, recvbuff = sendbuff + 1");
    ExpectRejected(&c, tesseraAllReduce(buf + 8, buf, 16, tesseraFloat32, tesseraSum, comm, nullptr),
                   tesseraInvalidArgument, comm, "overlap", "allreduce, sendbuff = recvbuff + 8");
    ExpectRejected(&c, tesseraAlltoAll(buf, buf + 4, 4, tesseraFloat32, comm, nullptr),
                   tesseraInvalidArgument, comm, "overlap", "alltoall, recvbuff = sendbuff + 4");
    ExpectHealthy(&c, comm, nranks, "overlapping buffers");
    return c.str();
  }, ArgumentOptions());
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
