// Board allreduce: the latency algorithm when every rank shares one host.
//
// Each rank posts its buffer on the host board (transport/host_board.h) and, once every
// rank has posted, reduces all the posted buffers itself, in rank order. One wait for
// the slowest rank, where recursive doubling waits for a partner lg p times: on ranks
// that outnumber their cores every wait costs turns of the scheduler, and a round of
// the board needs each rank to run once to post and once to read. A buffer larger than
// the board's slot goes in rounds of whole elements.
//
// Every rank applies the same operations to the same bytes in the same order, so all
// end with identical bits, whatever the order in which the ranks arrived.
#include "collectives/latency_allreduce.h"

#include <algorithm>
#include <cstring>

namespace tessera {

Status BoardAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  const int p = ctx.nranks;
  if (p == 1) return LocalCopy(ctx, args.recv, args.send, args.count * args.elem_size);
  HostBoard* board = ctx.board;
  if (board == nullptr || board->ranks() != p) {
    return InvalidUsage("the board allreduce needs every rank on one host board (one host, shared memory)");
  }
  const size_t per_round = board->capacity() / args.elem_size;  // elements; the call's one division
  if (per_round == 0) {
    return InvalidUsage("the host board's slot holds no element of " + std::to_string(args.elem_size) + " bytes");
  }
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  for (size_t first = 0; first < args.count; first += per_round) {
    const size_t count = std::min(per_round, args.count - first);
    const size_t off = first * args.elem_size, n = count * args.elem_size;
    std::memcpy(board->NextSlot(), send + off, n);  // before recv + off, which may be send + off
    TESSERA_RETURN_IF_ERROR(board->Round(n, ctx.exchange));
    args.reducer.fn(recv + off, board->Slot(0), board->Slot(1), count);
    for (int r = 2; r < p; ++r) args.reducer.fn(recv + off, recv + off, board->Slot(r), count);
  }
  return Status::Ok();
}

// One wait per round, each rank copying its bytes in, then reading and reducing every
// other rank's slot where that rank just wrote it: half a beta a byte (a message's
// beta is a write and a read) and gamma. A round's alpha is kBoardRoundAlpha of a
// message's (latency_allreduce.h). Where ranks outnumber cores a round waits for every
// rank to get a core, at least a step's floor (docs/algorithms.md#the-step-floor).
double PredictBoardAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const size_t rounds = std::max<size_t>(1, (bytes + s.board_bytes - 1) / s.board_bytes);
  const double round = std::max(kBoardRoundAlpha * m.intra.alpha, m.intra.floor);
  return static_cast<double>(rounds) * round + n * m.intra.beta + (s.p - 1) * n * (m.intra.beta / 2 + m.gamma);
}

}  // namespace tessera
