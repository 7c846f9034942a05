// 2D-torus allreduce (Mikami et al. 2018).
//
// The ranks sit on an X x Y grid (grid.h). Three phases, each a ring:
//   1. reduce-scatter along the row: the buffer is cut into X blocks and each rank ends
//      with one block reduced over its row;
//   2. allreduce along the column, on that block only (1/X of the buffer);
//   3. allgather along the row, so every rank gets every block.
// Latency: 2(X-1) + 2(Y-1) ring steps instead of the flat ring's 2(XY-1); bandwidth: the
// same per-rank volume as the ring, but only 1/X of it crosses the column links. With
// rows inside hosts (the default grid), the network carries what hierarchical
// allreduce sends, from all X ranks of a host at once.
//
// The three phases run as one exchange, so that the row's steps (shared memory on the
// default grid) overlap the column's (the network). The column ring cuts the block into
// Y sub-blocks and takes them in a fixed order: its reduce-scatter needs them final from
// the row in the order y, y-1, ... (wrapping), and its allgather makes them final in
// the order y+1, y, .... So every row step is cut into pieces of sub-blocks (at most
// kRowPieces) in the order its column phase needs or makes them: the column's first
// send streams the row's first piece as it is reduced, each column receive begins once
// the row's piece it reduces into is final, and each row allgather piece leaves as soon
// as the column has made it final. What stays in line: the row's first piece before the
// column, and its last piece after: where ranks share cores, a row step of one whole
// piece would keep the link idle for all of its time. Every element is reduced in the
// same order as with the phases one after the other.
#include <algorithm>
#include <vector>

#include "collectives/ring_allreduce.h"
#include "collectives/ring_pattern.h"
#include "collectives/topology_allreduce.h"

namespace tessera {

namespace {

// The most pieces a row step is cut into: a column of Y hosts groups its sub-blocks
// into runs of RunLength(Y).
constexpr int kRowPieces = 8;
int RunLength(int Y) { return (Y + kRowPieces - 1) / kRowPieces; }

int Mod(int a, int m) { return (a % m + m) % m; }

// Sub-blocks low..high of a row block, taken high first: contiguous in memory.
struct Run {
  int low, high;
};

// The Y sub-blocks of a row block in the order a phase takes them (from `first` down,
// wrapping), as runs of at most `most` that do not wrap.
std::vector<Run> RunsFrom(int first, int Y, int most) {
  std::vector<Run> runs;
  int j = first;
  for (int taken = 0; taken < Y;) {
    const int len = std::min({most, j + 1, Y - taken});
    runs.push_back(Run{j - len + 1, j});
    taken += len;
    j = Mod(j - len, Y);
  }
  return runs;
}

// The byte ranges of the schedule: row blocks of the buffer, sub-blocks of a row block.
class GridBytes {
 public:
  GridBytes(size_t count, size_t es, int X, int Y) : count_(count), es_(es), X_(X), Y_(Y) {}
  // Sub-block j of row block b.
  Block Sub(int b, int j) const {
    const Block row = RingBlock(count_, X_, b);
    const Block sub = RingBlock(row.count, Y_, j);
    return Block{(row.offset + sub.offset) * es_, sub.count * es_};
  }
  // Run u of row block b.
  Block Piece(int b, const Run& u) const {
    const Block low = Sub(b, u.low), high = Sub(b, u.high);
    return Block{low.offset, high.offset + high.count - low.offset};
  }

 private:
  size_t count_, es_;
  int X_, Y_;
};

// Builds the one exchange of GridAllReduce. Indices are into `t`.
class StreamedGrid {
 public:
  StreamedGrid(const CollectiveArgs& args, const Grid& grid, int rank, Link* const (&links)[4])
      : args_(args), X_(grid.X), Y_(grid.Y), x_(grid.x[rank]), y_(grid.y[rank]),
        most_(RunLength(grid.Y)), bytes_(args.count, args.elem_size, grid.X, grid.Y),
        send_(static_cast<const char*>(args.send)), recv_(static_cast<char*>(args.recv)),
        row_right_(links[0]), row_left_(links[1]), col_right_(links[2]), col_left_(links[3]),
        rs_(RunsFrom(y_, Y_, most_)), ag_(RunsFrom((y_ + 1) % Y_, Y_, most_)),
        run_received_(rs_.size(), -1), final_(static_cast<size_t>(Y_), -1) {}

  std::vector<Transfer> Build() {
    RowReduceScatter();
    ColumnAllReduce();
    RowAllGather();
    return std::move(t_);
  }

 private:
  int Add(const Transfer& x) {
    t_.push_back(x);
    return static_cast<int>(t_.size()) - 1;
  }

  // Row ring reduce-scatter, every step in the runs of rs_; run_received_[u]: the last
  // step's receive of run u (into the block this rank owns).
  void RowReduceScatter() {
    for (size_t u = 0; u < rs_.size(); ++u) {
      for (int s = 0; s < X_ - 1; ++s) {
        const int out = RingReduceScatterSendBlock(x_, X_, s), in = RingReduceScatterRecvBlock(x_, X_, s);
        const Block o = bytes_.Piece(out, rs_[u]), i = bytes_.Piece(in, rs_[u]);
        Add(s == 0 ? Transfer::Send(row_right_, send_ + o.offset, o.count)
                   : Transfer::SendAfter(row_right_, recv_ + o.offset, o.count, run_received_[u]));
        run_received_[u] =
            Add(Transfer::RecvReduce(row_left_, recv_ + i.offset, send_ + i.offset, &args_.reducer, i.count));
      }
    }
  }

  // The run of rs_ holding sub-block j.
  size_t RunOf(int j) const {
    size_t u = 0;
    while (!(rs_[u].low <= j && j <= rs_[u].high)) ++u;
    return u;
  }

  // Ring allreduce over the Y sub-blocks of the owned row block, in place; final_[j]:
  // the receive that makes sub-block j final.
  void ColumnAllReduce() {
    const int own = RingOwnedBlock(x_, X_);
    int previous = -1;
    for (int s = 0; s < Y_ - 1; ++s) {
      const Block o = bytes_.Sub(own, RingReduceScatterSendBlock(y_, Y_, s));
      const int jin = RingReduceScatterRecvBlock(y_, Y_, s);
      const Block i = bytes_.Sub(own, jin);
      if (s == 0) {  // sub-block y, the high end of the row's first run
        const Block first = bytes_.Piece(own, rs_[0]);
        Add(Transfer::SendAfter(col_right_, recv_ + o.offset, o.count, run_received_[0], o.offset - first.offset));
      } else {
        Add(Transfer::SendAfter(col_right_, recv_ + o.offset, o.count, previous));
      }
      const Transfer reduce = Transfer::RecvReduce(col_left_, recv_ + i.offset, recv_ + i.offset, &args_.reducer, i.count);
      previous = Add(Transfer::RecvAfter(reduce, run_received_[RunOf(jin)]));
    }
    final_[static_cast<size_t>(RingOwnedBlock(y_, Y_))] = previous;
    for (int s = 0; s < Y_ - 1; ++s) {
      const Block o = bytes_.Sub(own, RingAllGatherSendBlock(y_, Y_, s));
      const int jin = RingAllGatherRecvBlock(y_, Y_, s);
      const Block i = bytes_.Sub(own, jin);
      Add(Transfer::SendAfter(col_right_, recv_ + o.offset, o.count, previous));
      previous = Add(Transfer::Recv(col_left_, recv_ + i.offset, i.count));
      final_[static_cast<size_t>(jin)] = previous;
    }
  }

  // Row ring allgather, every step in the runs of ag_: the first step's run u leaves
  // once the column has made its low sub-block final (the last of the run to be).
  void RowAllGather() {
    std::vector<int> received(ag_.size(), -1);
    for (size_t u = 0; u < ag_.size(); ++u) {
      for (int s = 0; s < X_ - 1; ++s) {
        const int out = RingAllGatherSendBlock(x_, X_, s), in = RingAllGatherRecvBlock(x_, X_, s);
        const Block o = bytes_.Piece(out, ag_[u]), i = bytes_.Piece(in, ag_[u]);
        const int gate = s == 0 ? final_[static_cast<size_t>(ag_[u].low)] : received[u];
        Add(Transfer::SendAfter(row_right_, recv_ + o.offset, o.count, gate));
        received[u] = Add(Transfer::Recv(row_left_, recv_ + i.offset, i.count));
      }
    }
  }

  const CollectiveArgs& args_;
  const int X_, Y_, x_, y_, most_;
  const GridBytes bytes_;
  const char* send_;
  char* recv_;
  Link *row_right_, *row_left_, *col_right_, *col_left_;
  const std::vector<Run> rs_, ag_;
  std::vector<int> run_received_;
  std::vector<int> final_;
  std::vector<Transfer> t_;
};

}  // namespace

Status GridAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args, const Grid& grid) {
  const int r = ctx.rank;
  RingGroup row{grid.rows[grid.y[r]], grid.x[r]};
  RingGroup col{grid.cols[grid.x[r]], grid.y[r]};
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  const int both = kRingReduceScatter | kRingAllGather;
  if (grid.Y == 1) return RunRing(ctx, row, send, recv, args.count, args.elem_size, &args.reducer, both);
  if (grid.X == 1) return RunRing(ctx, col, send, recv, args.count, args.elem_size, &args.reducer, both);
  Link* links[4] = {};
  const int peers[4] = {row.ranks[RingRight(row.pos, grid.X)], row.ranks[RingLeft(row.pos, grid.X)],
                        col.ranks[RingRight(col.pos, grid.Y)], col.ranks[RingLeft(col.pos, grid.Y)]};
  for (int k = 0; k < 4; ++k) TESSERA_RETURN_IF_ERROR(ctx.links->Get(peers[k], ctx.exchange.deadline, &links[k]));
  std::vector<Transfer> t = StreamedGrid(args, grid, r, links).Build();
  const Status s = Exchange(t.data(), t.size(), ctx.exchange);
  return s.ok() ? s : s.Annotate("rows and columns of the " + std::to_string(grid.X) + "x" + std::to_string(grid.Y) + " grid");
}

Status TorusAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args) {
  if (ctx.torus_grids == nullptr || ctx.torus_grids->Default() == nullptr) return InternalError("2D torus: no grid");
  const Grid* grid = ctx.torus_grids->Default();
  if (ctx.model != nullptr && ctx.shape != nullptr) {
    const int X = TorusWidthFor(*ctx.model, *ctx.shape, args.count * args.elem_size);
    grid = ctx.torus_grids->OfWidth(X);
    if (grid == nullptr) return InternalError("2D torus: no grid of width " + std::to_string(X));
  }
  return GridAllReduce(ctx, args, *grid);
}

// The row's reduce-scatter beside the column's, then the row's allgather beside the
// column's (GridAllReduce), each the slower of the two, with a row step of one piece
// before the column and one after.
double PredictGridAllReduce(const CostModel& m, const Shape& s, int X, int Y, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const GridLinks g = GridLinksOf(m, s, X);
  if (X == 1 || Y == 1) return RingSeconds(X * Y, n, X == 1 ? g.col : g.row, 1, m.gamma, true);
  const int most = RunLength(Y), pieces = (Y + most - 1) / most;
  const double piece_step = StepSeconds(g.row, n / X / pieces);
  const double row = (X - 1) * pieces * piece_step, line = (X - 1) * piece_step;
  const double col = (Y - 1) * StepSeconds(g.col, n / X / Y);
  const double row_reduce = (X - 1.0) / X * n * m.gamma, col_reduce = (Y - 1.0) / Y * n / X * m.gamma;
  return std::max(row + row_reduce, line + col + col_reduce) + std::max(row, col + line);
}

int TorusWidthFor(const CostModel& m, const Shape& s, size_t bytes) {
  if (s.torus_forced) return s.torus_x;
  int best = s.torus_x;
  double least = PredictGridAllReduce(m, s, s.torus_x, s.torus_y, bytes);
  for (int X : TorusWidths(s)) {
    const double t = PredictGridAllReduce(m, s, X, s.p / X, bytes);
    if (t < least) {
      least = t;
      best = X;
    }
  }
  return best;
}

double PredictTorusAllReduce(const CostModel& m, const Shape& s, size_t bytes) {
  const int X = TorusWidthFor(m, s, bytes);
  return PredictGridAllReduce(m, s, X, s.p / X, bytes);
}

}  // namespace tessera
