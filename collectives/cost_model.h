// The cost model that picks an allreduce algorithm, and the ring or the grid for
// allgather and reduce-scatter: alpha (latency, s), beta (s/byte) per link class
// (inside a host, across hosts) and gamma (reduction, s/byte), applied to each
// algorithm's schedule on the communicator's shape (p ranks on H hosts of R).
// Formulas are in cost_model.cc; docs/algorithms.md derives them.
#ifndef TESSERA_COLLECTIVES_COST_MODEL_H_
#define TESSERA_COLLECTIVES_COST_MODEL_H_

#include <cstddef>
#include <string>

#include "base/status.h"

namespace tessera {

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
};

struct CostModel {
  LinkCost intra{2e-6, 1.0 / 4e9};    // shared memory
  LinkCost inter{50e-6, 1.0 / 1e9};   // network
  double gamma = 1.0 / 8e9;           // reduction

  // Reads "key = value" lines (alpha_intra_us, beta_intra_gbps, alpha_inter_us,
  // beta_inter_gbps, gamma_gbps); '#' starts a comment. InvalidArgument names the line.
  static Status FromTuningFile(const std::string& path, CostModel* out);
  std::string ToString() const;
};

// The shape the model needs.
struct Shape {
  int p = 1;      // ranks
  int hosts = 1;  // H
  int per_host = 0;  // R when every host has R ranks, else 0
  int torus_x = 0, torus_y = 0;  // the torus grid (0: none)
};

enum class AllReduceAlgorithm;

// Predicted seconds for an allreduce of `bytes`, or a negative value when the
// algorithm does not apply to the shape.
double PredictAllReduce(AllReduceAlgorithm algo, const CostModel& m, const Shape& s, size_t bytes);

// Allgather and reduce-scatter: the flat ring over all p ranks, or the grid schedule
// (grid_allgather.cc, grid_reduce_scatter.cc) of a column ring and a row ring.
enum class GatherScatterOp { kAllGather, kReduceScatter };

// Predicted seconds when the whole buffer (p blocks: the allgather's result, the
// reduce-scatter's input) is `bytes`. The grid's rows are inside hosts when X divides
// the ranks per host, as for the torus allreduce. The grid predicts a negative value
// when X or Y is 1 (it is then the flat ring).
double PredictRingGatherScatter(GatherScatterOp op, const CostModel& m, const Shape& s, size_t bytes);
double PredictGridGatherScatter(GatherScatterOp op, const CostModel& m, const Shape& s, int X, int Y, size_t bytes);

enum class GatherScatterAlgorithm {
  kRing,       // ring_allgather.cc, ring_reduce_scatter.cc
  kHostGrid,   // the grid schedule on the host grid (rows = hosts)
  kTorusGrid,  // the grid schedule on the torus grid (TESSERA_TORUS, else the host grid)
};

struct GatherScatterSelection {
  GatherScatterAlgorithm algo = GatherScatterAlgorithm::kRing;
  const char* name = "ring";  // "ring" or "grid"
  double predicted_s = -1;
  std::string reason;         // "forced ...", or the predictions of both candidates
};

// The choice for one call. `forced` is TESSERA_ALGO: "ring" forces the flat ring;
// "torus" the grid on the torus grid and "hierarchical" the grid on the host grid,
// where that grid has X > 1 and Y > 1; anything else ("auto", the other allreduce
// names, a forced grid that does not apply) lets the model choose between the flat
// ring and the host grid, and the reason says why.
GatherScatterSelection SelectGatherScatter(GatherScatterOp op, const std::string& forced, const CostModel& m,
                                           const Shape& s, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COST_MODEL_H_
