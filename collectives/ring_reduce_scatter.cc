// Ring reduce-scatter.
//
// The send buffer holds p blocks; rank r must end with block r reduced over all ranks.
// At step s rank r sends its partial of block (r - s - 1) to the right and receives the
// left neighbour's partial of block (r - s - 2), reduces it with its own contribution
// and forwards it at the next step (gated, so pieces move on as soon as reduced). After
// p - 1 steps the last reduction lands in the receive buffer. Partials of blocks that
// are not this rank's live in a scratch buffer, one block per step, so a block being
// forwarded is never overwritten by the next one arriving.
#include <vector>

#include "collectives/collectives.h"
#include "collectives/ring_pattern.h"

namespace tessera {

Status RingReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t block = args.count * args.elem_size;
  const char* send = static_cast<const char*>(args.send);
  auto blk = [&](int b) { return ((b % p) + p) % p; };
  if (p == 1) {
    return LocalCopy(ctx, args.recv, args.send, block);
  }
  Link* right = nullptr;
  Link* left = nullptr;
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingRight(r, p), ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingLeft(r, p), ctx.exchange.deadline, &left));
  Scratch scratch;
  TESSERA_RETURN_IF_ERROR(scratch.Allocate(ctx, static_cast<size_t>(p - 2) * block));
  std::vector<Transfer> t;
  const char* forward = send + blk(r - 1) * block;  // step 0 sends our own contribution
  for (int s = 0; s < p - 1; ++s) {
    const int in = blk(r - s - 2);
    if (s == 0) {
      t.push_back(Transfer::Send(right, forward, block));
    } else {
      t.push_back(Transfer::SendAfter(right, forward, block, static_cast<int>(t.size()) - 1));
    }
    char* dst = s == p - 2 ? static_cast<char*>(args.recv) : scratch.data() + s * block;
    t.push_back(Transfer::RecvReduce(left, dst, send + in * block, &args.reducer, block));
    forward = dst;
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// p - 1 steps of one block, each limited by the slowest link the ring crosses, and p - 1
// blocks reduced.
double PredictRingReduceScatter(const CostModel& m, const Shape& s, size_t bytes) {
  if (s.p <= 1) return 0;
  const LinkCost slow = SlowestLink(m, s);
  const double block = static_cast<double>(bytes) / s.p;
  return (s.p - 1) * StepSeconds(slow, block) + (s.p - 1) * block * m.gamma;
}

}  // namespace tessera
