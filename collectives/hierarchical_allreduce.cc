// Hierarchical allreduce (Horovod, Jia et al. 2018, UCC cl/hier), three variants.
//
// Bandwidth variant: intra-host reduce-scatter, one inter-host allreduce per local rank
// on its shard (every host's link busy with all its ranks at once), intra-host
// allgather: the 2D-torus schedule (torus_allreduce.cc) on the grid whose rows are the
// hosts. Each host sends 2(H-1)/H of the buffer over the network, against the flat
// ring's 2(p-1)/p.
//
// Leader variants, for small buffers: chain-reduce to each host's first rank, allreduce
// among those leaders, chain-broadcast back inside each host: 2 intra-host chains and
// between them a ring of the H leaders (hierarchical_leader) or recursive doubling
// among them (hierarchical_doubling: lg H steps across, as MPI libraries' two-level
// allreduce for small buffers). Only one rank per host crosses the network, so a host's
// link carries one flow, and its other ranks wait while the leader works.
#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/latency_allreduce.h"
#include "collectives/topology_allreduce.h"

namespace tessera {

Status HierarchicalAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.host_grid == nullptr) return InternalError("hierarchical: the hosts do not form a grid");
  return GridAllReduce(ctx, args, *ctx.host_grid);
}

namespace {

// Reduce to each host's first rank, `among_leaders` on the leaders (args' receive
// buffer, in place), broadcast from each leader inside its host.
template <typename AmongLeaders>
Status ThroughHostLeaders(const CollectiveContext& ctx, const CollectiveArgs& args, AmongLeaders among_leaders) {
  if (ctx.host_grid == nullptr) return InternalError("hierarchical: the hosts do not form a grid");
  const Grid& g = *ctx.host_grid;
  const int r = ctx.rank;
  const RingGroup host{g.rows[g.y[r]], g.x[r]};
  CollectiveArgs step = args;
  step.root = 0;  // the host's first rank leads
  TESSERA_RETURN_IF_ERROR(ChainReduceOver(ctx, host, step).Annotate("reduce to the host leader"));
  if (g.x[r] == 0) {
    const RingGroup leaders{g.cols[0], g.y[r]};
    CollectiveArgs inplace = args;
    inplace.send = args.recv;
    TESSERA_RETURN_IF_ERROR(among_leaders(leaders, inplace).Annotate("allreduce among leaders"));
  }
  step.send = args.recv;
  return ChainBroadcastOver(ctx, host, step).Annotate("broadcast from the host leader");
}

}  // namespace

Status HierarchicalLeaderAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return ThroughHostLeaders(ctx, args, [&](const RingGroup& leaders, const CollectiveArgs& a) {
    char* buf = static_cast<char*>(a.recv);
    return RunRing(ctx, leaders, buf, buf, a.count, a.elem_size, &a.reducer, kRingReduceScatter | kRingAllGather);
  });
}

Status HierarchicalDoublingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return ThroughHostLeaders(ctx, args, [&](const RingGroup& leaders, const CollectiveArgs& a) {
    return RecursiveDoublingOver(ctx, &leaders, a);
  });
}

// The torus schedule on the host grid: rows of R inside hosts, columns of H across,
// the R ranks of a host sharing its link.
double PredictHierarchicalAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  return PredictGridAllReduce(m, s, s.per_host, s.hosts, bytes);
}

namespace {

// A chain reduce and a chain broadcast inside each host (the whole buffer through one
// shared-memory link each, R - 1 steps each).
double HostChainsSeconds(const CostModel& m, int R, double n) {
  return 2 * ((R - 1) * m.intra.alpha + (R > 1 ? n * m.intra.beta : 0)) + (R - 1) * n * m.gamma;
}

}  // namespace

// The host chains, and a ring of the H leaders between them. Where the probe timed the
// leaders' calls (m.leaders_alpha), a ring step of fewer than kLeadersStepBytes costs
// at least what the probe's steps of kLeadersStepBytes did: a smaller step still waits
// as long for its peer's core, which alpha + bytes x beta prices low
// (docs/algorithms.md#leaders-alpha).
double PredictHierarchicalLeaderAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  LinkCost leaders = LeadersLink(m, s);
  leaders.beta = SlowestLink(m, s).beta;  // one flow out of each host, through one NIC
  if (m.leaders_alpha > 0) leaders.floor = std::max(leaders.floor, StepSeconds(leaders, kLeadersStepBytes));
  return HostChainsSeconds(m, s.per_host, n) + RingSeconds(s.hosts, n, leaders, 1.0, m.gamma, true);
}

// The leaders' alpha at which the prediction above is `seconds` (LeadersLink's floor
// aside): what is left of the time after the chains, the reduction and the ring's
// transfers, over the ring's 2(H-1) steps; at least kLeastLeadersAlpha, a send and a
// receive through the kernel. Where the calls ran at their transfers' time the
// remainder is nothing or less; with a smaller least, two hosts' leaders ring (two
// steps of half the buffer) would tie with their recursive doubling (one step of all
// of it) and win by its smaller reduction, though the doubling runs faster.
double LeadersAlphaOf(const CostModel& m, const Shape& s, size_t bytes, double seconds) {
  const double n = static_cast<double>(bytes);
  const int H = s.hosts;
  if (H < 2) return 0;
  const LinkCost transfers_only{0, SlowestLink(m, s).beta};
  const double rest = HostChainsSeconds(m, s.per_host, n) + RingSeconds(H, n, transfers_only, 1.0, m.gamma, true);
  return std::max(kLeastLeadersAlpha, (seconds - rest) / (2.0 * (H - 1)));
}

// The host chains, and recursive doubling among the H leaders between them: lg H
// whole-buffer exchanges, one flow per host link (a fold in and out when H is not a
// power of two). Where the probe timed the leaders' ring calls (m.leaders_alpha), that
// alpha is a ring step's of 8 KiB, and a doubling step's alpha is at most what the
// scaled leaders' link charges a step of nothing (its floor, or its alpha where that is
// more): a creation whose probe solved the leaders' alpha far above the others' would
// otherwise price the doubling out and choose flat recursive doubling, which runs
// slower there (docs/algorithms.md#leaders-alpha).
double PredictHierarchicalDoublingAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int rounds = Log2Floor(s.hosts);
  LinkCost across = LeadersLink(m, s);
  across.alpha = std::min(across.alpha, StepSeconds(ScaledLeadersLink(m, s), 0));
  double t = HostChainsSeconds(m, s.per_host, n);
  for (int k = 0; k < rounds; ++k) {  // one flow out of each host, to the host 2^k away
    across.beta = AcrossHosts(m, s, 1, XorOut(s, 1 << k)).beta;
    t += StepSeconds(across, n) + n * m.gamma;
  }
  across.beta = SlowestLink(m, s).beta;
  return t + (s.hosts != (1 << rounds) ? 2 * StepSeconds(across, n) : 0);
}

}  // namespace tessera
