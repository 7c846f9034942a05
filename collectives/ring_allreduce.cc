// Ring allreduce.
//
// The p ranks form a ring; the buffer is cut into p blocks (ring_pattern.h). In the
// reduce-scatter phase, at step s every rank sends one block to its right neighbour and
// receives another from its left, reducing it with its own contribution; after p - 1
// steps each rank holds one block fully reduced. In the allgather phase, p - 1 more
// steps pass the reduced blocks around the ring until every rank has all of them.
// Every rank sends and receives 2(p-1)/p of the buffer, the bandwidth lower bound.
//
// No copy is made up front for an out-of-place call: the first reduce-scatter step
// reads the send buffer directly and each received block is reduced from the send
// buffer into the receive buffer, so the send buffer is only ever read.
//
// All 2(p-1) steps run as one exchange, pipelined: the send of step k is gated on the
// receive of step k-1 (the block it forwards), so a rank forwards each slot or chunk as
// soon as it has reduced it, and no step waits for the previous one to drain.
#include "collectives/ring_allreduce.h"

#include <numeric>
#include <vector>

#include "collectives/ring_pattern.h"

namespace tessera {

Status RunRing(const CollectiveContext& ctx, const RingGroup& group, const char* send, char* recv, size_t count,
               size_t es, const Reducer* reducer, int phases) {
  const int p = static_cast<int>(group.ranks.size()), r = group.pos;
  if (p == 1 || count == 0) {
    return LocalCopy(ctx, recv, send, count * es);
  }
  Link* right = nullptr;
  Link* left = nullptr;
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[RingRight(r, p)], ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(group.ranks[RingLeft(r, p)], ctx.exchange.deadline, &left));

  std::vector<Transfer> t;
  t.reserve(4 * (p - 1));
  auto block = [&](int b) {
    Block blk = RingBlock(count, p, b);
    return Block{blk.offset * es, blk.count * es};  // in bytes
  };
  auto previous_receive = [&] { return t.empty() ? -1 : static_cast<int>(t.size()) - 1; };
  if (phases & kRingReduceScatter) {
    for (int s = 0; s < p - 1; ++s) {
      const Block out = block(RingReduceScatterSendBlock(r, p, s));
      const Block in = block(RingReduceScatterRecvBlock(r, p, s));
      // Step 0 sends our own contribution; later steps forward what we just reduced.
      if (s == 0) {
        t.push_back(Transfer::Send(right, send + out.offset, out.count));
      } else {
        t.push_back(Transfer::SendAfter(right, recv + out.offset, out.count, previous_receive()));
      }
      t.push_back(Transfer::RecvReduce(left, recv + in.offset, send + in.offset, reducer, in.count));
    }
  }
  if (phases & kRingAllGather) {
    for (int s = 0; s < p - 1; ++s) {  // forward each block as it arrives
      const Block out = block(RingAllGatherSendBlock(r, p, s));
      const Block in = block(RingAllGatherRecvBlock(r, p, s));
      t.push_back(Transfer::SendAfter(right, recv + out.offset, out.count, previous_receive()));
      t.push_back(Transfer::Recv(left, recv + in.offset, in.count));
    }
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

RingGroup WholeRing(const CollectiveContext& ctx) {
  RingGroup g;
  g.ranks.resize(static_cast<size_t>(ctx.nranks));  // one allocation, not one per doubling
  std::iota(g.ranks.begin(), g.ranks.end(), 0);
  g.pos = ctx.rank;
  return g;
}

Status RingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.nranks == 1) return LocalCopy(ctx, args.recv, args.send, args.count * args.elem_size);  // no ring to build
  return RunRing(ctx, WholeRing(ctx), static_cast<const char*>(args.send), static_cast<char*>(args.recv), args.count,
                 args.elem_size, &args.reducer, kRingReduceScatter | kRingAllGather);
}

// Each host link carries one ring flow.
double PredictRingAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  return RingSeconds(s.p, static_cast<double>(bytes), SlowestLink(m, s), 1.0, m.gamma, true);
}

}  // namespace tessera
