// The cost model that picks an allreduce algorithm: alpha (latency, s), beta (s/byte)
// per link class (inside a host, across hosts) and gamma (reduction, s/byte), applied
// to each algorithm's schedule on the communicator's shape (p ranks on H hosts of R).
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

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COST_MODEL_H_
