// Pipelined chain broadcast.
//
// The ranks form a chain starting at the root (root, root+1, ..., root-1). Each rank
// receives the buffer from its predecessor and forwards it to its successor as it
// arrives, slot by slot or chunk by chunk (the send is gated on the receive), so every
// link carries the buffer once and the time is about n/bandwidth plus (p-1) chunk
// latencies. The root sends straight from its send buffer.
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

Status ChainBroadcast(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return ChainBroadcastOver(ctx, WholeRing(ctx), args);
}

Status ChainBroadcastOver(const CollectiveContext& ctx, const RingGroup& group, const CollectiveArgs& args) {
  const int p = static_cast<int>(group.ranks.size()), r = group.pos;
  const size_t bytes = args.count * args.elem_size;
  const int pos = (r - args.root + p) % p;  // place in the chain
  char* recv = static_cast<char*>(args.recv);
  if (pos == 0) TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv, args.send, bytes));
  if (p == 1) return Status::Ok();
  Transfer t[2];
  size_t n = 0;
  Link* link = nullptr;
  if (pos > 0) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[(r - 1 + p) % p], ctx.exchange.deadline, &link));
    t[n++] = Transfer::Recv(link, recv, bytes);
  }
  if (pos < p - 1) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[(r + 1) % p], ctx.exchange.deadline, &link));
    t[n++] = Transfer::ToCopy(pos == 0 ? Transfer::Send(link, args.send, bytes) : Transfer::SendAfter(link, recv, bytes, 0));
  }
  return Exchange(t, n, ctx.exchange);
}

// The pipeline fills in p - 1 hops (each an empty step: alpha, or the link's floor),
// then the buffer streams through the slowest link.
double PredictChainBroadcast(const CostModel& m, const Shape& s, size_t bytes) {
  if (s.p <= 1) return 0;
  const LinkCost slow = SlowestLink(m, s);
  return (s.p - 1) * StepSeconds(slow, 0) + static_cast<double>(bytes) * slow.beta;
}

}  // namespace tessera
