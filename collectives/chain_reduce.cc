// Pipelined chain reduce.
//
// The ranks form a chain ending at the root (root+1, root+2, ..., root). The first rank
// sends its buffer; each next rank reduces what arrives with its own contribution and
// forwards the partial result as it is produced (the send is gated on the reducing
// receive); the root reduces the last partial into its receive buffer. Every link
// carries the buffer once.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

Status ChainReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return ChainReduceOver(ctx, WholeRing(ctx), args);
}

Status ChainReduceOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args) {
  const int p = static_cast<int>(group.ranks.size()), r = group.pos;
  const size_t bytes = args.count * args.elem_size;
  const int pos = (r - args.root - 1 + 2 * p) % p;  // place in the chain; the root is last
  if (p == 1) {
    return LocalCopy(ctx, args.recv, args.send, bytes);
  }
  Link* prev = nullptr;
  Link* next = nullptr;
  if (pos > 0) TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[(r - 1 + p) % p], ctx.exchange.deadline, &prev));
  if (pos < p - 1) TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[(r + 1) % p], ctx.exchange.deadline, &next));
  if (pos == 0) {
    Transfer t = Transfer::Send(next, args.send, bytes);
    return Exchange(&t, 1, ctx.exchange);
  }
  if (pos == p - 1) {  // the root
    Transfer t = Transfer::RecvReduce(prev, args.recv, args.send, &args.reducer, bytes);
    return Exchange(&t, 1, ctx.exchange);
  }
  Scratch partial;
  TESSERA_RETURN_IF_ERROR(partial.Allocate(ctx, bytes));
  Transfer t[2] = {Transfer::RecvReduce(prev, partial.data(), args.send, &args.reducer, bytes),
                   Transfer::SendAfter(next, partial.data(), bytes, 0)};
  return Exchange(t, 2, ctx.exchange);
}

// As the chain broadcast, each rank reducing the buffer as it streams through.
double PredictChainReduce(const CostModel& m, const Shape& s, size_t bytes) {
  if (s.p <= 1) return 0;
  const LinkCost slow = SlowestLink(m, s);
  return (s.p - 1) * StepSeconds(slow, 0) + static_cast<double>(bytes) * (slow.beta + m.gamma);
}

}  // namespace tessera
