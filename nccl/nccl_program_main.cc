// An NCCL program as a framework would ship it: written against the CUDA toolkit's
// nccl.h and linked with NVIDIA's libnccl.so.2 (see nccl/BUILD). Run with the drop-in's
// directory first in LD_LIBRARY_PATH, the same binary runs on tessera, unchanged
// (nccl_binary_swap_test.sh). Four ranks as forked processes, on host buffers:
// AllReduce, AllGather, ReduceScatter and Broadcast, each checked exactly against a
// serial reference. Prints one line per collective; exits 0 when every rank passed.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nccl/test_ranks.h"
#include "nccl/test_values.h"

namespace {

using nccl_test::Checks;
using nccl_test::Compare;
using nccl_test::MakeBuffer;
using nccl_test::MoveInput;
using nccl_test::ReductionInput;
using nccl_test::ReductionResult;

constexpr int kRanks = 4;
constexpr size_t kCount = 100000;

std::string RunCollectives(const nccl_test::RankContext& ctx) {
  ncclComm_t comm = nullptr;
  std::string err = nccl_test::InitComm(ctx, &comm);
  if (!err.empty()) return err;
  const int rank = ctx.rank;
  Checks checks;

  std::vector<char> ar =
      MakeBuffer(ncclFloat, kCount, [&](size_t i) { return ReductionInput(ncclFloat, ncclSum, rank, kRanks, i); });
  if (checks.ExpectCode(ncclAllReduce(ar.data(), ar.data(), kCount, ncclFloat, ncclSum, comm, nullptr), ncclSuccess,
                        "ncclAllReduce", comm)) {
    checks.Add(Compare(ncclFloat, ar.data(), kCount,
                       [&](size_t i) { return ReductionResult(ncclFloat, ncclSum, kRanks, i); }, "ncclAllReduce"));
  }

  std::vector<char> ag_send = MakeBuffer(ncclInt32, kCount, [&](size_t i) { return MoveInput(rank, i); });
  std::vector<char> ag_recv(kRanks * ag_send.size());
  if (checks.ExpectCode(ncclAllGather(ag_send.data(), ag_recv.data(), kCount, ncclInt32, comm, nullptr), ncclSuccess,
                        "ncclAllGather", comm)) {
    checks.Add(Compare(ncclInt32, ag_recv.data(), kRanks * kCount,
                       [&](size_t i) { return MoveInput(static_cast<int>(i / kCount), i % kCount); },
                       "ncclAllGather"));
  }

  std::vector<char> rs_send = MakeBuffer(
      ncclDouble, kRanks * kCount, [&](size_t i) { return ReductionInput(ncclDouble, ncclMax, rank, kRanks, i); });
  std::vector<char> rs_recv(kCount * sizeof(double));
  if (checks.ExpectCode(ncclReduceScatter(rs_send.data(), rs_recv.data(), kCount, ncclDouble, ncclMax, comm, nullptr),
                        ncclSuccess, "ncclReduceScatter", comm)) {
    checks.Add(Compare(ncclDouble, rs_recv.data(), kCount,
                       [&](size_t i) { return ReductionResult(ncclDouble, ncclMax, kRanks, rank * kCount + i); },
                       "ncclReduceScatter"));
  }

  std::vector<char> bc = MakeBuffer(ncclBfloat16, kCount, [&](size_t i) { return MoveInput(rank, i); });
  if (checks.ExpectCode(ncclBroadcast(bc.data(), bc.data(), kCount, ncclBfloat16, 2, comm, nullptr), ncclSuccess,
                        "ncclBroadcast", comm)) {
    checks.Add(Compare(ncclBfloat16, bc.data(), kCount, [&](size_t i) { return MoveInput(2, i); }, "ncclBroadcast"));
  }

  checks.ExpectCode(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
  return checks.str();
}

}  // namespace

int main() {
  Dl_info where{};
  dladdr(reinterpret_cast<void*>(&ncclAllReduce), &where);
  int version = 0;
  ncclGetVersion(&version);
  std::printf("ncclAllReduce is from %s (version %d); %d ranks, %zu elements per collective\n",
              where.dli_fname != nullptr ? where.dli_fname : "?", version, kRanks, kCount);
  const std::string failures = nccl_test::RunRanks(kRanks, RunCollectives);
  if (!failures.empty()) {
    std::printf("FAILED:\n%s", failures.c_str());
    return 1;
  }
  std::printf("ncclAllReduce (float32 sum), ncclAllGather (int32), ncclReduceScatter (float64 max), "
              "ncclBroadcast (bfloat16, root 2): correct on all %d ranks\n", kRanks);
  return 0;
}
