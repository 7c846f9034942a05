// Gather by direct sends: every rank sends its block to the root, which receives all
// of them at once into their places.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"

namespace tessera {

Status DirectGather(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t block = args.count * args.elem_size;
  Link* link = nullptr;
  if (r != args.root) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(args.root, ctx.exchange.deadline, &link));
    Transfer t = Transfer::ToCopy(Transfer::Send(link, args.send, block));
    return Exchange(&t, 1, ctx.exchange);
  }
  char* recv = static_cast<char*>(args.recv);
  TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv + r * block, args.send, block));
  std::vector<Transfer> t;
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(q, ctx.exchange.deadline, &link));
    t.push_back(Transfer::Recv(link, recv + q * block, block));
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// The root's link takes the p - 1 other blocks, one message each.
double PredictDirectGather(const CostModel& m, const Shape& s, size_t bytes) {
  const LinkCost slow = SlowestLink(m, s);
  return (s.p - 1) * StepSeconds(slow, static_cast<double>(bytes) / s.p);
}

}  // namespace tessera
