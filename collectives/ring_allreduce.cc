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
// buffer into the receive buffer, so the send buffer is only ever read. Within a step
// the transport pipelines the block in slots or chunks, so sending, receiving and
// reducing overlap.
#include "collectives/ring_allreduce.h"

#include <cstring>

#include "collectives/ring_pattern.h"

namespace tessera {

Status RingAllReduce(const CollectiveContext& ctx, const AllReduceArgs& args) {
  const int p = ctx.nranks, r = ctx.rank;
  const size_t es = args.reducer.elem_size;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  if (p == 1) {
    if (send != recv) std::memcpy(recv, send, args.count * es);
    return Status::Ok();
  }
  Link* right = nullptr;
  Link* left = nullptr;
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingRight(r, p), ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(RingLeft(r, p), ctx.exchange.deadline, &left));

  for (int s = 0; s < p - 1; ++s) {
    const Block out = RingBlock(args.count, p, RingReduceScatterSendBlock(r, p, s));
    const Block in = RingBlock(args.count, p, RingReduceScatterRecvBlock(r, p, s));
    // Step 0 sends our own contribution; later steps forward what we just reduced.
    const char* out_src = (s == 0 ? send : recv) + out.offset * es;
    Transfer t[2] = {
        Transfer::Send(right, out_src, out.count * es),
        Transfer::RecvReduce(left, recv + in.offset * es, send + in.offset * es, &args.reducer, in.count * es),
    };
    TESSERA_RETURN_IF_ERROR(Exchange(t, 2, ctx.exchange).Annotate("reduce-scatter step " + std::to_string(s + 1) +
                                                                  " of " + std::to_string(p - 1)));
  }
  for (int s = 0; s < p - 1; ++s) {
    const Block out = RingBlock(args.count, p, RingAllGatherSendBlock(r, p, s));
    const Block in = RingBlock(args.count, p, RingAllGatherRecvBlock(r, p, s));
    Transfer t[2] = {
        Transfer::Send(right, recv + out.offset * es, out.count * es),
        Transfer::Recv(left, recv + in.offset * es, in.count * es),
    };
    TESSERA_RETURN_IF_ERROR(Exchange(t, 2, ctx.exchange).Annotate("allgather step " + std::to_string(s + 1) +
                                                                  " of " + std::to_string(p - 1)));
  }
  return Status::Ok();
}

}  // namespace tessera
