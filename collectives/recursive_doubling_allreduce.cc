// Recursive-doubling allreduce: the latency algorithm for small buffers.
//
// With p a power of two, round k pairs each rank with the rank whose number differs in
// bit k; the two exchange their whole current buffers and both reduce. After lg p
// rounds every rank holds the full reduction: lg p message latencies instead of the
// ring's 2(p-1), at the price of sending the whole buffer each round (so it is chosen
// for small buffers only). Both partners compute a op b and b op a, which IEEE
// arithmetic makes bitwise equal, so every rank ends with identical bits.
//
// Other p: with pof2 the largest power of two <= p and rem = p - pof2, the first 2*rem
// ranks pair up (2i, 2i+1) before the rounds: the even rank hands its buffer to the odd
// one and sits the rounds out; after them, the odd rank hands it the result.
//
// Each round reduces into the other of two buffers (the receive buffer and a scratch
// buffer), because a rank keeps sending its current buffer while it receives.
#include "collectives/latency_allreduce.h"

#include <vector>

#include "collectives/recursive_doubling_pattern.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

// Recursive doubling among `group` (null: every rank of the communicator, numbered as
// it is), on args' buffers: the group's members call it, everyone else does not.
Status RecursiveDoublingOver(const CollectiveContext& ctx, const RingGroup* group, const CollectiveArgs& args) {
  const int p = group != nullptr ? static_cast<int>(group->ranks.size()) : ctx.nranks;
  const int r = group != nullptr ? group->pos : ctx.rank;
  auto rank_of = [&](int member) { return group != nullptr ? group->ranks[member] : member; };
  const size_t bytes = args.count * args.elem_size;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  if (p == 1) {
    return LocalCopy(ctx, recv, send, bytes);
  }
  const RecursiveDoublingPlan plan = PlanRecursiveDoubling(r, p);
  // The scratch buffer is taken only once a round would reduce into the buffer it sends
  // (in place, or after a round into recv): two ranks out of place never need it, and
  // above Scratch's inline bytes taking it costs a trip to the memory pool.
  Scratch scratch;
  const char* cur = send;
  auto other = [&](const char* c, char** next) {
    if (c != recv) {
      *next = recv;
      return Status::Ok();
    }
    if (scratch.data() == nullptr) TESSERA_RETURN_IF_ERROR(scratch.Allocate(ctx, bytes));
    *next = scratch.data();
    return Status::Ok();
  };
  Link* link = nullptr;
  char* next = nullptr;

  if (plan.fold_partner >= 0) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(rank_of(plan.fold_partner), ctx.exchange.deadline, &link));
    if (plan.new_rank < 0) {
      // Hand our contribution over, then receive the result.
      Transfer t[2] = {Transfer::Send(link, cur, bytes), Transfer::Recv(link, recv, bytes)};
      return Exchange(t, 2, ctx.exchange);
    }
    TESSERA_RETURN_IF_ERROR(other(cur, &next));
    Transfer t = Transfer::RecvReduce(link, next, cur, &args.reducer, bytes);
    TESSERA_RETURN_IF_ERROR(Exchange(&t, 1, ctx.exchange));
    cur = next;
  }
  for (int round = 0; round < plan.rounds; ++round) {
    TESSERA_RETURN_IF_ERROR(
        ctx.links->Get(rank_of(RecursiveDoublingPartner(plan, round)), ctx.exchange.deadline, &link));
    TESSERA_RETURN_IF_ERROR(other(cur, &next));
    Transfer t[2] = {Transfer::Send(link, cur, bytes), Transfer::RecvReduce(link, next, cur, &args.reducer, bytes)};
    TESSERA_RETURN_IF_ERROR(Exchange(t, 2, ctx.exchange));
    cur = next;
  }
  TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv, cur, bytes));
  if (plan.fold_partner >= 0) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(rank_of(plan.fold_partner), ctx.exchange.deadline, &link));
    Transfer t = Transfer::Send(link, recv, bytes);
    TESSERA_RETURN_IF_ERROR(Exchange(&t, 1, ctx.exchange));
  }
  return Status::Ok();
}

Status RecursiveDoublingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return RecursiveDoublingOver(ctx, nullptr, args);
}

// Rounds at distance >= R cross hosts (block placement), all R ranks of a host at once;
// a rank count that is not a power of two adds a whole-buffer fold in and out.
double PredictRecursiveDoublingAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int R = s.per_host, rounds = Log2Floor(s.p), cross = CrossHostRounds(s, rounds);
  double t = 0;
  for (int k = 0; k < rounds; ++k) {
    const int distance = k - (rounds - cross);  // lg of the hosts between partners, when >= 0
    const LinkCost l = distance >= 0 ? AcrossHosts(m, s, R > 0 ? R : 1, XorOut(s, 1 << distance)) : m.intra;
    t += StepSeconds(l, n) + n * m.gamma;
  }
  const LinkCost fold = R > 0 && R % 2 == 0 ? m.intra : SlowestLink(m, s);
  return t + (s.p != (1 << rounds) ? 2 * StepSeconds(fold, n) : 0);
}

}  // namespace tessera
