// Scatter by direct sends: the root sends every rank its block at once; each rank
// receives one.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"

namespace tessera {

Status DirectScatter(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t block = args.count * args.elem_size;
  Link* link = nullptr;
  if (r != args.root) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(args.root, ctx.exchange.deadline, &link));
    Transfer t = Transfer::Recv(link, args.recv, block);
    return Exchange(&t, 1, ctx.exchange);
  }
  const char* send = static_cast<const char*>(args.send);
  TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, args.recv, send + r * block, block));
  std::vector<Transfer> t;
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(q, ctx.exchange.deadline, &link));
    t.push_back(Transfer::ToCopy(Transfer::Send(link, send + q * block, block)));
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// The root's link carries the p - 1 other blocks, one message each.
double PredictDirectScatter(const CostModel& m, const Shape& s, size_t bytes) {
  const LinkCost slow = SlowestLink(m, s);
  return (s.p - 1) * StepSeconds(slow, static_cast<double>(bytes) / s.p);
}

}  // namespace tessera
