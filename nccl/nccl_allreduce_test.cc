// ncclAllReduce through the drop-in libnccl.so.2, written only against the CUDA
// toolkit's nccl.h and linked only with the drop-in: 4 ranks as forked processes, host
// buffers, every reducible data type x every built-in operator x out-of-place and
// in-place, 16 MiB cases, and tessera's timeout code as nccl.h sees it.
#include <nccl.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nccl/test_ranks.h"
#include "nccl/test_values.h"

namespace nccl_test {
namespace {

constexpr int kRanks = 4;

// One allreduce of `count` elements, out-of-place or in place, checked against the serial
// reference.
std::string CheckAllReduce(ncclComm_t comm, int rank, ncclDataType_t type, ncclRedOp_t op, size_t count,
                           bool in_place) {
  const std::string what = std::string("ncclAllReduce ") + OpName(op) + (in_place ? " in place" : "") +
                           " count " + std::to_string(count);
  std::vector<char> send =
      MakeBuffer(type, count, [&](size_t i) { return ReductionInput(type, op, rank, kRanks, i); });
  std::vector<char> recv = in_place ? send : std::vector<char>(send.size(), 0x5a);
  const void* sendbuff = in_place ? recv.data() : send.data();
  const ncclResult_t r = ncclAllReduce(sendbuff, recv.data(), count, type, op, comm, nullptr);
  Checks checks;
  if (!checks.ExpectCode(r, ncclSuccess, what + " (" + TypeName(type) + ")", comm)) return checks.str();
  return Compare(type, recv.data(), count, [&](size_t i) { return ReductionResult(type, op, kRanks, i); }, what);
}

TEST(NcclAllReduce, EveryTypeAndOperatorOnFourRanks) {
  const std::string failures = RunRanks(kRanks, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    Checks checks;
    int count = -1, rank = -1;
    checks.ExpectCode(ncclCommCount(comm, &count), ncclSuccess, "ncclCommCount", comm);
    checks.ExpectCode(ncclCommUserRank(comm, &rank), ncclSuccess, "ncclCommUserRank", comm);
    checks.Expect(count == kRanks && rank == ctx.rank, "count/rank " + std::to_string(count) + "/" +
                                                           std::to_string(rank));
    for (ncclDataType_t type : ReducibleTypes()) {
      for (ncclRedOp_t op : BuiltinOps()) {
        for (bool in_place : {false, true}) checks.Add(CheckAllReduce(comm, ctx.rank, type, op, 1003, in_place));
      }
    }
    // count 0 is a valid no-op; the default-stream names are accepted on a CPU build.
    checks.ExpectCode(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, comm, nullptr), ncclSuccess,
                      "ncclAllReduce count 0", comm);
    float one = 1;
    checks.ExpectCode(ncclAllReduce(&one, &one, 1, ncclFloat, ncclSum, comm, cudaStreamPerThread), ncclSuccess,
                      "ncclAllReduce on cudaStreamPerThread", comm);
    checks.Expect(one == kRanks, "allreduce of 1 on cudaStreamPerThread gave " + std::to_string(one));
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

TEST(NcclAllReduce, SixteenMiBOfFloatsOnFourRanks) {
  const std::string failures = RunRanks(kRanks, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    std::string err = InitComm(ctx, &comm);
    if (!err.empty()) return err;
    Checks checks;
    checks.Add(CheckAllReduce(comm, ctx.rank, ncclFloat32, ncclSum, (16u << 20) / 4, false));
    checks.Add(CheckAllReduce(comm, ctx.rank, ncclFloat64, ncclMax, (16u << 20) / 8, true));
    checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
    return checks.str();
  });
  EXPECT_EQ(failures, "");
}

// Rank 1 of 2 joins but never calls the allreduce (it waits at a barrier until rank 0 is
// done), so rank 0 waits for it until TESSERA_TIMEOUT_MS. tessera answers tesseraTimeout,
// which nccl.h does not have: the caller sees ncclRemoteError, and ncclGetLastError says
// it was a timeout, followed by tessera's own message. (Two ranks, so that the waiting
// rank waits on the silent one itself, not on a peer that failed first.)
TEST(NcclAllReduce, TesseraTimeoutIsRemoteErrorWithTheMessage) {
  RankOptions opts;
  opts.env["TESSERA_TIMEOUT_MS"] = "4000";
  const std::string failures = RunRanks(
      2,
      [](const RankContext& ctx) {
        ncclComm_t comm = nullptr;
        std::string err = InitComm(ctx, &comm);
        if (!err.empty()) return err;
        Checks checks;
        if (ctx.rank == 0) {
          std::vector<float> buf(1024, 1.0f);
          checks.ExpectCode(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr),
                            ncclRemoteError, "ncclAllReduce with a silent rank", comm);
          const std::string message = LastError(comm);
          checks.Expect(message.rfind("timeout (tesseraTimeout, returned as ncclRemoteError): ", 0) == 0,
                        "ncclGetLastError does not start with the timeout: " + message);
          checks.ExpectContains(message, "timed out after 4000 ms", "ncclGetLastError");
          checks.ExpectContains(message, "rank 1", "ncclGetLastError");
          ncclResult_t async = ncclSuccess;
          checks.ExpectCode(ncclCommGetAsyncError(comm, &async), ncclSuccess, "ncclCommGetAsyncError", comm);
          checks.ExpectCode(async, ncclRemoteError, "the async error", comm);
        }
        checks.Expect(ArriveAndWait(0, 2, 30000), "barrier after the timeout");
        checks.ExpectCode(ncclCommAbort(comm), ncclSuccess, "ncclCommAbort");
        return checks.str();
      },
      opts);
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace nccl_test
