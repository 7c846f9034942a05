// The collective algorithms other than allreduce's (ring_allreduce.h,
// latency_allreduce.h, topology_allreduce.h). One algorithm per file; each is a
// schedule of exchanges over the links of CollectiveContext and never knows the
// transport, and each file also predicts its schedule's time (cost_model.h). The table
// in algorithms.h registers them all.
#ifndef TESSERA_COLLECTIVES_COLLECTIVES_H_
#define TESSERA_COLLECTIVES_COLLECTIVES_H_

#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "collectives/grid.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

// The schedules: Status Run(ctx, args). Predictions: seconds for a call of `bytes`
// (algorithms.h: PredictedBytes) on the shape, where the schedule applies.
Status ChainBroadcast(const CollectiveContext& ctx, const CollectiveArgs& args);  // chain_broadcast.cc
double PredictChainBroadcast(const CostModel& m, const Shape& s, size_t bytes);
Status ChainReduce(const CollectiveContext& ctx, const CollectiveArgs& args);  // chain_reduce.cc
double PredictChainReduce(const CostModel& m, const Shape& s, size_t bytes);
Status RingAllGather(const CollectiveContext& ctx, const CollectiveArgs& args);  // ring_allgather.cc
double PredictRingAllGather(const CostModel& m, const Shape& s, size_t bytes);
Status RingReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args);  // ring_reduce_scatter.cc
double PredictRingReduceScatter(const CostModel& m, const Shape& s, size_t bytes);

// The same two collectives along an X x Y grid, a column ring and a row ring
// (grid_allgather.cc, grid_reduce_scatter.cc): on ctx.host_grid or the default torus
// grid (TESSERA_TORUS's, else the host grid). Where that grid is missing or has X or Y 1 they run the flat ring; their predictions need
// X > 1 and Y > 1. The grid's rows are inside hosts when X divides the ranks per host,
// as for the torus allreduce.
Status HostGridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args);
Status TorusGridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args);
double PredictHostGridAllGather(const CostModel& m, const Shape& s, size_t bytes);
double PredictTorusGridAllGather(const CostModel& m, const Shape& s, size_t bytes);
Status HostGridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args);
Status TorusGridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args);
double PredictHostGridReduceScatter(const CostModel& m, const Shape& s, size_t bytes);
double PredictTorusGridReduceScatter(const CostModel& m, const Shape& s, size_t bytes);

Status PairwiseAlltoAll(const CollectiveContext& ctx, const CollectiveArgs& args);  // pairwise_alltoall.cc
double PredictPairwiseAlltoAll(const CostModel& m, const Shape& s, size_t bytes);
Status DirectGather(const CollectiveContext& ctx, const CollectiveArgs& args);  // direct_gather.cc
double PredictDirectGather(const CostModel& m, const Shape& s, size_t bytes);
Status DirectScatter(const CollectiveContext& ctx, const CollectiveArgs& args);  // direct_scatter.cc
double PredictDirectScatter(const CostModel& m, const Shape& s, size_t bytes);

// The chains over some of the ranks (args.root is a position in the group).
Status ChainBroadcastOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args);
Status ChainReduceOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COLLECTIVES_H_
