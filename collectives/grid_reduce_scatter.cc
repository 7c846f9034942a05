// Grid reduce-scatter: a ring along the row, then a ring along the column (the mirror
// of grid_allgather.cc).
//
// The ranks sit on an X x Y grid (grid.h); on the host grid a row is a host's X ranks.
// The send buffer holds p blocks of B bytes in rank order; rank q ends with block q
// reduced over all ranks.
//   1. Row ring reduce-scatter (X - 1 steps) over X super-blocks, super-block c being
//      the Y blocks of column c (at strided places of the send buffer, moved as Y
//      messages per step). Row member x ends with the row's partial of column x's
//      blocks, in scratch.
//   2. Column ring reduce-scatter (Y - 1 steps) on those Y blocks: each rank ends with
//      its own block reduced over the whole grid, in the receive buffer.
// Each phase is one exchange whose sends are gated on the receives that produce their
// data. The phases are two exchanges because a column receive reduces into a row
// partial, which must be final first (receives cannot be gated).
//
// Traffic per rank: Y B along the row and (Y-1) B across the column links; on the
// host grid each host link carries X (Y-1) B = (Y-1)/Y of the input per direction,
// against the flat ring's (p-1)/p. Scratch: Y B bytes (the row's partials, one
// super-block per step so that a forwarded one is never overwritten), freed on return.
// In place (recvbuff == sendbuff + rank B) is safe: the receive buffer is written only
// by the last column step, after every read of the send buffer.
#include <vector>

#include "collectives/collectives.h"
#include "collectives/ring_pattern.h"

namespace tessera {

namespace {

Status GridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid) {
  const int r = ctx.rank, X = grid.X, Y = grid.Y;
  const size_t block = args.count * args.elem_size;
  if (block == 0) return Status::Ok();
  if (X == 1 || Y == 1) return RingReduceScatter(ctx, args);  // one ring: no grid to use
  const int x = grid.x[r], y = grid.y[r];
  const std::vector<int>& row = grid.rows[y];
  const std::vector<int>& col = grid.cols[x];
  const char* send = static_cast<const char*>(args.send);
  auto mod = [](int v, int n) { return ((v % n) + n) % n; };
  auto from = [&](int rank) { return send + static_cast<size_t>(rank) * block; };
  Link* right = nullptr;
  Link* left = nullptr;

  // Phase 1: row ring. Slot s of scratch holds the super-block received at step s;
  // the last slot is this rank's column, reduced over the row.
  Scratch scratch;
  TESSERA_RETURN_IF_ERROR(scratch.Allocate(ctx, static_cast<size_t>(X - 1) * Y * block));
  auto slot = [&](int s, int j) { return scratch.data() + (static_cast<size_t>(s) * Y + j) * block; };
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(row[RingRight(x, X)], ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(row[RingLeft(x, X)], ctx.exchange.deadline, &left));
  std::vector<Transfer> t;
  t.reserve(2 * static_cast<size_t>(X - 1) * Y);
  std::vector<int> produced(Y, -1);  // the receives of the previous step, per block
  for (int s = 0; s < X - 1; ++s) {
    const std::vector<int>& out = grid.cols[mod(x - s - 1, X)];
    const std::vector<int>& in = grid.cols[mod(x - s - 2, X)];
    for (int j = 0; j < Y; ++j) {
      if (s == 0) {
        t.push_back(Transfer::Send(right, from(out[j]), block));  // our own contribution
      } else {
        t.push_back(Transfer::SendAfter(right, slot(s - 1, j), block, produced[j]));
      }
      produced[j] = static_cast<int>(t.size());
      t.push_back(Transfer::RecvReduce(left, slot(s, j), from(in[j]), &args.reducer, block));
    }
  }
  TESSERA_RETURN_IF_ERROR(Exchange(t.data(), t.size(), ctx.exchange).Annotate("row reduce-scatter"));

  // Phase 2: column ring on the row partials, reducing in place in the last slot; the
  // last step lands this rank's block in the receive buffer.
  const int mine = X - 2;
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(col[RingRight(y, Y)], ctx.exchange.deadline, &right));
  TESSERA_RETURN_IF_ERROR(ctx.links->Get(col[RingLeft(y, Y)], ctx.exchange.deadline, &left));
  t.clear();
  for (int s = 0; s < Y - 1; ++s) {
    const int out = mod(y - s - 1, Y), in = mod(y - s - 2, Y);
    if (s == 0) {
      t.push_back(Transfer::Send(right, slot(mine, out), block));
    } else {
      t.push_back(Transfer::SendAfter(right, slot(mine, out), block, static_cast<int>(t.size()) - 1));
    }
    char* dst = s == Y - 2 ? static_cast<char*>(args.recv) : slot(mine, in);
    t.push_back(Transfer::RecvReduce(left, dst, slot(mine, in), &args.reducer, block));
  }
  return Exchange(t.data(), t.size(), ctx.exchange).Annotate("column reduce-scatter");
}

// The grid's schedule, or the flat ring where the grid is missing or has X or Y 1.
Status OnGrid(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid* grid) {
  if (grid == nullptr || grid->X == 1 || grid->Y == 1) return RingReduceScatter(ctx, args);
  return GridReduceScatter(ctx, args, *grid);
}

// Two exchanges, one after the other; (p-1)/p of the input is reduced, as in the ring.
double PredictGridReduceScatter(const CostModel& m, const Shape& s, int X, int Y, size_t bytes) {
  const GridPhaseSeconds t = GridPhases(m, s, X, Y, bytes);
  return t.row + t.col + (s.p - 1) * t.block * m.gamma;
}

}  // namespace

Status HostGridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return OnGrid(ctx, args, ctx.host_grid);
}
Status TorusGridReduceScatter(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return OnGrid(ctx, args, ctx.torus_grids != nullptr ? ctx.torus_grids->Default() : nullptr);
}
double PredictHostGridReduceScatter(const CostModel& m, const Shape& s, size_t bytes) {
  return PredictGridReduceScatter(m, s, s.per_host, s.hosts, bytes);
}
double PredictTorusGridReduceScatter(const CostModel& m, const Shape& s, size_t bytes) {
  return PredictGridReduceScatter(m, s, s.torus_x, s.torus_y, bytes);
}

}  // namespace tessera
