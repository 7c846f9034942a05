#include "collectives/algorithms.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>

#include "collectives/collectives.h"
#include "collectives/latency_allreduce.h"
#include "collectives/ring_allreduce.h"
#include "collectives/topology_allreduce.h"

namespace tessera {
namespace {

bool Everywhere(const Shape&) { return true; }
bool HasTorusGrid(const Shape& s) { return s.torus_x > 0 && s.torus_y > 0; }
bool HasEvenHosts(const Shape& s) { return s.hosts > 1 && s.per_host > 0; }
bool IsGrid(int X, int Y, int p) { return X > 1 && Y > 1 && X * Y == p; }
bool HasHostGrid(const Shape& s) { return IsGrid(s.per_host, s.hosts, s.p); }
bool HasTorusGridOfRings(const Shape& s) { return IsGrid(s.torus_x, s.torus_y, s.p); }
bool HasBoard(const Shape& s) { return s.board_bytes > 0; }

constexpr const char* kNoHostGrid = "the hosts form no grid with X > 1 and Y > 1";
constexpr const char* kNoTorusGrid = "the torus grid has X or Y 1";

// The table: every collective's rows, grouped by collective, in selection order.
std::vector<AlgorithmInfo> Rows() {
  using C = OpKind;
  return {
      {C::kAllReduce, "ring", "reduce-scatter then allgather around a ring: bandwidth-optimal, 2(p-1) steps",
       Everywhere, "", PredictRingAllReduce, RingAllReduce, true},
      {C::kAllReduce, "board",
       "every rank posts on its host's shared board, then each reduces all in rank order: one wait for p ranks",
       HasBoard, "needs every rank on one host with shared memory (TESSERA_SHM_BOARD_BYTES > 0)",
       PredictBoardAllReduce, BoardAllReduce, false},
      {C::kAllReduce, "recursive_doubling",
       "lg p rounds of whole-buffer exchanges with rank^2^k: latency-optimal for small buffers", Everywhere, "",
       PredictRecursiveDoublingAllReduce, RecursiveDoublingAllReduce, false},
      {C::kAllReduce, "rabenseifner",
       "recursive-halving reduce-scatter + recursive-doubling allgather: 2 lg p steps, ring's volume", Everywhere, "",
       PredictRabenseifnerAllReduce, RabenseifnerAllReduce, false},
      {C::kAllReduce, "torus",
       "2D torus (Mikami et al.): row reduce-scatter, column allreduce on the shard, row allgather", HasTorusGrid,
       "no torus grid (TESSERA_TORUS, else hosts with equal rank counts)", PredictTorusAllReduce, TorusAllReduce, true,
       GridUse::kTorus},
      {C::kAllReduce, "hierarchical",
       "intra-host reduce-scatter, inter-host allreduce per local rank, intra-host allgather", HasEvenHosts,
       "needs several hosts with equal rank counts", PredictHierarchicalAllReduce, HierarchicalAllReduce, true,
       GridUse::kHost},
      {C::kAllReduce, "hierarchical_leader",
       "reduce to each host's leader, allreduce among leaders, broadcast inside each host", HasEvenHosts,
       "needs several hosts with equal rank counts", PredictHierarchicalLeaderAllReduce, HierarchicalLeaderAllReduce,
       true, GridUse::kHost},
      {C::kAllReduce, "hierarchical_doubling",
       "reduce to each host's leader, recursive doubling among leaders, broadcast inside each host", HasEvenHosts,
       "needs several hosts with equal rank counts", PredictHierarchicalDoublingAllReduce,
       HierarchicalDoublingAllReduce, false, GridUse::kHost},

      {C::kBroadcast, "chain", "pipelined chain from the root: every link carries the buffer once", Everywhere, "",
       PredictChainBroadcast, ChainBroadcast, true},
      {C::kReduce, "chain", "pipelined chain ending at the root, reducing on the way: every link carries the buffer once",
       Everywhere, "", PredictChainReduce, ChainReduce, true},

      {C::kAllGather, "ring", "p - 1 steps around a ring, each block forwarded as it arrives", Everywhere, "",
       PredictRingAllGather, RingAllGather, true},
      {C::kAllGather, "hierarchical", "column ring across hosts, then row ring inside them, on the host grid",
       HasHostGrid, kNoHostGrid, PredictHostGridAllGather, HostGridAllGather, true, GridUse::kHost, true, "grid"},
      {C::kAllGather, "torus", "column ring, then row ring, on the torus grid (TESSERA_TORUS)", HasTorusGridOfRings,
       kNoTorusGrid, PredictTorusGridAllGather, TorusGridAllGather, true, GridUse::kTorus, false, "grid"},

      {C::kReduceScatter, "ring", "p - 1 steps around a ring, each partial forwarded as soon as reduced", Everywhere,
       "", PredictRingReduceScatter, RingReduceScatter, true},
      {C::kReduceScatter, "hierarchical", "row ring inside hosts, then column ring across them, on the host grid",
       HasHostGrid, kNoHostGrid, PredictHostGridReduceScatter, HostGridReduceScatter, true, GridUse::kHost, true,
       "grid"},
      {C::kReduceScatter, "torus", "row ring, then column ring, on the torus grid (TESSERA_TORUS)",
       HasTorusGridOfRings, kNoTorusGrid, PredictTorusGridReduceScatter, TorusGridReduceScatter, true, GridUse::kTorus,
       false, "grid"},

      {C::kAlltoAll, "pairwise", "every send and receive at once, ordered by distance", Everywhere, "",
       PredictPairwiseAlltoAll, PairwiseAlltoAll, false},
      {C::kGather, "direct", "every rank sends its block straight to the root", Everywhere, "", PredictDirectGather,
       DirectGather, false},
      {C::kScatter, "direct", "the root sends every rank its block directly", Everywhere, "", PredictDirectScatter,
       DirectScatter, false},
  };
}

// " XxY" of the row's grid on this shape for `bytes`; "" for a schedule on no grid.
std::string GridDims(const AlgorithmInfo& a, const CostModel& m, const Shape& s, size_t bytes) {
  if (a.grid == GridUse::kNone) return "";
  if (a.grid == GridUse::kHost) return " " + std::to_string(s.per_host) + "x" + std::to_string(s.hosts);
  const int X = a.collective == OpKind::kAllReduce ? TorusWidthFor(m, s, bytes) : s.torus_x;
  return " " + std::to_string(X) + "x" + std::to_string(s.p / X);
}

std::string ForcedText(const AlgorithmInfo& a, const CostModel& m, const Shape& s, size_t bytes) {
  if (a.grid == GridUse::kNone) return "forced by TESSERA_ALGO";
  return std::string("forced by TESSERA_ALGO: the ") + (a.grid == GridUse::kHost ? "host" : "torus") + " grid" +
         GridDims(a, m, s, bytes);
}

// Every automatic row's prediction (or why it does not apply), and why `chosen` is not
// the fastest when it is not.
std::string PredictionsText(OpKind c, const std::string& forced, const CostModel& m, const Shape& s, size_t bytes,
                            const Selection& fastest, const Selection& chosen) {
  std::string text = forced == "auto" ? "" : "TESSERA_ALGO=" + forced + " does not apply to " + OpName(c) + " here; ";
  text += "predicted: ";
  const char* separator = "";
  for (const AlgorithmInfo& a : AlgorithmsOf(c)) {
    if (!a.automatic) continue;
    text += separator;
    separator = ", ";
    if (!a.applies(s)) {
      text += std::string(a.Label()) + ": " + a.not_applicable;
      continue;
    }
    char item[32];
    std::snprintf(item, sizeof(item), " %.1f us", a.predict(m, s, bytes) * 1e6);
    text += a.Label() + GridDims(a, m, s, bytes) + item;
  }
  if (chosen.algo != fastest.algo) {
    text += "; " + std::string(chosen.algo->Label()) + " is pipelined and within " +
            std::to_string(std::lround(kPipelinedPreference * 100)) + "% of " + fastest.algo->Label();
  }
  return text;
}

// The measured choice of `c` on this layout for `bytes`: the row of the layout with the
// largest from_bytes <= bytes, when its algorithm applies here; else null.
const AlgorithmInfo* MeasuredAlgorithm(OpKind c, const CostModel& m, const Shape& s, size_t bytes) {
  const MeasuredChoice* best = nullptr;
  for (const MeasuredChoice& row : m.measured) {
    if (row.hosts != s.hosts || row.per_host != s.per_host || row.from_bytes > bytes) continue;
    if (row.collective != OpName(c)) continue;
    if (best == nullptr || row.from_bytes >= best->from_bytes) best = &row;
  }
  const AlgorithmInfo* a = best != nullptr ? FindAlgorithm(c, best->algorithm) : nullptr;
  return a != nullptr && a->applies(s) ? a : nullptr;
}

}  // namespace

Status CheckMeasuredChoices(const std::vector<MeasuredChoice>& rows, const std::string& path) {
  for (const MeasuredChoice& row : rows) {
    OpKind c;
    if (!OpKindByName(row.collective, &c) || !IsCollective(c)) {
      return InvalidArgument(path + ":" + std::to_string(row.line) + ": no collective '" + row.collective + "'");
    }
    if (FindAlgorithm(c, row.algorithm) == nullptr) {
      return InvalidArgument(path + ":" + std::to_string(row.line) + ": " + row.collective + " has no algorithm '" +
                             row.algorithm + "'");
    }
  }
  return Status::Ok();
}

size_t PredictedBytes(OpKind c, int nranks, size_t count, size_t elem_size) {
  const bool blocks = c == OpKind::kAllGather || c == OpKind::kReduceScatter || c == OpKind::kAlltoAll ||
                      c == OpKind::kGather || c == OpKind::kScatter;
  return (blocks ? static_cast<size_t>(nranks) : 1) * count * elem_size;
}

const std::vector<AlgorithmInfo>& AlgorithmsOf(OpKind c) {
  static const auto* tables = [] {
    auto* t = new std::array<std::vector<AlgorithmInfo>, kNumOpKinds>();  // none for sends and receives
    for (const AlgorithmInfo& row : Rows()) (*t)[static_cast<int>(row.collective)].push_back(row);
    return t;
  }();
  return (*tables)[static_cast<int>(c)];
}

const AlgorithmInfo* FindAlgorithm(OpKind c, const std::string& name) {
  for (const AlgorithmInfo& a : AlgorithmsOf(c)) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

double PredictSeconds(OpKind c, const std::string& name, const CostModel& m, const Shape& s, size_t bytes) {
  const AlgorithmInfo* a = FindAlgorithm(c, name);
  return a != nullptr && a->applies(s) ? a->predict(m, s, bytes) : -1;
}

Status CheckAlgorithmName(const std::string& name) {
  if (name == "auto") return Status::Ok();
  std::string names = "auto";
  for (const auto& a : AlgorithmsOf(OpKind::kAllReduce)) {
    if (name == a.name) return Status::Ok();
    names += std::string(", ") + a.name;
  }
  return InvalidArgument("TESSERA_ALGO='" + name + "' is not one of: " + names);
}

std::vector<const AlgorithmInfo*> Contenders(OpKind c, const CostModel& m, const Shape& s, size_t bytes) {
  double best = -1;
  std::vector<std::pair<const AlgorithmInfo*, double>> rows;
  for (const AlgorithmInfo& a : AlgorithmsOf(c)) {
    if (!a.automatic || !a.applies(s)) continue;
    rows.emplace_back(&a, a.predict(m, s, bytes));
    if (best < 0 || rows.back().second < best) best = rows.back().second;
  }
  std::vector<const AlgorithmInfo*> out;
  for (const auto& [a, t] : rows) {
    if (t <= best * kContenderSpread) out.push_back(a);
  }
  return out;
}

Selection SelectAlgorithm(OpKind c, const std::string& forced, const CostModel& m, const Shape& s, size_t bytes,
                          std::string* why) {
  if (forced != "auto") {
    const AlgorithmInfo* a = FindAlgorithm(c, forced);
    if (a != nullptr && a->applies(s)) {
      if (why != nullptr) *why = ForcedText(*a, m, s, bytes);
      return Selection{a, a->predict(m, s, bytes)};
    }
  }
  if (const AlgorithmInfo* a = MeasuredAlgorithm(c, m, s, bytes)) {
    if (why != nullptr) *why = "measured on this layout (TESSERA_ALGO_TABLE)";
    return Selection{a, a->predict(m, s, bytes)};
  }
  Selection fastest, pipelined;
  for (const AlgorithmInfo& a : AlgorithmsOf(c)) {
    if (!a.automatic || !a.applies(s)) continue;
    const double t = a.predict(m, s, bytes);
    if (fastest.algo == nullptr || t < fastest.predicted_s) fastest = Selection{&a, t};
    if (a.pipelined && (pipelined.algo == nullptr || t < pipelined.predicted_s)) pipelined = Selection{&a, t};
  }
  const size_t block = bytes / static_cast<size_t>(std::max(s.p, 1));
  const bool near_tie = block >= kPipelinedFromBlockBytes && fastest.algo != nullptr && !fastest.algo->pipelined &&
                        pipelined.algo != nullptr &&
                        pipelined.predicted_s <= fastest.predicted_s * (1 + kPipelinedPreference);
  const Selection chosen = near_tie ? pipelined : fastest;
  if (why != nullptr) *why = PredictionsText(c, forced, m, s, bytes, fastest, chosen);
  return chosen;
}

}  // namespace tessera
