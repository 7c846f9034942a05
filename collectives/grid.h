// The 2D grid of torus and hierarchical algorithms, as pure functions (tested alone).
//
// Every rank has a place (x, y): ranks with the same y form a row of X ranks, ranks with
// the same x a column of Y ranks. A grid from a host layout puts each host's ranks in a
// row (x = local rank, y = host), so rows are intra-host and columns cross hosts; a
// forced grid (TESSERA_TORUS=XxY) numbers ranks row by row (rank = y * X + x).
#ifndef TESSERA_COLLECTIVES_GRID_H_
#define TESSERA_COLLECTIVES_GRID_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/cost_model.h"

namespace tessera {

struct Grid {
  int X = 1;                             // row length
  int Y = 1;                             // column length
  std::vector<int> x, y;                 // by rank
  std::vector<std::vector<int>> rows;    // rows[y] = ranks in x order
  std::vector<std::vector<int>> cols;    // cols[x] = ranks in y order
};

// X x Y == nranks, rank = y * X + x.
Status MakeGrid(int nranks, int X, int Y, Grid* out);
// From host_of_rank (hosts numbered 0..H-1): rows are hosts. InvalidArgument unless
// every host has the same number of ranks.
Status GridFromHosts(const std::vector<int>& host_of_rank, Grid* out);
// Parses "XxY" (e.g. "4x2") against nranks.
Status ParseGrid(const std::string& spec, int nranks, Grid* out);

// The grids of ranks placed on hosts by host_of_rank (hosts numbered 0..H-1), and the
// shape the cost model sees, as a communicator builds them: the host grid when every
// host has the same number of ranks (else none, per_host 0); the torus grid from
// `torus` (TESSERA_TORUS, "XxY") when it is not empty, else the host grid.
struct LayoutGrids {
  std::unique_ptr<Grid> host, torus;
  Shape shape;
};
Status MakeLayoutGrids(const std::vector<int>& host_of_rank, const std::string& torus, LayoutGrids* out);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_GRID_H_
