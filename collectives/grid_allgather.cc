// Grid allgather: a ring along the column, then a ring along the row, in one exchange.
//
// The ranks sit on an X x Y grid (grid.h); on the host grid a row is a host's X ranks
// and a column holds the ranks with the same local index on all Y hosts. The result is
// p blocks of B bytes in rank order (NCCL's layout).
//   1. Column ring (Y - 1 steps): every rank gathers the blocks of its column's Y ranks.
//   2. Row ring (X - 1 steps): row member x contributes the Y blocks of column x; each
//      step moves the Y blocks of one column, as Y messages straight to their places in
//      the receive buffer (their ranks are not contiguous), so nothing is copied.
// Both phases form a single exchange: a row send of a column block is gated on the
// receive that brings that block, so the row forwards blocks as they arrive from the
// column. Blocks of a column travel in the order the column ring delivers them (the
// rank's own block, then y - 1, y - 2, ...), the same on every member of a row.
//
// Traffic per rank: (Y-1) B across the column links and Y B along the row. On the
// host grid each host link carries X (Y-1) B = (Y-1)/Y of the result per direction,
// from all X local ranks at once, against the flat ring's (p-1)/p through one flow; the
// latency is (Y-1) network steps instead of p - 1.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/ring_pattern.h"

namespace tessera {

namespace {

Status GridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid) {
  const int r = ctx.rank, X = grid.X, Y = grid.Y;
  const size_t block = args.count * args.elem_size;
  char* recv = static_cast<char*>(args.recv);
  TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, recv + r * block, args.send, block));
  if (block == 0 || X * Y == 1) return Status::Ok();
  const int x = grid.x[r], y = grid.y[r];
  const std::vector<int>& row = grid.rows[y];
  const std::vector<int>& col = grid.cols[x];
  auto mod = [](int v, int n) { return ((v % n) + n) % n; };
  Link* col_right = nullptr;
  Link* col_left = nullptr;
  Link* row_right = nullptr;
  Link* row_left = nullptr;
  if (Y > 1) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(col[RingRight(y, Y)], ctx.exchange.deadline, &col_right));
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(col[RingLeft(y, Y)], ctx.exchange.deadline, &col_left));
  }
  if (X > 1) {
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(row[RingRight(x, X)], ctx.exchange.deadline, &row_right));
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(row[RingLeft(x, X)], ctx.exchange.deadline, &row_left));
  }
  std::vector<Transfer> t;
  t.reserve(2 * (Y - 1) + 2 * (X - 1) * Y);
  auto at = [&](int rank) { return recv + static_cast<size_t>(rank) * block; };

  // Phase 1: the column ring. arrived[k] is the receive that brings block (y - k) of
  // this column (k = 0 is this rank's own block: no receive).
  std::vector<int> arrived(Y, -1);
  for (int s = 0; s < Y - 1; ++s) {
    const int out = col[mod(y - s, Y)], in = col[mod(y - s - 1, Y)];
    if (s == 0) {
      t.push_back(Transfer::ToCopy(Transfer::Send(col_right, args.send, block)));
    } else {
      t.push_back(Transfer::ToCopy(Transfer::SendAfter(col_right, at(out), block, arrived[s])));
    }
    arrived[s + 1] = static_cast<int>(t.size());
    t.push_back(Transfer::Recv(col_left, at(in), block));
  }

  // Phase 2: the row ring over columns. At step s this rank sends column (x - s) and
  // receives column (x - s - 1), block k of a column being that of row (y - k).
  for (int s = 0; s < X - 1; ++s) {
    const std::vector<int>& out = grid.cols[mod(x - s, X)];
    const std::vector<int>& in = grid.cols[mod(x - s - 1, X)];
    std::vector<int> next(Y, -1);
    for (int k = 0; k < Y; ++k) {
      const int j = mod(y - k, Y);
      if (s == 0 && k == 0) {
        t.push_back(Transfer::ToCopy(Transfer::Send(row_right, args.send, block)));
      } else {
        t.push_back(Transfer::ToCopy(Transfer::SendAfter(row_right, at(out[j]), block, arrived[k])));
      }
      next[k] = static_cast<int>(t.size());
      t.push_back(Transfer::Recv(row_left, at(in[j]), block));
    }
    arrived = next;
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// The grid's schedule, or the flat ring where the grid is missing or has X or Y 1.
Status OnGrid(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid* grid) {
  if (grid == nullptr || grid->X == 1 || grid->Y == 1) return RingAllGather(ctx, args);
  return GridAllGather(ctx, args, *grid);
}

// One gated exchange: the row forwards blocks while the column delivers them, so the
// phases overlap; the last block to arrive still has X - 1 row steps to go.
double PredictGridAllGather(const CostModel& m, const Shape& s, int X, int Y, size_t bytes) {
  const GridPhaseSeconds t = GridPhases(m, s, X, Y, bytes);
  return std::max(t.col, t.row) + t.row_of_one_block;
}

}  // namespace

Status HostGridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return OnGrid(ctx, args, ctx.host_grid);
}
Status TorusGridAllGather(const CollectiveContext& ctx, const CollectiveArgs& args) {
  return OnGrid(ctx, args, ctx.torus_grids != nullptr ? ctx.torus_grids->Default() : nullptr);
}
double PredictHostGridAllGather(const CostModel& m, const Shape& s, size_t bytes) {
  return PredictGridAllGather(m, s, s.per_host, s.hosts, bytes);
}
double PredictTorusGridAllGather(const CostModel& m, const Shape& s, size_t bytes) {
  return PredictGridAllGather(m, s, s.torus_x, s.torus_y, bytes);
}

}  // namespace tessera
