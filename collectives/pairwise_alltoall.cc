// All-to-all by direct exchange: every rank posts its p - 1 sends and p - 1 receives at
// once, ordered by distance (to r+1 and from r-1 first, ...) so that at any moment the
// ranks work on disjoint pairs; the exchange engine progresses them all together.
#include <vector>

#include "collectives/collectives.h"

namespace tessera {

Status PairwiseAlltoAll(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t block = args.count * args.elem_size;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  if (!args.skip_own_block) TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv + r * block, send + r * block, block));
  std::vector<Transfer> t;
  for (int d = 1; d < p; ++d) {
    const int to = (r + d) % p, from = (r - d + p) % p;
    Link* out = nullptr;
    Link* in = nullptr;
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(to, ctx.exchange.deadline, &out));
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(from, ctx.exchange.deadline, &in));
    t.push_back(Transfer::ToCopy(Transfer::Send(out, send + to * block, block)));
    t.push_back(Transfer::Recv(in, recv + from * block, block));
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// p - 1 blocks out of every rank through its slowest link, one message each.
double PredictPairwiseAlltoAll(const CostModel& m, const Shape& s, size_t bytes) {
  const LinkCost slow = SlowestLink(m, s);
  return (s.p - 1) * StepSeconds(slow, static_cast<double>(bytes) / s.p);
}

}  // namespace tessera
