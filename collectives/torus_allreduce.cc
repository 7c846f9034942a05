// 2D-torus allreduce (Mikami et al. 2018).
//
// The ranks sit on an X x Y grid (grid.h). Three phases, each a ring:
//   1. reduce-scatter along the row: the buffer is cut into X blocks and each rank ends
//      with one block reduced over its row;
//   2. allreduce along the column, on that block only (1/X of the buffer);
//   3. allgather along the row, so every rank gets every block.
// Latency: 2(X-1) + 2(Y-1) steps instead of the flat ring's 2(XY-1); bandwidth: the
// same per-rank volume as the ring, but only 1/X of it crosses the column links. With
// rows inside hosts (the default grid), the network carries what hierarchical
// allreduce sends, from all X ranks of a host at once.
#include "collectives/topology_allreduce.h"

#include "collectives/ring_allreduce.h"
#include "collectives/ring_pattern.h"

namespace tessera {

Status GridAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid) {
  const int r = ctx.rank;
  const size_t es = args.elem_size;
  RingGroup row{grid.rows[grid.y[r]], grid.x[r]};
  RingGroup col{grid.cols[grid.x[r]], grid.y[r]};
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  TESSERA_RETURN_IF_ERROR(
      RunRing(ctx, row, send, recv, args.count, es, &args.reducer, kRingReduceScatter).Annotate("row reduce-scatter"));
  // The block this rank owns after the row's reduce-scatter.
  const Block mine = RingBlock(args.count, grid.X, RingOwnedBlock(row.pos, grid.X));
  char* shard = recv + mine.offset * es;
  TESSERA_RETURN_IF_ERROR(RunRing(ctx, col, shard, shard, mine.count, es, &args.reducer,
                                  kRingReduceScatter | kRingAllGather)
                              .Annotate("column allreduce"));
  return RunRing(ctx, row, recv, recv, args.count, es, &args.reducer, kRingAllGather).Annotate("row allgather");
}

Status TorusAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.torus_grid == nullptr) return InternalError("2D torus: no grid");
  return GridAllReduce(ctx, args, *ctx.torus_grid);
}

// A row allreduce of the buffer, then a column allreduce of its 1/X shard.
double PredictTorusAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int X = s.torus_x, Y = s.torus_y;
  const GridLinks g = GridLinksOf(m, s, X);
  return RingSeconds(X, n, *g.row, 1.0, m.gamma, true) + RingSeconds(Y, n / X, *g.col, g.share, m.gamma, true);
}

}  // namespace tessera
