// The 2D grid of torus and hierarchical algorithms, as pure functions (tested alone).
//
// Every rank has a place (x, y): ranks with the same y form a row of X ranks, ranks with
// the same x a column of Y ranks. A grid from a host layout puts each host's ranks in a
// row (x = local rank, y = host), so rows are intra-host and columns cross hosts; a
// forced grid (TESSERA_TORUS=XxY) numbers ranks row by row (rank = y * X + x).
#ifndef TESSERA_COLLECTIVES_GRID_H_
#define TESSERA_COLLECTIVES_GRID_H_

#include <map>
#include <memory>
#include <mutex>
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

// The grid of k consecutive hosts a row, from the host grid (R ranks a host, H hosts,
// k dividing H): X = kR, row y holds hosts yk .. yk+k-1, x = local rank + R (host mod k).
// k = 1 is the host grid. InvalidArgument when k does not divide H.
Status GridOfHostRows(const Grid& hosts, int k, Grid* out);

// The widths (X) the cost model chooses the torus grid among where TESSERA_TORUS does
// not force one: kR for every k < H that divides H (the grids of GridOfHostRows); none
// without a host grid.
std::vector<int> TorusWidths(const Shape& s);

// The grids a torus allreduce runs on: the one TESSERA_TORUS forces, or else the one of
// each width of TorusWidths, built from the host grid on first use. Thread-safe.
class TorusGrids {
 public:
  // `forced`: TESSERA_TORUS's grid, or null; `hosts`: the host grid, or null.
  TorusGrids(std::unique_ptr<Grid> forced, const Grid* hosts);
  ~TorusGrids();
  // The forced grid, else the host grid (null when neither exists).
  const Grid* Default() const;
  bool forced() const { return forced_ != nullptr; }
  // The grid of width X: the default one when X is its width, else the host rows' grid
  // of X = kR; null when there is none of that width.
  const Grid* OfWidth(int X) const;

 private:
  std::unique_ptr<Grid> forced_, hosts_;
  mutable std::mutex mu_;
  mutable std::map<int, std::unique_ptr<Grid>> built_;  // by width
};

// The grids of ranks placed on hosts by host_of_rank (hosts numbered 0..H-1), and the
// shape the cost model sees, as a communicator builds them: the host grid when every
// host has the same number of ranks (else none, per_host 0); the torus grids, forced by
// `torus` (TESSERA_TORUS, "XxY") when it is not empty, else chosen by the model among
// rows of whole hosts (torus_allreduce.cc); `fabric`, what lies above the hosts.
struct LayoutGrids {
  std::unique_ptr<Grid> host;
  std::unique_ptr<TorusGrids> torus;
  Shape shape;
};
Status MakeLayoutGrids(const std::vector<int>& host_of_rank, const std::string& torus, const FabricShape& fabric,
                       LayoutGrids* out);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_GRID_H_
