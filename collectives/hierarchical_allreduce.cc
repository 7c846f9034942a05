// Hierarchical allreduce (Horovod, Jia et al. 2018, UCC cl/hier), two variants.
//
// Bandwidth variant: intra-host reduce-scatter, one inter-host allreduce per local rank
// on its shard (every host's link busy with all its ranks at once), intra-host
// allgather: the 2D-torus schedule (torus_allreduce.cc) on the grid whose rows are the
// hosts. Each host sends 2(H-1)/H of the buffer over the network, against the flat
// ring's 2(p-1)/p.
//
// Leader variant, for small buffers: chain-reduce to each host's first rank, allreduce
// among those leaders, chain-broadcast back inside each host: 2 intra-host chains and
// one inter-host ring of H, instead of 2(p-1) steps.
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/topology_allreduce.h"

namespace tessera {

Status HierarchicalAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.host_grid == nullptr) return InternalError("hierarchical: the hosts do not form a grid");
  return GridAllReduce(ctx, args, *ctx.host_grid);
}

Status HierarchicalLeaderAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.host_grid == nullptr) return InternalError("hierarchical: the hosts do not form a grid");
  const Grid& g = *ctx.host_grid;
  const int r = ctx.rank;
  const RingGroup host{g.rows[g.y[r]], g.x[r]};
  CollectiveArgs step = args;
  step.root = 0;  // the host's first rank leads
  TESSERA_RETURN_IF_ERROR(ChainReduceOver(ctx, host, step).Annotate("reduce to the host leader"));
  if (g.x[r] == 0) {
    const RingGroup leaders{g.cols[0], g.y[r]};
    TESSERA_RETURN_IF_ERROR(RunRing(ctx, leaders, static_cast<char*>(args.recv), static_cast<char*>(args.recv),
                                    args.count, args.elem_size, &args.reducer, kRingReduceScatter | kRingAllGather)
                                .Annotate("allreduce among leaders"));
  }
  step.send = args.recv;
  return ChainBroadcastOver(ctx, host, step).Annotate("broadcast from the host leader");
}

// A ring inside each host, then R rings of H across hosts on 1/R of the buffer each,
// all R sharing the host's link.
double PredictHierarchicalAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int H = s.hosts, R = s.per_host;
  return RingSeconds(R, n, m.intra, 1.0, m.gamma, true) + RingSeconds(H, n / R, m.inter, R, m.gamma, true);
}

// A chain reduce and a chain broadcast inside each host (the whole buffer through one
// shared-memory link each), a ring of the H leaders between them.
double PredictHierarchicalLeaderAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int H = s.hosts, R = s.per_host;
  return 2 * ((R - 1) * m.intra.alpha + (R > 1 ? n * m.intra.beta : 0)) + (R - 1) * n * m.gamma +
         RingSeconds(H, n, m.inter, 1.0, m.gamma, true);
}

}  // namespace tessera
