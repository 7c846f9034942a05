#include "comm/deterministic_reduction.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/fixed_point.h"
#include "elementwise/reduce_kernels.h"

namespace tessera {
namespace {

// One call's grid: its type's format, the agreed keys and where the segments are kept.
struct GridCall {
  const Operation& op;
  const std::vector<const void*>& inputs;
  const GridRunner& runner;
  const CollectiveContext& ctx;
  GridFormat format;
  std::vector<int32_t> keys;  // one per block of the call's input, then the parts count
  size_t segment = 1;         // elements per segment
  Scratch wire;               // a segment's grid values
  Scratch out;                // a segment's result in the call's type, when padded
  ElementwiseOps* average = nullptr;  // set for avg: results are divided by the ranks

  size_t es() const { return SizeOf(op.type); }
  size_t wb() const { return format.wire_bytes(); }
  char* wire_at(size_t element) const { return wire.data() + element * wb(); }
  const char* input(size_t j, size_t element) const { return static_cast<const char*>(inputs[j]) + element * es(); }
  // Every input's elements [first, first + n) of the vector, onto the grid at `to`.
  void ToGridAll(size_t first, size_t n, char* to) const {
    for (size_t j = 0; j < inputs.size(); ++j) ToGrid(op.type, input(j, first), n, first, keys.data(), to, j > 0);
  }
  // Results [at, at + n) of the call's type are final: avg divides them (while in cache).
  Status Finish(char* at, size_t n) const {
    return average == nullptr ? Status::Ok() : average->Divide(op.type, at, n, runner.nranks);
  }
};

// The args of a collective on grid values: `count` elements of the format, summed.
Status WireArgs(const GridCall& g, const void* send, void* recv, size_t count, CollectiveArgs* args) {
  args->send = send;
  args->recv = recv;
  args->count = count * g.format.words;
  args->elem_size = SizeOf(g.format.wire);
  args->root = g.op.root;
  TESSERA_RETURN_IF_ERROR(GetReducer(g.format.wire, RedOp::kSum, &args->reducer));
  args->reducer.typed = true;
  args->reducer.type = g.format.wire;
  args->reducer.op = RedOp::kSum;
  return Status::Ok();
}

// Step 1: the keys of every block over every rank's contributions, and the most parts any
// rank has (the keys' last entry), within kMaxGridContributions in all.
Status AgreeOnKeys(size_t in_count, GridCall* g) {
  g->keys.assign(GridBlocks(in_count) + 1, 0);
  for (const void* in : g->inputs) MaxGridKeys(g->op.type, in, in_count, g->keys.data());
  g->keys.back() = static_cast<int32_t>(g->inputs.size());
  if (g->runner.nranks > 1) {
    CollectiveArgs args;
    args.send = args.recv = g->keys.data();
    args.count = g->keys.size();
    args.elem_size = sizeof(int32_t);
    TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kInt32, RedOp::kMax, &args.reducer));
    args.reducer.typed = true;
    args.reducer.type = DataType::kInt32;
    args.reducer.op = RedOp::kMax;
    TESSERA_RETURN_IF_ERROR(g->runner.dispatch(OpKind::kAllReduce, args).Annotate("agreeing on the grid"));
  }
  const int64_t contributions = static_cast<int64_t>(g->keys.back()) * g->runner.nranks;
  if (contributions > kMaxGridContributions) {
    return InvalidArgument("deterministic mode adds at most " + std::to_string(kMaxGridContributions) +
                           " contributions exactly; " + std::to_string(g->runner.nranks) + " ranks of up to " +
                           std::to_string(g->keys.back()) + " parts may hold " + std::to_string(contributions));
  }
  return Status::Ok();
}

// The model's seconds for `bytes` of `c` under auto.
double Predict(const GridCall& g, OpKind c, size_t bytes) {
  return SelectAlgorithm(c, "auto", *g.runner.model, *g.runner.shape, bytes).predicted_s;
}

// The model's seconds for n elements run keyed: as one allreduce of grid values
// (`whole`), and as a reduce-scatter of grid values and an allgather of the call's type.
struct KeyedSeconds {
  double whole, split;
};
KeyedSeconds PredictKeyed(const GridCall& g, size_t n) {
  const size_t p = static_cast<size_t>(g.runner.nranks), block = (n + p - 1) / p;
  return {Predict(g, OpKind::kAllReduce, n * g.wb()),
          Predict(g, OpKind::kReduceScatter, block * p * g.wb()) +
              Predict(g, OpKind::kAllGather, block * p * g.es())};
}

// Whether an allreduce segment of n elements runs as reduce-scatter + allgather.
bool SplitsAllReduce(const GridCall& g, size_t n) {
  if (g.runner.nranks == 1) return false;
  const std::string& algo = g.runner.settings->algo;
  if (algo == "ring" || algo == "torus" || algo == "hierarchical") return true;
  if (algo != "auto") return false;
  const KeyedSeconds keyed = PredictKeyed(g, n);
  return keyed.split < keyed.whole;
}

// An allreduce segment [first, first + n) as one allreduce of grid values.
Status AllReduceSegment(GridCall& g, size_t first, size_t n) {
  g.ToGridAll(first, n, g.wire.data());
  CollectiveArgs args;
  TESSERA_RETURN_IF_ERROR(WireArgs(g, g.wire.data(), g.wire.data(), n, &args));
  TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kAllReduce, args));
  char* result = static_cast<char*>(g.op.recv) + first * g.es();
  FromGrid(g.op.type, g.wire.data(), n, first, g.keys.data(), result);
  return g.Finish(result, n);
}

// An allreduce segment as a reduce-scatter of grid values into p blocks of b (the last
// ones padded with zeros), each rank's block back to the call's type, and an allgather of
// that type: into the result itself when the blocks fill the segment, else into `out`.
Status SplitSegment(GridCall& g, size_t first, size_t n) {
  const int p = g.runner.nranks, r = g.runner.rank;
  const size_t b = (n + p - 1) / p, padded = b * p;
  g.ToGridAll(first, n, g.wire.data());
  std::memset(g.wire_at(n), 0, (padded - n) * g.wb());
  CollectiveArgs rs;
  TESSERA_RETURN_IF_ERROR(WireArgs(g, g.wire.data(), g.wire_at(r * b), b, &rs));
  TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kReduceScatter, rs));
  char* result = static_cast<char*>(g.op.recv) + first * g.es();
  char* gathered = padded == n ? result : g.out.data();
  const size_t mine = std::min(b, n - std::min(n, r * b));  // this rank's elements before the padding
  FromGrid(g.op.type, g.wire_at(r * b), mine, first + r * b, g.keys.data(), gathered + r * b * g.es());
  TESSERA_RETURN_IF_ERROR(g.Finish(gathered + r * b * g.es(), mine));
  std::memset(gathered + (r * b + mine) * g.es(), 0, (b - mine) * g.es());
  CollectiveArgs ag;
  ag.send = gathered + r * b * g.es();
  ag.recv = gathered;
  ag.count = b;
  ag.elem_size = g.es();
  TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kAllGather, ag));
  if (gathered != result) std::memcpy(result, gathered, n * g.es());
  return Status::Ok();
}

// How a tesseraAllReduce (not ...Parts: ranks may hold different numbers of parts) runs.
//  - kKeyed: the keys agreed first, then segments of grid values (GridAllReduce).
//  - kGather: an allgather of the inputs, every rank putting all of them on the grid
//    itself: no agreement step (every rank sees every input), one collective; for small
//    sizes.
//  - kExchange: an alltoall hands rank r block r of every rank's input (whole grid
//    blocks), each rank sums its block on the grid, and an allgather of the call's type
//    assembles the result: the default mode's bytes, no agreement step, no grid values on
//    the wire, and 1/p of the grid work on each rank. The elements after the last whole
//    p grid blocks (fewer than p * kGridBlock) go the gather way.
// TESSERA_DETERMINISTIC_PLAN names one; under auto, TESSERA_ALGO's forced names mean
// kKeyed and auto asks the cost model.
enum class AllReducePlan { kKeyed, kGather, kExchange };

AllReducePlan ChooseAllReducePlan(const GridCall& g) {
  const int p = g.runner.nranks;
  const std::string& forced = g.runner.settings->deterministic_plan;
  if (p == 1 || !g.op.parts.empty() || forced == "keyed") return AllReducePlan::kKeyed;
  if (forced == "gather") return AllReducePlan::kGather;
  if (forced == "exchange") return AllReducePlan::kExchange;
  if (g.runner.settings->algo != "auto") return AllReducePlan::kKeyed;
  const size_t count = g.op.count, es = g.es();
  auto summed = [&](size_t bytes) { return static_cast<double>(bytes) * g.runner.model->gamma; };  // read once
  const double gather = Predict(g, OpKind::kAllGather, count * p * es) + summed(count * p * es);
  const KeyedSeconds run = PredictKeyed(g, count);
  const double keyed = Predict(g, OpKind::kAllReduce, 4 * (GridBlocks(count) + 1)) + std::min(run.whole, run.split);
  if (count >= p * kGridBlock) {  // at least one whole exchange
    const double exchange = Predict(g, OpKind::kAlltoAll, count * es) +
                            Predict(g, OpKind::kAllGather, count * es) + summed(count * es);
    if (exchange < std::min(gather, keyed)) return AllReducePlan::kExchange;
  }
  return gather < keyed ? AllReducePlan::kGather : AllReducePlan::kKeyed;
}

// The gather plan for elements [begin, end) (begin a whole number of blocks), segment by
// segment of whole blocks (so that a segment's keys, computed here from every rank's
// input, are the whole vector's).
Status GatherAllReduce(GridCall& g, size_t begin, size_t end) {
  const size_t p = static_cast<size_t>(g.runner.nranks), es = g.es();
  const size_t segment = std::min(end - begin, std::max(kGridBlock, g.segment / kGridBlock * kGridBlock));
  Scratch gathered;
  TESSERA_RETURN_IF_ERROR(gathered.Allocate(g.ctx, p * segment * es));
  std::vector<const void*> inputs(p);
  for (size_t first = begin; first < end; first += segment) {
    const size_t n = std::min(segment, end - first);
    CollectiveArgs ag;
    ag.send = g.input(0, first);
    ag.recv = gathered.data();
    ag.count = n;
    ag.elem_size = es;
    TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kAllGather, ag));
    for (size_t j = 0; j < p; ++j) inputs[j] = gathered.data() + j * n * es;
    char* result = static_cast<char*>(g.op.recv) + first * es;
    GridSum(g.op.type, inputs.data(), p, n, result);
    TESSERA_RETURN_IF_ERROR(g.Finish(result, n));
  }
  return Status::Ok();
}

// Whether two ranks exchange and sum in one reduce-scatter whose reducer sums each pair
// of grid blocks as it arrives (GridPairReducer), saving the copy out of the transport's
// buffers: every piece a transport reduces must then hold whole grid blocks, so its slot
// or chunk size must be a multiple of a block's bytes (the defaults are).
bool PairsOnArrival(const GridCall& g) {
  if (g.runner.nranks != 2) return false;
  const int64_t block = static_cast<int64_t>(kGridBlock * g.es());
  const Settings& s = *g.runner.settings;
  for (int64_t piece : {s.shm_slot_bytes, s.tcp_chunk_bytes, s.ucx_chunk_bytes, s.ib_slot_bytes}) {
    if (piece % block != 0) return false;
  }
  return true;
}

// Block r (b elements from `first`) of every rank's input, summed on the grid into `mine`.
// `pairs`: PairsOnArrival; else the alltoall lands in `blocks`.
Status SumBlockOfEveryRank(GridCall& g, size_t first, size_t b, bool pairs, Scratch& blocks, char* mine) {
  const size_t p = static_cast<size_t>(g.runner.nranks), r = static_cast<size_t>(g.runner.rank), es = g.es();
  CollectiveArgs args;
  args.send = g.input(0, first);
  if (pairs) {
    args.recv = mine;
    args.count = b / kGridBlock;
    GridPairReducer(g.op.type, &args.reducer);
    args.elem_size = args.reducer.elem_size;
    return g.runner.dispatch(OpKind::kReduceScatter, args);
  }
  args.recv = blocks.data();
  args.count = b;
  args.elem_size = es;
  args.skip_own_block = true;
  TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kAlltoAll, args));
  std::vector<const void*> inputs(p);
  for (size_t j = 0; j < p; ++j) inputs[j] = j == r ? g.input(0, first + r * b) : blocks.data() + j * b * es;
  GridSum(g.op.type, inputs.data(), p, b, mine);
  return Status::Ok();
}

// The exchange plan, segment by segment of p equal runs of whole blocks.
Status ExchangeAllReduce(GridCall& g) {
  const size_t count = g.op.count, p = static_cast<size_t>(g.runner.nranks), r = static_cast<size_t>(g.runner.rank);
  const size_t es = g.es(), unit = p * kGridBlock, whole = count / unit * unit;
  const size_t segment = std::max(unit, g.segment / unit * unit);
  char* recv = static_cast<char*>(g.op.recv);
  const bool pairs = PairsOnArrival(g);
  Scratch blocks;
  if (!pairs) TESSERA_RETURN_IF_ERROR(blocks.Allocate(g.ctx, std::min(segment, whole) * es));
  for (size_t first = 0; first < whole; first += segment) {
    const size_t b = std::min(segment, whole - first) / p;
    char* mine = recv + (first + r * b) * es;
    TESSERA_RETURN_IF_ERROR(SumBlockOfEveryRank(g, first, b, pairs, blocks, mine));
    TESSERA_RETURN_IF_ERROR(g.Finish(mine, b));
    CollectiveArgs ag;
    ag.send = mine;
    ag.recv = recv + first * es;
    ag.count = b;
    ag.elem_size = es;
    TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kAllGather, ag));
  }
  return whole < count ? GatherAllReduce(g, whole, count) : Status::Ok();
}

Status GridAllReduce(GridCall& g) {
  const size_t count = g.op.count, p = static_cast<size_t>(g.runner.nranks);
  g.segment = std::max(p, g.segment / p * p);  // whole segments split into p equal blocks
  TESSERA_RETURN_IF_ERROR(g.wire.Allocate(g.ctx, (g.segment + p) * g.wb()));
  TESSERA_RETURN_IF_ERROR(g.out.Allocate(g.ctx, (g.segment + p) * g.es()));
  for (size_t first = 0; first < count; first += g.segment) {
    const size_t n = std::min(g.segment, count - first);
    TESSERA_RETURN_IF_ERROR(SplitsAllReduce(g, n) ? SplitSegment(g, first, n) : AllReduceSegment(g, first, n));
  }
  return Status::Ok();
}

// Reduce: each segment's grid values reduced to the root, which brings them back.
Status GridReduce(GridCall& g) {
  const size_t count = g.op.count;
  const bool root = g.runner.rank == g.op.root;
  TESSERA_RETURN_IF_ERROR(g.wire.Allocate(g.ctx, g.segment * g.wb()));
  for (size_t first = 0; first < count; first += g.segment) {
    const size_t n = std::min(g.segment, count - first);
    g.ToGridAll(first, n, g.wire.data());
    CollectiveArgs args;
    TESSERA_RETURN_IF_ERROR(WireArgs(g, g.wire.data(), g.wire.data(), n, &args));
    TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kReduce, args));
    if (!root) continue;
    char* result = static_cast<char*>(g.op.recv) + first * g.es();
    FromGrid(g.op.type, g.wire.data(), n, first, g.keys.data(), result);
    TESSERA_RETURN_IF_ERROR(g.Finish(result, n));
  }
  return Status::Ok();
}

// Reduce-scatter of p blocks of `count`: segment [off, off + n) of every block goes onto
// the grid side by side (block j's elements are elements j * count + off... of the
// vector), is reduce-scattered, and this rank's comes back.
Status GridReduceScatter(GridCall& g) {
  const size_t count = g.op.count, p = static_cast<size_t>(g.runner.nranks), r = static_cast<size_t>(g.runner.rank);
  const size_t per_block = std::max<size_t>(1, g.segment / p);
  TESSERA_RETURN_IF_ERROR(g.wire.Allocate(g.ctx, per_block * p * g.wb()));
  for (size_t off = 0; off < count; off += per_block) {
    const size_t n = std::min(per_block, count - off);
    for (size_t j = 0; j < p; ++j) g.ToGridAll(j * count + off, n, g.wire_at(j * n));
    CollectiveArgs args;
    TESSERA_RETURN_IF_ERROR(WireArgs(g, g.wire.data(), g.wire_at(r * n), n, &args));
    TESSERA_RETURN_IF_ERROR(g.runner.dispatch(OpKind::kReduceScatter, args));
    char* result = static_cast<char*>(g.op.recv) + off * g.es();
    FromGrid(g.op.type, g.wire_at(r * n), n, r * count + off, g.keys.data(), result);
    TESSERA_RETURN_IF_ERROR(g.Finish(result, n));
  }
  return Status::Ok();
}

}  // namespace

bool ReducesOnGrid(const Operation& op, RedOp base, bool custom) {
  GridFormat format;
  return GridFormatOf(op.type, &format) && (custom || base == RedOp::kSum || base == RedOp::kAvg);
}

Status RunGridReduction(const Operation& op, RedOp base, const std::vector<const void*>& inputs,
                        const GridRunner& runner, const CollectiveContext& ctx, ElementwiseOps& elementwise) {
  GridCall g{op, inputs, runner, ctx, {}, {}, 1, {}, {}, base == RedOp::kAvg ? &elementwise : nullptr};
  GridFormatOf(op.type, &g.format);
  const bool scatter = op.kind == OpKind::kReduceScatter;
  const size_t in_count = op.count * (scatter ? runner.nranks : 1);
  g.segment = std::max<size_t>(1, static_cast<size_t>(runner.settings->deterministic_segment_bytes) / g.wb());
  if (runner.nranks > kMaxGridContributions) {
    return InvalidArgument("deterministic mode adds at most " + std::to_string(kMaxGridContributions) +
                           " contributions exactly, and this communicator has " + std::to_string(runner.nranks) +
                           " ranks");
  }
  Status s;
  const AllReducePlan plan = op.kind == OpKind::kAllReduce ? ChooseAllReducePlan(g) : AllReducePlan::kKeyed;
  if (plan == AllReducePlan::kExchange) {
    s = ExchangeAllReduce(g);
  } else if (plan == AllReducePlan::kGather) {
    s = GatherAllReduce(g, 0, op.count);
  } else {
    TESSERA_RETURN_IF_ERROR(AgreeOnKeys(in_count, &g));
    s = op.kind == OpKind::kAllReduce ? GridAllReduce(g) : scatter ? GridReduceScatter(g) : GridReduce(g);
  }
  return s.Annotate("deterministic");
}

}  // namespace tessera
