// Allreduce algorithms beyond the flat ring and recursive doubling: 2D torus and
// hierarchical (grid-based, topology-aware) and Rabenseifner (medium buffers).
#ifndef TESSERA_COLLECTIVES_TOPOLOGY_ALLREDUCE_H_
#define TESSERA_COLLECTIVES_TOPOLOGY_ALLREDUCE_H_

#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "collectives/grid.h"

namespace tessera {

// The 2D-torus schedule on `grid` (torus_allreduce.cc).
Status GridAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid);
Status TorusAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);                // ctx.torus_grids
Status HierarchicalAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);         // ctx.host_grid
Status HierarchicalLeaderAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);   // ctx.host_grid
Status HierarchicalDoublingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args); // ctx.host_grid
Status RabenseifnerAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);

// The prediction of GridAllReduce on an X x Y grid of the shape's ranks (rows inside
// hosts where X divides the ranks per host, GridLinksOf).
double PredictGridAllReduce(const CostModel& m, const Shape& s, int X, int Y, size_t bytes);
// The width of the torus grid a call of `bytes` runs on: TESSERA_TORUS's when it forces
// one, else the width of TorusWidths (and the host grid's) whose grid the model predicts
// fastest (the first of equals): a row of one host where the buffer is large and hosts
// few, wider rows where the columns' steps would cost more than the rows' volume.
int TorusWidthFor(const CostModel& m, const Shape& s, size_t bytes);
// Their predictions (cost_model.h), each in the algorithm's file. Torus: where the shape
// has a torus grid; the hierarchical three: on several hosts of equal rank counts.
double PredictTorusAllReduce(const CostModel& m, const Shape& s, size_t bytes);
double PredictHierarchicalAllReduce(const CostModel& m, const Shape& s, size_t bytes);
double PredictHierarchicalLeaderAllReduce(const CostModel& m, const Shape& s, size_t bytes);
double PredictHierarchicalDoublingAllReduce(const CostModel& m, const Shape& s, size_t bytes);
double PredictRabenseifnerAllReduce(const CostModel& m, const Shape& s, size_t bytes);

// The leaders' alpha (CostModel::leaders_alpha) at which hierarchical_leader's
// prediction for `bytes` is `seconds`, as the probe measured a call of it; at least
// kLeastLeadersAlpha. The probe's calls carry kLeadersStepBytes a leaders' ring step,
// and a smaller step costs at least what one of those did (PredictHierarchicalLeader).
constexpr double kLeastLeadersAlpha = 1e-6;
constexpr size_t kLeadersStepBytes = 8 << 10;
double LeadersAlphaOf(const CostModel& m, const Shape& s, size_t bytes, double seconds);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_TOPOLOGY_ALLREDUCE_H_
