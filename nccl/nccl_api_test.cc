// Communicators, configuration, errors and what the drop-in cannot honour, through the
// drop-in libnccl.so.2: written only against the CUDA toolkit's nccl.h (and
// nccl_device.h), linked only with the drop-in, ranks as forked processes.
#include <nccl.h>
#include <nccl_device.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nccl/test_ranks.h"
#include "nccl/test_values.h"

namespace nccl_test {
namespace {

constexpr int kRanks = 4;

// Sum of every member's (rank + 1) over comm, which has `nranks` ranks; "" or the failure.
std::string CheckRankSum(ncclComm_t comm, int nranks, const std::string& what) {
  Checks checks;
  int rank = -1;
  checks.ExpectCode(ncclCommUserRank(comm, &rank), ncclSuccess, what + ": ncclCommUserRank", comm);
  int64_t value = rank + 1;
  if (checks.ExpectCode(ncclAllReduce(&value, &value, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess,
                        what + ": ncclAllReduce", comm)) {
    checks.Expect(value == int64_t{nranks} * (nranks + 1) / 2, what + ": sum of ranks " + std::to_string(value));
  }
  return checks.str();
}

// Ranks of the same parity form a communicator, ordered by key = -rank (reversed);
// rank 3 passes NCCL_SPLIT_NOCOLOR in a second split and gets NULL. Both new
// communicators run an allreduce at the same time.
TEST(NcclCommunicators, SplitByParityReversedAndNoColor) {
  const std::string failures = RunRanks(kRanks, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    Checks checks;
    ncclComm_t half = nullptr;
    if (checks.ExpectCode(ncclCommSplit(comm, ctx.rank % 2, -ctx.rank, &half, nullptr), ncclSuccess,
                          "ncclCommSplit by parity", comm)) {
      int count = -1, rank = -1;
      checks.ExpectCode(ncclCommCount(half, &count), ncclSuccess, "ncclCommCount", half);
      checks.ExpectCode(ncclCommUserRank(half, &rank), ncclSuccess, "ncclCommUserRank", half);
      // Ranks {0, 2} and {1, 3}, ordered by -rank: the higher parent rank comes first.
      checks.Expect(count == 2 && rank == (ctx.rank < 2 ? 1 : 0),
                    "split: count " + std::to_string(count) + " rank " + std::to_string(rank));
      checks.Add(CheckRankSum(half, 2, "parity communicator"));
      checks.ExpectCode(ncclCommDestroy(half), ncclSuccess, "ncclCommDestroy (split)");
    }
    // A config for the new communicator, and NCCL_SPLIT_NOCOLOR on rank 3.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = "split-three";
    ncclComm_t three = reinterpret_cast<ncclComm_t>(&config);  // must become NULL on rank 3
    const int color = ctx.rank == 3 ? NCCL_SPLIT_NOCOLOR : 7;
    if (checks.ExpectCode(ncclCommSplit(comm, color, ctx.rank, &three, &config), ncclSuccess,
                          "ncclCommSplit with NOCOLOR", comm)) {
      if (ctx.rank == 3) {
        checks.Expect(three == nullptr, "NCCL_SPLIT_NOCOLOR did not give a NULL communicator");
      } else {
        checks.Add(CheckRankSum(three, 3, "three-rank communicator"));
        checks.ExpectCode(ncclCommDestroy(three), ncclSuccess, "ncclCommDestroy (three)");
      }
    }
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

// ncclCommInitRankConfig with NCCL's config struct, ncclCommInitRankScalable with one and
// with two ids, and ncclCommFinalize before ncclCommDestroy.
TEST(NcclCommunicators, InitWithConfigScalableAndFinalize) {
  RankOptions opts;
  opts.unique_ids = 3;
  const std::string failures = RunRanks(
      kRanks,
      [](const RankContext& ctx) {
        Checks checks;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.commName = "drop-in test";
        config.cgaClusterSize = 4;  // GPU tuning: accepted and ignored
        ncclComm_t comm = nullptr;
        if (checks.ExpectCode(ncclCommInitRankConfig(&comm, ctx.nranks, ctx.ids[0], ctx.rank, &config), ncclSuccess,
                              "ncclCommInitRankConfig")) {
          checks.Add(CheckRankSum(comm, kRanks, "configured communicator"));
          checks.ExpectCode(ncclCommFinalize(comm), ncclSuccess, "ncclCommFinalize", comm);
          checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
        }
        ncclComm_t one = nullptr;
        ncclUniqueId one_id = ctx.ids[1];
        if (checks.ExpectCode(ncclCommInitRankScalable(&one, ctx.nranks, ctx.rank, 1, &one_id, nullptr),
                              ncclSuccess, "ncclCommInitRankScalable nId 1")) {
          checks.Add(CheckRankSum(one, kRanks, "scalable communicator, one id"));
          checks.ExpectCode(ncclCommDestroy(one), ncclSuccess, "ncclCommDestroy");
        }
        // Two ids (both made by rank 0 here): every rank meets at the first.
        ncclUniqueId two_ids[2] = {ctx.ids[2], ctx.ids[1]};
        ncclComm_t two = nullptr;
        if (checks.ExpectCode(ncclCommInitRankScalable(&two, ctx.nranks, ctx.rank, 2, two_ids, &config), ncclSuccess,
                              "ncclCommInitRankScalable nId 2")) {
          checks.Add(CheckRankSum(two, kRanks, "scalable communicator, two ids"));
          checks.ExpectCode(ncclCommDestroy(two), ncclSuccess, "ncclCommDestroy");
        }
        return checks.str();
      },
      opts);
  EXPECT_EQ(failures, "");
}

// A non-blocking communicator: creation and collectives may answer ncclInProgress, and
// ncclCommGetAsyncError tells when they are done.
TEST(NcclCommunicators, NonBlocking) {
  const std::string failures = RunRanks(kRanks, [](const RankContext& ctx) {
    Checks checks;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    auto wait_done = [&](const std::string& what) {
      ncclResult_t state = ncclInProgress;
      for (int i = 0; i < 60000 && state == ncclInProgress; ++i) {
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return checks.Expect(false, what + ": GetAsyncError");
        if (state == ncclInProgress) usleep(1000);
      }
      return checks.ExpectCode(state, ncclSuccess, what + " (async state)", comm);
    };
    ncclResult_t r = ncclCommInitRankConfig(&comm, ctx.nranks, ctx.ids[0], ctx.rank, &config);
    if (r != ncclInProgress && !checks.ExpectCode(r, ncclSuccess, "non-blocking ncclCommInitRankConfig")) {
      return checks.str();
    }
    if (!wait_done("non-blocking init")) return checks.str();
    std::vector<float> buf(4096, static_cast<float>(ctx.rank));
    r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
    if ((r == ncclInProgress || checks.ExpectCode(r, ncclSuccess, "non-blocking ncclAllReduce", comm)) &&
        wait_done("non-blocking allreduce")) {
      checks.Expect(buf[0] == 6 && buf[4095] == 6, "non-blocking allreduce gave " + std::to_string(buf[0]));
    }
    r = ncclCommFinalize(comm);
    if (r == ncclInProgress || checks.ExpectCode(r, ncclSuccess, "ncclCommFinalize", comm)) {
      wait_done("finalize");
    }
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

// ncclCommInitAll: four ranks in one process, driven by one thread inside a group.
TEST(NcclCommunicators, InitAllDrivenByOneThreadInAGroup) {
  const std::string failures = RunRanks(1, [](const RankContext&) {
    Checks checks;
    ncclComm_t comms[kRanks] = {};
    if (!checks.ExpectCode(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess, "ncclCommInitAll")) {
      return checks.str();
    }
    std::vector<std::vector<int32_t>> bufs(kRanks);
    checks.ExpectCode(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
    for (int r = 0; r < kRanks; ++r) {
      bufs[r].assign(257, r + 1);
      checks.ExpectCode(ncclAllReduce(bufs[r].data(), bufs[r].data(), 257, ncclInt32, ncclSum, comms[r], nullptr),
                        ncclSuccess, "ncclAllReduce on comm " + std::to_string(r), comms[r]);
    }
    if (checks.ExpectCode(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd")) {
      for (int r = 0; r < kRanks; ++r) {
        checks.Expect(bufs[r][0] == 10 && bufs[r][256] == 10, "InitAll comm " + std::to_string(r) + " summed " +
                                                                  std::to_string(bufs[r][0]));
      }
    }
    for (int r = 0; r < kRanks; ++r) checks.ExpectCode(ncclCommDestroy(comms[r]), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

// Bad arguments get the right code and a message; what a CPU build cannot honour answers
// ncclInvalidUsage with "not supported". One rank is enough for all of it.
TEST(NcclErrors, BadArgumentsAndUnsupportedFunctions) {
  const std::string failures = RunRanks(1, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    Checks checks;
    int version = 0;
    checks.ExpectCode(ncclGetVersion(&version), ncclSuccess, "ncclGetVersion");
    checks.Expect(version == NCCL_VERSION_CODE, "ncclGetVersion gave " + std::to_string(version));
    for (int c = 0; c <= ncclNumResults; ++c) {
      const char* s = ncclGetErrorString(static_cast<ncclResult_t>(c));
      checks.Expect(s != nullptr && s[0] != '\0', "ncclGetErrorString(" + std::to_string(c) + ") is empty");
    }
    checks.ExpectContains(ncclGetErrorString(ncclInvalidArgument), "invalid argument", "ncclGetErrorString(4)");

    float x[4] = {1, 2, 3, 4};
    checks.ExpectCode(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument,
                      "ncclAllReduce on a NULL comm");
    checks.ExpectContains(LastError(nullptr), "comm", "message for a NULL comm");
    checks.ExpectCode(ncclAllReduce(x, x, 4, ncclNumTypes, ncclSum, comm, nullptr), ncclInvalidArgument,
                      "ncclAllReduce with datatype ncclNumTypes", comm);
    checks.ExpectCode(ncclAllReduce(x, x, 4, ncclFloat, static_cast<ncclRedOp_t>(99), comm, nullptr),
                      ncclInvalidArgument, "ncclAllReduce with operator 99", comm);
    checks.ExpectContains(LastError(comm), "99", "message for operator 99");
    checks.ExpectCode(ncclBroadcast(x, x, 4, ncclFloat, 1, comm, nullptr), ncclInvalidArgument,
                      "ncclBroadcast with root 1 of 1", comm);
    checks.ExpectCode(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x1234)),
                      ncclInvalidArgument, "ncclAllReduce on a real stream", comm);
    checks.ExpectContains(LastError(comm), "stream", "message for a stream");
    checks.ExpectCode(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, cudaStreamLegacy), ncclSuccess,
                      "ncclAllReduce on cudaStreamLegacy", comm);

    // A malformed config is refused before anything is created.
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0x12345678;
    ncclComm_t other = reinterpret_cast<ncclComm_t>(&bad);
    checks.ExpectCode(ncclCommInitRankConfig(&other, 1, ctx.ids[0], 0, &bad), ncclInvalidArgument,
                      "ncclCommInitRankConfig with a bad magic");
    checks.Expect(other == nullptr, "a refused init left *comm set");
    checks.ExpectContains(LastError(nullptr), "0xcafebeef", "message for a bad magic");
    checks.ExpectCode(ncclCommInitRankScalable(&other, 1, 0, 0, nullptr, nullptr), ncclInvalidArgument,
                      "ncclCommInitRankScalable with no ids");

    // Not supported on a CPU build: ncclInvalidUsage and a message that says so.
    auto expect_unsupported = [&](ncclResult_t r, const std::string& call) {
      checks.ExpectCode(r, ncclInvalidUsage, call, comm);
      checks.ExpectContains(LastError(comm), "not supported", "message of " + call);
    };
    int device = -1;
    expect_unsupported(ncclCommCuDevice(comm, &device), "ncclCommCuDevice");
    void* handle = &device;
    expect_unsupported(ncclCommRegister(comm, x, sizeof(x), &handle), "ncclCommRegister");
    expect_unsupported(ncclCommDeregister(comm, handle), "ncclCommDeregister");
    ncclWindow_t win = nullptr;
    expect_unsupported(ncclCommWindowRegister(comm, x, sizeof(x), &win, NCCL_WIN_DEFAULT), "ncclCommWindowRegister");
    expect_unsupported(ncclCommWindowDeregister(comm, win), "ncclCommWindowDeregister");
    // Shrink: a rank cannot exclude itself (tests/shrink_test.cc runs a real shrink).
    int exclude = 0;
    ncclComm_t shrunk = comm;
    checks.ExpectCode(ncclCommShrink(comm, &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidUsage,
                      "ncclCommShrink excluding this rank", comm);
    checks.ExpectContains(LastError(comm), "excluded", "message of ncclCommShrink excluding this rank");
    checks.Expect(shrunk == nullptr, "ncclCommShrink left *newcomm set");
    checks.ExpectCode(ncclCommRevoke(comm, 7), ncclInvalidArgument, "ncclCommRevoke with flags 7", comm);
    checks.ExpectCode(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    expect_unsupported(ncclGroupSimulateEnd(&sim), "ncclGroupSimulateEnd");
    checks.ExpectCode(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd after ncclGroupSimulateEnd");

    // The device API: the team of every rank is honoured, the device runtime is not.
    const ncclTeam_t world = ncclTeamWorld(comm);
    checks.Expect(world.nRanks == 1 && world.rank == 0 && world.stride == 1, "ncclTeamWorld");
    checks.Expect(ncclTeamRankToWorld(comm, world, 0) == 0, "ncclTeamRankToWorld");
    checks.Expect(ncclLLA2ACalcSlots(10, 12) == 20, "ncclLLA2ACalcSlots(10, 12)");
    ncclDevCommRequirements_t reqs;
    memset(&reqs, 0, sizeof(reqs));
    ncclDevComm_t* dev_comm = nullptr;  // never written: the call is refused first
    expect_unsupported(ncclDevCommCreate(comm, &reqs, dev_comm), "ncclDevCommCreate");
    const ncclTeam_t lsa = ncclTeamLsa(comm);
    checks.Expect(lsa.nRanks == 0, "ncclTeamLsa gave a team of " + std::to_string(lsa.nRanks));
    checks.ExpectContains(LastError(comm), "not supported", "message of ncclTeamLsa");

    // ncclMemAlloc is honoured with page-aligned host memory that collectives can use.
    void* mem = nullptr;
    checks.ExpectCode(ncclMemAlloc(&mem, 1000 * sizeof(double)), ncclSuccess, "ncclMemAlloc");
    if (mem != nullptr) {
      checks.Expect(reinterpret_cast<uintptr_t>(mem) % NCCL_WIN_REQUIRED_ALIGNMENT == 0, "ncclMemAlloc alignment");
      double* d = static_cast<double*>(mem);
      for (int i = 0; i < 1000; ++i) d[i] = i;
      checks.ExpectCode(ncclAllReduce(d, d, 1000, ncclDouble, ncclMax, comm, nullptr), ncclSuccess,
                        "ncclAllReduce on ncclMemAlloc memory", comm);
      checks.Expect(d[999] == 999, "allreduce on ncclMemAlloc memory");
    }
    checks.ExpectCode(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
    checks.ExpectCode(ncclMemAlloc(nullptr, 8), ncclInvalidArgument, "ncclMemAlloc(NULL)");

    // Deprecated in nccl.h, but declared: it must exist (a no-op here).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ncclResetDebugInit();
#pragma GCC diagnostic pop
    ncclResult_t async = ncclInternalError;
    checks.ExpectCode(ncclCommGetAsyncError(comm, &async), ncclSuccess, "ncclCommGetAsyncError", comm);
    checks.ExpectCode(async, ncclSuccess, "async error of a healthy communicator", comm);
    // Revoked: later calls fail at once, and the communicator can still be destroyed.
    checks.ExpectCode(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess, "ncclCommRevoke", comm);
    checks.ExpectCode(ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, nullptr), ncclRemoteError,
                      "ncclAllReduce on a revoked comm", comm);
    checks.ExpectContains(LastError(comm), "revoked", "message of a call on a revoked comm");
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    // A destroyed communicator is refused, not dereferenced.
    int count = 0;
    checks.ExpectCode(ncclCommCount(comm, &count), ncclInvalidArgument, "ncclCommCount on a destroyed comm");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace nccl_test
