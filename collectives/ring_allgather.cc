// Ring allgather.
//
// Rank r first places its own block at offset r (unless already there: in place), then
// for p - 1 steps sends a block to its right neighbour and receives one from its left,
// forwarding each received block as it arrives (sends gated on the previous receive).
// Every rank sends and receives (p-1)/p of the result, the bandwidth lower bound.
#include <vector>

#include "collectives/collectives.h"
#include "collectives/ring_pattern.h"

namespace tessera {

Status RingAllGather(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t block = args.count * args.elem_size;
  char* recv = static_cast<char*>(args.recv);
  TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv + r * block, args.send, block));
  if (p == 1) return Status::Ok();
  Link* right = nullptr;
  Link* left = nullptr;
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingRight(r, p), ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingLeft(r, p), ctx.exchange.deadline, &left));
  std::vector<Transfer> t;
  for (int s = 0; s < p - 1; ++s) {
    const int out = ((r - s) % p + p) % p, in = ((r - s - 1) % p + p) % p;
    if (s == 0) {
      t.push_back(Transfer::ToCopy(Transfer::Send(right, args.send, block)));
    } else {
      t.push_back(Transfer::ToCopy(Transfer::SendAfter(right, recv + out * block, block, static_cast<int>(t.size()) - 1)));
    }
    t.push_back(Transfer::Recv(left, recv + in * block, block));
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// p - 1 steps of one block, each limited by the slowest link the ring crosses.
double PredictRingAllGather(const CostModel& m, const Shape& s, size_t bytes) {
  if (s.p <= 1) return 0;
  const LinkCost slow = SlowestLink(m, s);
  const double block = static_cast<double>(bytes) / s.p;
  return (s.p - 1) * StepSeconds(slow, block);
}

}  // namespace tessera
