// Deterministic reductions (TESSERA_DETERMINISTIC=1, docs/semantics.md#deterministic-mode):
// the policy around the algorithms that makes a float sum the same bits whatever the
// algorithm, layout, transport, chunk sizes and rank count.
//
// A call runs in three steps, each an ordinary collective of the algorithm table:
//  1. Every rank finds the key of each block of kGridBlock elements in its contributions
//     (collectives/fixed_point.h), and an int32 max-allreduce agrees on them; its last
//     entry carries the most contributions any rank has, checked against
//     kMaxGridContributions.
//  2. Segment by segment (TESSERA_DETERMINISTIC_SEGMENT_BYTES of grid values, so that a
//     segment stays in cache from one step to the next), the contributions go on the
//     grid (several parts of a rank add there, exactly) and the collective runs on the
//     grid values with a float sum that is exact. An allreduce runs either as an
//     allreduce on the grid, or as a reduce-scatter on the grid whose blocks come back
//     to the call's type before an allgather of that type (fewer bytes: 1.5x float32's
//     for float32, 0.75x for bfloat16); TESSERA_ALGO's ring, torus and hierarchical
//     force the second, its other names the first, and auto asks the cost model.
//  3. The grid sum comes back rounded once, and avg divides it by the number of ranks
//     (each piece as it is finished, while it is in cache).
// A tesseraAllReduce (not ...Parts) may instead skip the agreement, as every rank that
// sums an element then sees all of its contributions:
//  - gather: an allgather of the inputs, every rank summing all of them on the grid (one
//    collective: small sizes);
//  - exchange: an alltoall hands rank r block r (whole grid blocks) of every input, each
//    rank sums its block on the grid, and an allgather of the call's type assembles the
//    result: the default mode's bytes, no grid values on the wire, 1/p of the grid work.
// Auto takes the plan the cost model finds cheapest (TESSERA_DETERMINISTIC_PLAN forces
// one). Whichever way a call runs, the integers add exactly, so every rank of every
// layout ends with the same bits.
#ifndef TESSERA_COMM_DETERMINISTIC_REDUCTION_H_
#define TESSERA_COMM_DETERMINISTIC_REDUCTION_H_

#include <functional>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "collectives/algorithms.h"
#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "comm/elementwise_ops.h"
#include "comm/operation.h"

namespace tessera {

// What a deterministic reduction runs with: who this rank is, the settings and model its
// choices read, and how a collective runs (the executor's dispatch).
struct GridRunner {
  int rank = 0;
  int nranks = 1;
  const Settings* settings = nullptr;  // TESSERA_ALGO, TESSERA_DETERMINISTIC_SEGMENT_BYTES and _PLAN
  const CostModel* model = nullptr;
  const Shape* shape = nullptr;
  // Runs collective `c` through the algorithm table, as the executor runs any call.
  std::function<Status(OpKind c, const CollectiveArgs& args)> dispatch;
};

// Whether deterministic mode changes how `op` runs: an allreduce, reduce or
// reduce-scatter of float16, bfloat16, float32 or float64 with sum, avg or a PreMulSum
// operator (`custom`). Integer types, max and min are order-independent already; prod is
// not covered.
bool ReducesOnGrid(const Operation& op, RedOp base, bool custom);

// Runs `op` on the grid. `inputs` are this rank's contributions (the send buffer or the
// parts, PreMulSum's already scaled), each of the call's input elements (nranks blocks
// for a reduce-scatter); `base` is sum or avg. Host memory only.
Status RunGridReduction(const Operation& op, RedOp base, const std::vector<const void*>& inputs,
                        const GridRunner& runner, const CollectiveContext& ctx, ElementwiseOps& elementwise);

}  // namespace tessera

#endif  // TESSERA_COMM_DETERMINISTIC_REDUCTION_H_
