// Rabenseifner's allreduce: recursive-halving reduce-scatter, then recursive-doubling
// allgather. 2 lg p message latencies (like recursive doubling, twice) but only
// 2(p-1)/p of the buffer sent per rank (like the ring): the algorithm of choice for
// medium buffers.
//
// Reduce-scatter: in each round a rank and its partner split the region they both hold
// in two halves; each sends the half the other keeps and reduces the half it keeps with
// what arrives. After lg p rounds each rank holds a 1/p region fully reduced.
// Allgather: the same pairs in reverse order swap their regions until everyone holds
// everything. The nearest partners go first (HalvingOrder): those that share a host,
// then the hosts nearest in order, so the halves that cross hosts are the small ones
// and the largest of those stay inside racks: on 4 hosts x 2 ranks a rank sends 3/8 of
// the buffer across hosts per phase, where the classic order (largest distance first)
// sends 3/4; on ABCI's racks of 34 hosts the largest half that leaves a rack is 1/64 of
// the buffer per GPU, not 1/8. Non-power-of-two rank counts fold the first
// 2*rem ranks in pairs before and unfold after, as recursive_doubling_allreduce.cc.
#include <vector>

#include "collectives/grid.h"
#include "collectives/recursive_doubling_pattern.h"
#include "collectives/topology_allreduce.h"

namespace tessera {

Status RabenseifnerAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t es = args.elem_size;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  const size_t bytes = args.count * es;
  if (p == 1) {
    return LocalCopy(ctx, recv, send, bytes);
  }
  const RecursiveDoublingPlan plan = PlanRecursiveDoubling(r, p);
  Link* link = nullptr;
  const char* cur = send;  // where this rank's current partial sums are
  if (plan.fold_partner >= 0) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(plan.fold_partner, ctx.exchange.deadline, &link));
    if (plan.new_rank < 0) {
      Transfer t[2] = {Transfer::Send(link, send, bytes), Transfer::Recv(link, recv, bytes)};
      return Exchange(t, 2, ctx.exchange).Annotate("fold");
    }
    Transfer t = Transfer::RecvReduce(link, recv, send, &args.reducer, bytes);
    TESSERA_RETURN_IF_ERROR(Exchange(&t, 1, ctx.exchange).Annotate("fold"));
    cur = recv;
  }
  // Reduce-scatter by recursive halving; regions are element ranges [lo, hi).
  struct Region {
    size_t lo, hi;
  };
  std::vector<Region> kept_before;  // the region held before each round, for the allgather
  Region mine{0, args.count};
  const std::vector<int> order = HalvingOrder(plan, ctx.host_grid ? &ctx.host_grid->y : nullptr);
  for (int step = 0; step < plan.rounds; ++step) {
    const int round = order[step];
    const int partner_new = plan.new_rank ^ (1 << round);
    TESSERA_RETURN_IF_ERROR(
        ctx.links->Get(RecursiveDoublingRealRank(plan, partner_new), ctx.exchange.deadline, &link));
    const size_t mid = mine.lo + (mine.hi - mine.lo) / 2;
    const bool lower = plan.new_rank < partner_new;
    const Region keep = lower ? Region{mine.lo, mid} : Region{mid, mine.hi};
    const Region give = lower ? Region{mid, mine.hi} : Region{mine.lo, mid};
    Transfer t[2] = {
        Transfer::Send(link, cur + give.lo * es, (give.hi - give.lo) * es),
        Transfer::RecvReduce(link, recv + keep.lo * es, cur + keep.lo * es, &args.reducer, (keep.hi - keep.lo) * es)};
    TESSERA_RETURN_IF_ERROR(Exchange(t, 2, ctx.exchange).Annotate("halving round"));
    kept_before.push_back(mine);
    mine = keep;
    cur = recv;
  }
  // Allgather by recursive doubling: undo the halving, swapping regions with the same
  // partners in reverse order.
  for (int step = plan.rounds - 1; step >= 0; --step) {
    const int partner_new = plan.new_rank ^ (1 << order[step]);
    TESSERA_RETURN_IF_ERROR(
        ctx.links->Get(RecursiveDoublingRealRank(plan, partner_new), ctx.exchange.deadline, &link));
    const Region parent = kept_before[step];
    const Region other = mine.lo == parent.lo ? Region{mine.hi, parent.hi} : Region{parent.lo, mine.lo};
    Transfer t[2] = {Transfer::Send(link, recv + mine.lo * es, (mine.hi - mine.lo) * es),
                     Transfer::Recv(link, recv + other.lo * es, (other.hi - other.lo) * es)};
    TESSERA_RETURN_IF_ERROR(Exchange(t, 2, ctx.exchange).Annotate("doubling round"));
    mine = parent;
  }
  if (plan.fold_partner >= 0) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(plan.fold_partner, ctx.exchange.deadline, &link));
    Transfer t = Transfer::Send(link, recv, bytes);
    TESSERA_RETURN_IF_ERROR(Exchange(&t, 1, ctx.exchange).Annotate("unfold"));
  }
  return Status::Ok();
}

// Halving, nearest first: the rounds inside hosts, then across hosts at host distance
// 1, 2, 4, ...: every local rank's flow at once (R flows out of each host), the part
// that leaves racks growing with the distance (XorOut) as the halves shrink. A rank
// count that is not a power of two adds a whole-buffer fold in and out between
// neighbouring ranks (inside a host when hosts hold an even number).
double PredictRabenseifnerAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const int R = s.per_host, rounds = Log2Floor(s.p), cross = CrossHostRounds(s, rounds);
  const double n = static_cast<double>(bytes);
  double t = 0, part = n;
  for (int k = 0; k < rounds; ++k) {
    part /= 2;
    const int distance = k - (rounds - cross);  // lg of the hosts between partners, when >= 0
    const LinkCost l = distance >= 0 ? AcrossHosts(m, s, R > 0 ? R : 1, XorOut(s, 1 << distance)) : m.intra;
    t += 2 * StepSeconds(l, part) + part * m.gamma;
  }
  const LinkCost fold = R > 0 && R % 2 == 0 ? m.intra : SlowestLink(m, s);
  return t + (s.p != (1 << rounds) ? 2 * StepSeconds(fold, n) : 0);
}

}  // namespace tessera
