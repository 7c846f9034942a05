#include "collectives/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "collectives/algorithms.h"

namespace tessera {
namespace {

int Log2Floor(int v) {
  int l = 0;
  while ((2 << l) <= v) ++l;
  return v >= 1 ? l : 0;
}

// Ring of q ranks over n bytes, every step limited by link `l` (shared by `share`
// flows), reducing `reduce_fraction` of n.
double RingTime(int q, double n, const LinkCost& l, double share, double gamma, bool allreduce) {
  if (q <= 1) return 0;
  const double steps = allreduce ? 2.0 * (q - 1) : (q - 1);
  return steps * (l.alpha + n / q * l.beta * share) + (q - 1.0) / q * n * gamma;
}

}  // namespace

double PredictAllReduce(AllReduceAlgorithm algo, const CostModel& m, const Shape& s, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const int p = s.p, H = s.hosts, R = s.per_host;
  const bool multi = H > 1;
  const LinkCost& slow = multi ? m.inter : m.intra;
  switch (algo) {
    case AllReduceAlgorithm::kRing:
      // Each host link carries one ring flow.
      return RingTime(p, n, slow, 1.0, m.gamma, true);
    case AllReduceAlgorithm::kRecursiveDoubling: {
      // Rounds at distance >= R cross hosts (block placement), all R ranks of a host at once.
      const int rounds = Log2Floor(p);
      const int cross = multi && R > 0 ? Log2Floor(H) : (multi ? rounds : 0);
      double t = 0;
      for (int k = 0; k < rounds; ++k) {
        const bool inter = k >= rounds - cross;
        const LinkCost& l = inter ? m.inter : m.intra;
        t += l.alpha + n * l.beta * (inter && R > 0 ? R : 1) + n * m.gamma;
      }
      return t + (p != (1 << rounds) ? 2 * (slow.alpha + n * slow.beta) : 0);
    }
    case AllReduceAlgorithm::kRabenseifner: {
      const int rounds = Log2Floor(p);
      const int cross = multi && R > 0 ? Log2Floor(H) : (multi ? rounds : 0);
      double t = 0, part = n;
      for (int k = 0; k < rounds; ++k) {  // halving: the largest halves stay inside hosts
        part /= 2;
        const bool inter = k >= rounds - cross;
        const LinkCost& l = inter ? m.inter : m.intra;
        t += 2 * (l.alpha + part * l.beta * (inter && R > 0 ? R : 1)) + part * m.gamma;
      }
      return t + (p != (1 << rounds) ? 2 * (slow.alpha + n * slow.beta) : 0);
    }
    case AllReduceAlgorithm::kTorus: {
      if (s.torus_x <= 0 || s.torus_y <= 0) return -1;
      const int X = s.torus_x, Y = s.torus_y;
      // Rows inside hosts when X divides R; columns cross hosts when Y > 1 and H > 1.
      const LinkCost& row = multi && (R == 0 || R % X != 0) ? m.inter : m.intra;
      const LinkCost& col = multi ? m.inter : m.intra;
      const double share = multi && R > 0 ? std::max(1, std::min(X, R)) : 1;
      return RingTime(X, n, row, 1.0, m.gamma, true) + RingTime(Y, n / X, col, share, m.gamma, true);
    }
    case AllReduceAlgorithm::kHierarchical:
      if (!multi || R <= 0) return -1;
      return RingTime(R, n, m.intra, 1.0, m.gamma, true) + RingTime(H, n / R, m.inter, R, m.gamma, true);
    case AllReduceAlgorithm::kHierarchicalLeader:
      if (!multi || R <= 0) return -1;
      return 2 * ((R - 1) * m.intra.alpha + (R > 1 ? n * m.intra.beta : 0)) + (R - 1) * n * m.gamma +
             RingTime(H, n, m.inter, 1.0, m.gamma, true);
  }
  return -1;
}

double PredictRingGatherScatter(GatherScatterOp op, const CostModel& m, const Shape& s, size_t bytes) {
  const int p = s.p;
  if (p <= 1) return 0;
  // p - 1 steps of one block, each limited by the slowest link the ring crosses.
  const LinkCost& slow = s.hosts > 1 ? m.inter : m.intra;
  const double block = static_cast<double>(bytes) / p;
  const double reduce = op == GatherScatterOp::kReduceScatter ? (p - 1) * block * m.gamma : 0;
  return (p - 1) * (slow.alpha + block * slow.beta) + reduce;
}

double PredictGridGatherScatter(GatherScatterOp op, const CostModel& m, const Shape& s, int X, int Y, size_t bytes) {
  if (X <= 1 || Y <= 1 || X * Y != s.p) return -1;
  const bool multi = s.hosts > 1;
  const int R = s.per_host;
  // As for the torus allreduce: rows inside hosts when X divides R, min(X, R) ranks of
  // a host sharing its link in the column phase.
  const LinkCost& row = multi && (R == 0 || R % X != 0) ? m.inter : m.intra;
  const LinkCost& col = multi ? m.inter : m.intra;
  const double share = multi && R > 0 ? std::max(1, std::min(X, R)) : 1;
  const double block = static_cast<double>(bytes) / s.p;
  const double col_time = (Y - 1) * (col.alpha + block * col.beta * share);  // one block per step
  const double row_time = (X - 1) * Y * (row.alpha + block * row.beta);      // Y blocks per step
  if (op == GatherScatterOp::kReduceScatter) {
    // Two exchanges, one after the other; (p-1)/p of the input is reduced, as in the ring.
    return row_time + col_time + (s.p - 1) * block * m.gamma;
  }
  // One gated exchange: the row forwards blocks while the column delivers them, so the
  // phases overlap; the last block to arrive still has X - 1 row steps to go.
  return std::max(col_time, row_time) + (X - 1) * (row.alpha + block * row.beta);
}

GatherScatterSelection SelectGatherScatter(GatherScatterOp op, const std::string& forced, const CostModel& m,
                                           const Shape& s, size_t bytes) {
  const char* op_name = op == GatherScatterOp::kAllGather ? "allgather" : "reduce-scatter";
  GatherScatterSelection ring;
  ring.predicted_s = PredictRingGatherScatter(op, m, s, bytes);
  if (forced == "ring") {
    ring.reason = "forced by TESSERA_ALGO";
    return ring;
  }
  auto grid = [&](GatherScatterAlgorithm algo, int X, int Y) {
    GatherScatterSelection g;
    g.algo = algo;
    g.name = "grid";
    g.predicted_s = PredictGridGatherScatter(op, m, s, X, Y, bytes);
    return g;
  };
  auto dims = [](int X, int Y) { return std::to_string(X) + "x" + std::to_string(Y); };
  const bool host_grid = s.per_host > 0;
  if (forced == "torus" || forced == "hierarchical") {
    const bool torus = forced == "torus";
    const int X = torus ? s.torus_x : (host_grid ? s.per_host : 0), Y = torus ? s.torus_y : s.hosts;
    GatherScatterSelection g = grid(torus ? GatherScatterAlgorithm::kTorusGrid : GatherScatterAlgorithm::kHostGrid, X, Y);
    if (g.predicted_s >= 0) {
      g.reason = "forced by TESSERA_ALGO: the " + std::string(torus ? "torus" : "host") + " grid " + dims(X, Y);
      return g;
    }
  }
  GatherScatterSelection g = grid(GatherScatterAlgorithm::kHostGrid, host_grid ? s.per_host : 0, s.hosts);
  char item[96];
  std::snprintf(item, sizeof(item), "ring %.1f us", ring.predicted_s * 1e6);
  std::string predictions = item;
  if (g.predicted_s >= 0) {
    std::snprintf(item, sizeof(item), ", grid %s %.1f us", dims(s.per_host, s.hosts).c_str(), g.predicted_s * 1e6);
    predictions += item;
  } else {
    predictions += ", grid: the hosts form no grid with X > 1 and Y > 1";
  }
  GatherScatterSelection& best = g.predicted_s >= 0 && g.predicted_s < ring.predicted_s ? g : ring;
  best.reason = (forced == "auto" ? "" : "TESSERA_ALGO=" + forced + " does not apply to " + op_name + " here; ") +
                "predicted: " + predictions;
  return best;
}

Status CostModel::FromTuningFile(const std::string& path, CostModel* out) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("TESSERA_TUNING_FILE=" + path + ": cannot open");
  CostModel m = *out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    std::string key, eq;
    double v = 0;
    if (!(ls >> key)) continue;
    if (!(ls >> eq >> v) || eq != "=" || v <= 0) {
      return InvalidArgument(path + ":" + std::to_string(no) + ": expected 'key = positive number'");
    }
    if (key == "alpha_intra_us") m.intra.alpha = v * 1e-6;
    else if (key == "beta_intra_gbps") m.intra.beta = 1 / (v * 1e9);
    else if (key == "alpha_inter_us") m.inter.alpha = v * 1e-6;
    else if (key == "beta_inter_gbps") m.inter.beta = 1 / (v * 1e9);
    else if (key == "gamma_gbps") m.gamma = 1 / (v * 1e9);
    else return InvalidArgument(path + ":" + std::to_string(no) + ": unknown key '" + key + "'");
  }
  *out = m;
  return Status::Ok();
}

std::string CostModel::ToString() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "alpha_intra %.1f us, beta_intra %.2f GB/s, alpha_inter %.1f us, beta_inter %.3f GB/s, gamma %.2f GB/s",
                intra.alpha * 1e6, 1e-9 / intra.beta, inter.alpha * 1e6, 1e-9 / inter.beta, 1e-9 / gamma);
  return buf;
}

}  // namespace tessera
