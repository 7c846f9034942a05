// The allreduce algorithms, registered in one table {id, name, description}, and the
// choice among them: TESSERA_ALGO forces one by name; "auto" asks the cost model
// (cost_model.h) for the fastest that applies to the communicator's shape.
#ifndef TESSERA_COLLECTIVES_ALGORITHMS_H_
#define TESSERA_COLLECTIVES_ALGORITHMS_H_

#include <string>
#include <vector>

#include "collectives/collective.h"
#include "collectives/cost_model.h"

namespace tessera {

enum class AllReduceAlgorithm { kRing, kRecursiveDoubling, kRabenseifner, kTorus, kHierarchical, kHierarchicalLeader };

struct AllReduceAlgorithmInfo {
  AllReduceAlgorithm id;
  const char* name;
  const char* description;
  Status (*run)(const CollectiveContext& ctx, const CollectiveArgs& args);
  // Whether the schedule streams chunks from step to step (the ring-based ones), rather
  // than finishing each round before the next starts (recursive doubling, Rabenseifner).
  bool pipelined = false;
};

// When a pipelined schedule's prediction is within this fraction of the best one, it is
// chosen instead: the model adds step times as if nothing overlapped, which favours
// round-based schedules. On 4x2 emulated hosts Rabenseifner was predicted 0.4-3% faster
// than the torus at 2-16 MiB and measured 15-20% slower.
constexpr double kPipelinedPreference = 0.05;

const std::vector<AllReduceAlgorithmInfo>& AllReduceAlgorithms();

// "auto" or a name from the table; InvalidArgument listing the names otherwise.
Status CheckAlgorithmName(const std::string& name);

struct Selection {
  const AllReduceAlgorithmInfo* algo = nullptr;
  double predicted_s = -1;  // the model's prediction for the chosen algorithm
  std::string reason;       // "forced", or the predictions of every candidate
};

// The algorithm for `bytes`: the smallest prediction, or a pipelined schedule within
// kPipelinedPreference of it. A forced name that does not apply to the shape falls back
// to the model's choice (the reason says so).
Selection SelectAllReduce(const std::string& forced, const CostModel& model, const Shape& shape, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_ALGORITHMS_H_
