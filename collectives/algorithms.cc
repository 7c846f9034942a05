#include "collectives/algorithms.h"

#include <cstdio>

#include "collectives/recursive_doubling_allreduce.h"
#include "collectives/ring_allreduce.h"
#include "collectives/topology_allreduce.h"

namespace tessera {

const std::vector<AllReduceAlgorithmInfo>& AllReduceAlgorithms() {
  static const auto* table = new std::vector<AllReduceAlgorithmInfo>{
      {AllReduceAlgorithm::kRing, "ring",
       "reduce-scatter then allgather around a ring: bandwidth-optimal, 2(p-1) steps", &RingAllReduce, true},
      {AllReduceAlgorithm::kRecursiveDoubling, "recursive_doubling",
       "lg p rounds of whole-buffer exchanges with rank^2^k: latency-optimal for small buffers",
       &RecursiveDoublingAllReduce},
      {AllReduceAlgorithm::kRabenseifner, "rabenseifner",
       "recursive-halving reduce-scatter + recursive-doubling allgather: 2 lg p steps, ring's volume",
       &RabenseifnerAllReduce},
      {AllReduceAlgorithm::kTorus, "torus",
       "2D torus (Mikami et al.): row reduce-scatter, column allreduce on the shard, row allgather",
       &TorusAllReduce, true},
      {AllReduceAlgorithm::kHierarchical, "hierarchical",
       "intra-host reduce-scatter, inter-host allreduce per local rank, intra-host allgather",
       &HierarchicalAllReduce, true},
      {AllReduceAlgorithm::kHierarchicalLeader, "hierarchical_leader",
       "reduce to each host's leader, allreduce among leaders, broadcast inside each host",
       &HierarchicalLeaderAllReduce, true},
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

Selection SelectAllReduce(const std::string& forced, const CostModel& model, const Shape& shape, size_t bytes) {
  Selection best, best_pipelined;
  std::string predictions;
  for (const auto& a : AllReduceAlgorithms()) {
    const double t = PredictAllReduce(a.id, model, shape, bytes);
    if (t < 0) continue;
    char item[96];
    std::snprintf(item, sizeof(item), "%s%s %.1f us", predictions.empty() ? "" : ", ", a.name, t * 1e6);
    predictions += item;
    if (forced == a.name) {
      Selection s{&a, t, "forced by TESSERA_ALGO"};
      return s;
    }
    if (best.algo == nullptr || t < best.predicted_s) {
      best.algo = &a;
      best.predicted_s = t;
    }
    if (a.pipelined && (best_pipelined.algo == nullptr || t < best_pipelined.predicted_s)) {
      best_pipelined.algo = &a;
      best_pipelined.predicted_s = t;
    }
  }
  std::string note;
  if (best.algo != nullptr && !best.algo->pipelined && best_pipelined.algo != nullptr &&
      best_pipelined.predicted_s <= best.predicted_s * (1 + kPipelinedPreference)) {
    note = "; " + std::string(best_pipelined.algo->name) + " is pipelined and within 5% of " + best.algo->name;
    best = best_pipelined;
  }
  best.reason = (forced == "auto" ? "" : "TESSERA_ALGO=" + forced + " does not apply here; ") + "predicted: " +
                predictions + note;
  return best;
}

}  // namespace tessera
