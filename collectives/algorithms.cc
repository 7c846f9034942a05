#include "collectives/algorithms.h"

#include "collectives/recursive_doubling_allreduce.h"
#include "collectives/ring_allreduce.h"

namespace tessera {
namespace {

// Below this size the latency of the ring's 2(p-1) steps dominates and recursive
// doubling's lg p rounds win (measured on 2-8 ranks on one host: docs/performance.md).
// The topology issue replaces this rule with a cost model.
constexpr size_t kRecursiveDoublingMaxBytes = 8192;

}  // namespace

const std::vector<AllReduceAlgorithmInfo>& AllReduceAlgorithms() {
  static const auto* table = new std::vector<AllReduceAlgorithmInfo>{
      {AllReduceAlgorithm::kRing, "ring",
       "reduce-scatter then allgather around a ring: bandwidth-optimal, 2(p-1) steps", &RingAllReduce},
      {AllReduceAlgorithm::kRecursiveDoubling, "recursive_doubling",
       "lg p rounds of whole-buffer exchanges with rank^2^k: latency-optimal for small buffers",
       &RecursiveDoublingAllReduce},
  };
  return *table;
}

Status CheckAlgorithmName(const std::string& name) {
  if (name == "auto") return Status::Ok();
  std::string names = "auto";
  for (const auto& a : AllReduceAlgorithms()) {
    if (name == a.name) return Status::Ok();
    names += std::string(", ") + a.name;
  }
  return InvalidArgument("TESSERA_ALGO='" + name + "' is not one of: " + names);
}

const AllReduceAlgorithmInfo& SelectAllReduce(const std::string& forced, size_t bytes, int nranks) {
  const auto& table = AllReduceAlgorithms();
  for (const auto& a : table) {
    if (forced == a.name) return a;
  }
  (void)nranks;
  return bytes <= kRecursiveDoublingMaxBytes ? table[1] : table[0];
}

}  // namespace tessera
