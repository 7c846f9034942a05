// The collective algorithms other than allreduce (whose several algorithms are chosen
// in algorithms.h). One algorithm per file; each is a schedule of exchanges over the
// links of CollectiveContext and never knows the transport.
#ifndef TESSERA_COLLECTIVES_COLLECTIVES_H_
#define TESSERA_COLLECTIVES_COLLECTIVES_H_

#include "collectives/collective.h"
#include "collectives/grid.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

Status ChainBroadcast(const CollectiveContext& ctx, const CollectiveArgs& args);     // chain_broadcast.cc
Status ChainReduce(const CollectiveContext& ctx, const CollectiveArgs& args);        // chain_reduce.cc
Status RingAllGather(const CollectiveContext& ctx, const CollectiveArgs& args);      // ring_allgather.cc
Status RingReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args);  // ring_reduce_scatter.cc
// The same two collectives along an X x Y grid: a column ring and a row ring (see the
// files). They handle any grid; the communicator takes the flat ring when X or Y is 1.
Status GridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid);      // grid_allgather.cc
Status GridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid);  // grid_reduce_scatter.cc
Status PairwiseAlltoAll(const CollectiveContext& ctx, const CollectiveArgs& args);   // pairwise_alltoall.cc
Status DirectGather(const CollectiveContext& ctx, const CollectiveArgs& args);       // direct_gather.cc
Status DirectScatter(const CollectiveContext& ctx, const CollectiveArgs& args);      // direct_scatter.cc

// The chains over some of the ranks (args.root is a position in the group).
Status ChainBroadcastOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args);
Status ChainReduceOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COLLECTIVES_H_
