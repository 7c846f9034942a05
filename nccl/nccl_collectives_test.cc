// Every collective of nccl.h other than AllReduce, through the drop-in libnccl.so.2:
// written only against the CUDA toolkit's nccl.h, linked only with the drop-in, 4 ranks
// as forked processes, host buffers, results compared exactly with serial references.
// Out-of-place and in-place (nccl.h's offset rules), roots other than 0, NULL buffers
// where nccl.h allows them, send/recv in groups, fused groups and PreMulSum.
#include <nccl.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nccl/test_ranks.h"
#include "nccl/test_values.h"

namespace nccl_test {
namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 1001;

// One element size of each kind, for collectives that only move data.
const std::vector<ncclDataType_t> kMoveTypes = {ncclInt8, ncclBfloat16, ncclFloat32, ncclInt64};

std::string Where(const char* collective, ncclDataType_t type, const std::string& detail) {
  return std::string(collective) + " " + TypeName(type) + (detail.empty() ? "" : " " + detail);
}

// Runs `body(comm, rank, checks)` on kRanks ranks sharing one communicator.
template <typename F>
std::string OnFourRanks(F body) {
  return RunRanks(kRanks, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    Checks checks;
    body(comm, ctx.rank, checks);
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
}

TEST(NcclCollectives, Broadcast) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : kMoveTypes) {
                for (int root : {0, 2}) {
                  for (bool in_place : {false, true}) {
                    const std::string what =
                        Where("ncclBroadcast", type, "root " + std::to_string(root) + (in_place ? " in place" : ""));
                    std::vector<char> send = MakeBuffer(type, kCount, [&](size_t i) { return MoveInput(rank, i); });
                    std::vector<char> recv = in_place ? send : std::vector<char>(send.size(), 0);
                    const void* sendbuff = in_place ? recv.data() : send.data();
                    if (!checks.ExpectCode(ncclBroadcast(sendbuff, recv.data(), kCount, type, root, comm, nullptr),
                                           ncclSuccess, what, comm)) {
                      continue;
                    }
                    checks.Add(Compare(type, recv.data(), kCount, [&](size_t i) { return MoveInput(root, i); }, what));
                  }
                }
                // The legacy in-place form.
                const std::string what = Where("ncclBcast", type, "root 3");
                std::vector<char> buf = MakeBuffer(type, kCount, [&](size_t i) { return MoveInput(rank, i); });
                if (checks.ExpectCode(ncclBcast(buf.data(), kCount, type, 3, comm, nullptr), ncclSuccess, what, comm)) {
                  checks.Add(Compare(type, buf.data(), kCount, [&](size_t i) { return MoveInput(3, i); }, what));
                }
              }
            }),
            "");
}

// Reduce to `root`; non-root ranks pass recvbuff NULL (out-of-place), as nccl.h allows.
void CheckReduce(ncclComm_t comm, int rank, ncclDataType_t type, ncclRedOp_t op, int root, bool in_place,
                 Checks& checks) {
  const std::string what = Where("ncclReduce", type, OpName(op) + " root " + std::to_string(root) +
                                                         (in_place ? " in place" : ""));
  std::vector<char> send =
      MakeBuffer(type, kCount, [&](size_t i) { return ReductionInput(type, op, rank, kRanks, i); });
  std::vector<char> recv = in_place ? send : std::vector<char>(send.size(), 0);
  const void* sendbuff = in_place ? recv.data() : send.data();
  void* recvbuff = in_place || rank == root ? recv.data() : nullptr;
  if (!checks.ExpectCode(ncclReduce(sendbuff, recvbuff, kCount, type, op, root, comm, nullptr), ncclSuccess, what,
                         comm) ||
      rank != root) {
    return;
  }
  checks.Add(Compare(type, recv.data(), kCount, [&](size_t i) { return ReductionResult(type, op, kRanks, i); },
                     what));
}

TEST(NcclCollectives, Reduce) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : ReducibleTypes()) CheckReduce(comm, rank, type, ncclSum, 1, false, checks);
              for (ncclRedOp_t op : BuiltinOps()) {
                for (bool in_place : {false, true}) CheckReduce(comm, rank, ncclFloat32, op, 3, in_place, checks);
              }
            }),
            "");
}

TEST(NcclCollectives, AllGather) {
  std::vector<ncclDataType_t> types = kMoveTypes;
  types.push_back(ncclFloat8e4m3);  // fp8 does not reduce, but moves
  EXPECT_EQ(OnFourRanks([&](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : types) {
                for (bool in_place : {false, true}) {
                  const std::string what = Where("ncclAllGather", type, in_place ? "in place" : "");
                  const size_t size = TypeSize(type);
                  std::vector<char> send = MakeBuffer(type, kCount, [&](size_t i) { return MoveInput(rank, i); });
                  std::vector<char> recv(kRanks * kCount * size, 0);
                  // In place: sendbuff == recvbuff + rank * sendcount.
                  if (in_place) std::copy(send.begin(), send.end(), recv.begin() + rank * kCount * size);
                  const void* sendbuff = in_place ? recv.data() + rank * kCount * size : send.data();
                  if (!checks.ExpectCode(ncclAllGather(sendbuff, recv.data(), kCount, type, comm, nullptr),
                                         ncclSuccess, what, comm)) {
                    continue;
                  }
                  checks.Add(Compare(type, recv.data(), kRanks * kCount,
                                     [&](size_t i) { return MoveInput(static_cast<int>(i / kCount), i % kCount); },
                                     what));
                }
              }
            }),
            "");
}

void CheckReduceScatter(ncclComm_t comm, int rank, ncclDataType_t type, ncclRedOp_t op, bool in_place,
                        Checks& checks) {
  const std::string what = Where("ncclReduceScatter", type, OpName(op) + (in_place ? " in place" : ""));
  const size_t size = TypeSize(type);
  std::vector<char> send =
      MakeBuffer(type, kRanks * kCount, [&](size_t i) { return ReductionInput(type, op, rank, kRanks, i); });
  std::vector<char> out(kCount * size, 0);
  // In place: recvbuff == sendbuff + rank * recvcount.
  void* recvbuff = in_place ? send.data() + rank * kCount * size : out.data();
  if (!checks.ExpectCode(ncclReduceScatter(send.data(), recvbuff, kCount, type, op, comm, nullptr), ncclSuccess,
                         what, comm)) {
    return;
  }
  checks.Add(Compare(type, recvbuff, kCount,
                     [&](size_t i) { return ReductionResult(type, op, kRanks, rank * kCount + i); }, what));
}

TEST(NcclCollectives, ReduceScatter) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : ReducibleTypes()) {
                for (bool in_place : {false, true}) CheckReduceScatter(comm, rank, type, ncclSum, in_place, checks);
              }
              for (ncclRedOp_t op : BuiltinOps()) CheckReduceScatter(comm, rank, ncclInt32, op, false, checks);
            }),
            "");
}

TEST(NcclCollectives, AlltoAll) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : kMoveTypes) {
                const std::string what = Where("ncclAlltoAll", type, "");
                // Block j of rank r's sendbuff goes to rank j: encode (sender, destination).
                std::vector<char> send = MakeBuffer(type, kRanks * kCount, [&](size_t i) {
                  return MoveInput(rank * kRanks + static_cast<int>(i / kCount), i % kCount);
                });
                std::vector<char> recv(send.size(), 0);
                if (!checks.ExpectCode(ncclAlltoAll(send.data(), recv.data(), kCount, type, comm, nullptr),
                                       ncclSuccess, what, comm)) {
                  continue;
                }
                checks.Add(Compare(type, recv.data(), kRanks * kCount,
                                   [&](size_t i) {
                                     return MoveInput(static_cast<int>(i / kCount) * kRanks + rank, i % kCount);
                                   },
                                   what));
              }
            }),
            "");
}

TEST(NcclCollectives, GatherAndScatter) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              for (ncclDataType_t type : kMoveTypes) {
                const size_t size = TypeSize(type);
                for (bool in_place : {false, true}) {
                  // Gather to root 2; in place on the root: sendbuff == recvbuff + root * count.
                  const int groot = 2;
                  const std::string gwhat = Where("ncclGather", type, in_place ? "in place" : "");
                  std::vector<char> gsend = MakeBuffer(type, kCount, [&](size_t i) { return MoveInput(rank, i); });
                  std::vector<char> grecv(rank == groot ? kRanks * kCount * size : 0, 0);
                  const void* gsendbuff = gsend.data();
                  if (in_place && rank == groot) {
                    std::copy(gsend.begin(), gsend.end(), grecv.begin() + groot * kCount * size);
                    gsendbuff = grecv.data() + groot * kCount * size;
                  }
                  void* grecvbuff = rank == groot ? grecv.data() : nullptr;  // unused off the root
                  if (checks.ExpectCode(ncclGather(gsendbuff, grecvbuff, kCount, type, groot, comm, nullptr),
                                        ncclSuccess, gwhat, comm) &&
                      rank == groot) {
                    checks.Add(Compare(type, grecv.data(), kRanks * kCount,
                                       [&](size_t i) { return MoveInput(static_cast<int>(i / kCount), i % kCount); },
                                       gwhat));
                  }
                  // Scatter from root 1; in place on the root: recvbuff == sendbuff + root * count.
                  const int sroot = 1;
                  const std::string swhat = Where("ncclScatter", type, in_place ? "in place" : "");
                  std::vector<char> ssend;
                  if (rank == sroot) {
                    ssend = MakeBuffer(type, kRanks * kCount,
                                       [&](size_t i) { return MoveInput(10 + static_cast<int>(i / kCount), i % kCount); });
                  }
                  std::vector<char> srecv(kCount * size, 0);
                  void* srecvbuff = in_place && rank == sroot ? ssend.data() + sroot * kCount * size : srecv.data();
                  const void* ssendbuff = rank == sroot ? ssend.data() : nullptr;  // unused off the root
                  if (checks.ExpectCode(ncclScatter(ssendbuff, srecvbuff, kCount, type, sroot, comm, nullptr),
                                        ncclSuccess, swhat, comm)) {
                    checks.Add(
                        Compare(type, srecvbuff, kCount, [&](size_t i) { return MoveInput(10 + rank, i); }, swhat));
                  }
                }
              }
            }),
            "");
}

// A ring of send/recv inside a group: each rank sends to rank+1 and receives from rank-1,
// posting the send first or the receive first. Neither order may deadlock.
TEST(NcclCollectives, SendRecvRingInAGroupInBothOrders) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              const int next = (rank + 1) % kRanks, prev = (rank + kRanks - 1) % kRanks;
              for (bool send_first : {true, false}) {
                const std::string what = send_first ? "send/recv ring, sends first" : "send/recv ring, receives first";
                std::vector<char> send = MakeBuffer(ncclFloat64, kCount, [&](size_t i) { return MoveInput(rank, i); });
                std::vector<char> recv(send.size(), 0);
                checks.ExpectCode(ncclGroupStart(), ncclSuccess, "ncclGroupStart", comm);
                if (send_first) {
                  checks.ExpectCode(ncclSend(send.data(), kCount, ncclFloat64, next, comm, nullptr), ncclSuccess,
                                    "ncclSend", comm);
                  checks.ExpectCode(ncclRecv(recv.data(), kCount, ncclFloat64, prev, comm, nullptr), ncclSuccess,
                                    "ncclRecv", comm);
                } else {
                  checks.ExpectCode(ncclRecv(recv.data(), kCount, ncclFloat64, prev, comm, nullptr), ncclSuccess,
                                    "ncclRecv", comm);
                  checks.ExpectCode(ncclSend(send.data(), kCount, ncclFloat64, next, comm, nullptr), ncclSuccess,
                                    "ncclSend", comm);
                }
                if (checks.ExpectCode(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd after " + what, comm)) {
                  checks.Add(
                      Compare(ncclFloat64, recv.data(), kCount, [&](size_t i) { return MoveInput(prev, i); }, what));
                }
              }
            }),
            "");
}

// Several collectives fused in one group, inside a nested group: each has its result
// when the outermost ncclGroupEnd returns.
TEST(NcclCollectives, FusedNestedGroup) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              std::vector<char> ar = MakeBuffer(
                  ncclInt32, kCount, [&](size_t i) { return ReductionInput(ncclInt32, ncclSum, rank, kRanks, i); });
              std::vector<char> ag_send = MakeBuffer(ncclFloat32, kCount, [&](size_t i) { return MoveInput(rank, i); });
              std::vector<char> ag_recv(kRanks * ag_send.size(), 0);
              std::vector<char> bc = MakeBuffer(ncclUint8, kCount, [&](size_t i) { return MoveInput(rank, i); });
              checks.ExpectCode(ncclGroupStart(), ncclSuccess, "ncclGroupStart (outer)", comm);
              checks.ExpectCode(ncclAllReduce(ar.data(), ar.data(), kCount, ncclInt32, ncclSum, comm, nullptr),
                                ncclSuccess, "ncclAllReduce in a group", comm);
              checks.ExpectCode(ncclGroupStart(), ncclSuccess, "ncclGroupStart (inner)", comm);
              checks.ExpectCode(ncclAllGather(ag_send.data(), ag_recv.data(), kCount, ncclFloat32, comm, nullptr),
                                ncclSuccess, "ncclAllGather in a group", comm);
              checks.ExpectCode(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd (inner)", comm);
              checks.ExpectCode(ncclBroadcast(bc.data(), bc.data(), kCount, ncclUint8, 3, comm, nullptr), ncclSuccess,
                                "ncclBroadcast in a group", comm);
              if (!checks.ExpectCode(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd (outer)", comm)) return;
              checks.Add(Compare(ncclInt32, ar.data(), kCount,
                                 [&](size_t i) { return ReductionResult(ncclInt32, ncclSum, kRanks, i); },
                                 "grouped ncclAllReduce"));
              checks.Add(Compare(ncclFloat32, ag_recv.data(), kRanks * kCount,
                                 [&](size_t i) { return MoveInput(static_cast<int>(i / kCount), i % kCount); },
                                 "grouped ncclAllGather"));
              checks.Add(Compare(ncclUint8, bc.data(), kCount, [&](size_t i) { return MoveInput(3, i); },
                                 "grouped ncclBroadcast"));
            }),
            "");
}

// sum over ranks of scalar * x, with the scalar read at creation (host-immediate) or at
// each collective (the "device" residence, host memory on a CPU build).
TEST(NcclCollectives, PreMulSum) {
  EXPECT_EQ(OnFourRanks([](ncclComm_t comm, int rank, Checks& checks) {
              struct Case {
                ncclDataType_t type;
                double scalar;
                ncclScalarResidence_t residence;
              };
              for (const Case& c : {Case{ncclFloat32, 0.5, ncclScalarHostImmediate},
                                    Case{ncclFloat64, 0.25, ncclScalarDevice},
                                    Case{ncclInt32, 2, ncclScalarHostImmediate}}) {
                const std::string what = Where("PreMulSum", c.type, "scalar " + std::to_string(c.scalar));
                std::vector<char> scalar = MakeBuffer(c.type, 1, [&](size_t) { return c.scalar; });
                ncclRedOp_t op;
                if (!checks.ExpectCode(
                        ncclRedOpCreatePreMulSum(&op, scalar.data(), c.type, c.residence, comm), ncclSuccess,
                        "ncclRedOpCreatePreMulSum " + what, comm)) {
                  continue;
                }
                checks.Expect(op >= ncclNumOps, what + ": operator " + std::to_string(op) + " < ncclNumOps");
                std::vector<char> buf = MakeBuffer(
                    c.type, kCount, [&](size_t i) { return ReductionInput(c.type, ncclSum, rank, kRanks, i); });
                if (checks.ExpectCode(ncclAllReduce(buf.data(), buf.data(), kCount, c.type, op, comm, nullptr),
                                      ncclSuccess, "ncclAllReduce " + what, comm)) {
                  checks.Add(Compare(c.type, buf.data(), kCount,
                                     [&](size_t i) { return c.scalar * ReductionResult(c.type, ncclSum, kRanks, i); },
                                     "ncclAllReduce " + what));
                }
                checks.ExpectCode(ncclRedOpDestroy(op, comm), ncclSuccess, "ncclRedOpDestroy", comm);
                // A destroyed operator is an unknown one.
                checks.ExpectCode(ncclAllReduce(buf.data(), buf.data(), kCount, c.type, op, comm, nullptr),
                                  ncclInvalidArgument, "ncclAllReduce with a destroyed operator", comm);
              }
            }),
            "");
}

}  // namespace
}  // namespace nccl_test
