// The cost-model probe (cost_model_probe.h): ring allreduces of one element per rank
// between neighbours in pairs and of 1 MiB round each host's row and each column of at
// most kProbeHosts hosts, 8-byte recursive doubling and hierarchical_leader calls where
// ranks outnumber cores, the float32 sum in cache; then every parameter's median over
// the ranks, gathered round the ring of all ranks (2(p-1) steps; recursive doubling
// would take lg p, docs/scale.md#creation-at-scale says why it does not).
#include "collectives/cost_model_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "collectives/algorithms.h"
#include "collectives/grid.h"
#include "collectives/ring_allreduce.h"
#include "collectives/ring_pattern.h"
#include "collectives/topology_allreduce.h"
#include "elementwise/reduce_kernels.h"

namespace tessera {
namespace {

// Small probe rings timed back to back, per timing: a rank times its ring from its own
// start, so one timed alone includes how long it waited for a partner still finishing
// the previous one (or nothing, for the last to arrive), which varies by orders of
// magnitude between creations; over many rings that wait is paid once.
constexpr int kSmallRingsPerTiming = 16;

// The ranks of `group` the small probe times together: neighbours in pairs (positions
// 2j, 2j+1), the last three together when the group is odd. A latency-bound schedule's
// step is one exchange between two ranks, all pairs at once, and a ring of two is two
// such exchanges; round the whole group a small ring chains its steps through every
// rank instead. Some ranks still see a step several times the typical one; the median
// over ranks (AgreeOnMedians) keeps those out of the model.
RingGroup ProbePairOf(const RingGroup& group) {
  const int q = static_cast<int>(group.ranks.size());
  const int first = q % 2 == 1 && group.pos >= q - 3 ? q - 3 : group.pos - group.pos % 2;
  const int end = std::min(q, first == q - 3 ? q : first + 2);
  return RingGroup{std::vector<int>(group.ranks.begin() + first, group.ranks.begin() + end), group.pos - first};
}

// `rings` ring allreduces of `count` float32 over `group`, back to back.
Status RunRings(const CollectiveContext& ctx, const RingGroup& group, size_t count, int rings, char* buf) {
  Reducer sum;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat32, RedOp::kSum, &sum));
  for (int i = 0; i < rings; ++i) {
    TESSERA_RETURN_IF_ERROR(RunRing(ctx, group, buf, buf, count, 4, &sum, kRingReduceScatter | kRingAllGather));
  }
  return Status::Ok();
}

// Five timings of `run` (a Status()), each over `per`: the best, or with `median` the
// middle one.
template <typename Run>
Status FiveTimings(Run run, int per, bool median, double* seconds) {
  double timings[5];
  for (double& t : timings) {
    const int64_t start = NowMicros();
    TESSERA_RETURN_IF_ERROR(run());
    t = (NowMicros() - start) * 1e-6 / per;
  }
  std::sort(timings, timings + 5);
  *seconds = median ? timings[2] : timings[0];
  return Status::Ok();
}

// Five timings of RunRings, in seconds per ring (the best). With `together`, each
// timing starts and ends with a ring of one element per rank round it (every rank
// waits for all), so that it covers the rings of all of them: those that share a link.
Status TimeRings(const CollectiveContext& ctx, const RingGroup& group, size_t count, int rings, char* buf,
                 double* seconds, const RingGroup* together = nullptr) {
  const size_t together_count = together != nullptr ? together->ranks.size() : 0;
  auto run = [&]() -> Status {
    if (together_count > 1) TESSERA_RETURN_IF_ERROR(RunRings(ctx, *together, together_count, 1, buf));
    TESSERA_RETURN_IF_ERROR(RunRings(ctx, group, count, rings, buf));
    if (together_count > 1) TESSERA_RETURN_IF_ERROR(RunRings(ctx, *together, together_count, 1, buf));
    return Status::Ok();
  };
  return FiveTimings(run, rings, false, seconds);
}

// alpha and beta of the links of `group`: alpha from ring allreduces of one element
// per rank over this rank's probe pair (ProbePairOf; kSmallRingsPerTiming to a timing),
// beta from a ring allreduce of 1 MiB round the whole group (the best of five timings
// each, after a round that connects the links). `sharing`, when not null, are the
// ranks whose groups run beside this one over the same links (a host's columns): the
// large ring is timed from when all of them start until all end (TimeRings).
// The best timing, also where ranks outnumber cores: alpha is what a step adds to its
// transfer, and the wait for a peer to get a core is the step floor's (MeasureStepFloor),
// which a step's transfer overlaps. The median would take that wait in, which varies by
// an order of magnitude between creations, and misprice the round-based schedules
// (docs/algorithms.md#where-the-parameters-come-from).
Status MeasureRing(const CollectiveContext& ctx, const RingGroup& group, LinkCost* cost,
                   const RingGroup* sharing = nullptr) {
  const int q = static_cast<int>(group.ranks.size());
  if (q < 2) return Status::Ok();
  const size_t big = 1 << 20;
  std::vector<char> buf(big, 0);
  TESSERA_RETURN_IF_ERROR(RunRings(ctx, group, 2, 1, buf.data()));  // connects the links
  // The small ring sends one element per step: fewer elements than ranks would leave
  // blocks empty, and empty blocks are not sent, so the ring would time fewer steps
  // than alpha is divided by.
  const RingGroup pair = ProbePairOf(group);
  const int g = static_cast<int>(pair.ranks.size());
  double small = 0, large = 0;
  TESSERA_RETURN_IF_ERROR(
      TimeRings(ctx, pair, static_cast<size_t>(g), kSmallRingsPerTiming, buf.data(), &small));
  TESSERA_RETURN_IF_ERROR(TimeRings(ctx, group, big / 4, 1, buf.data(), &large, sharing));
  const double steps = 2.0 * (q - 1);
  cost->alpha = std::max(1e-7, small / (2.0 * (g - 1)));
  // beta comes from a difference of two timings, so a slow small ring (ranks that
  // outnumber their cores stall now and then) can leave it near zero, and the model
  // would choose round-based schedules for large buffers. At least half of the large
  // ring's time is taken as transfer: true by far on any link where 1 MiB takes longer
  // than a few steps.
  const double transfer = std::max(large - cost->alpha * steps, large / 2);
  cost->beta = std::max(1e-12, transfer / (steps / q * static_cast<double>(big)));
  return Status::Ok();
}

// The probe's polls start afresh while it times small calls, as in a job of small
// calls, and take up their state again after: the large rings before may have made
// yields run late, and the policy then stops yielding for 100 ms
// (transport/progress_policy.h), so the timings would measure that state, not the calls.
class FreshPolls {
 public:
  explicit FreshPolls(ProgressPolicy* polls)
      : polls_(polls), before_(polls != nullptr ? polls->Save(NowMicros()) : ProgressPolicy::State{}) {
    if (polls_ != nullptr) polls_->Resume(ProgressPolicy::State{}, NowMicros());
  }
  ~FreshPolls() {
    if (polls_ != nullptr) polls_->Resume(before_, NowMicros());
  }
  FreshPolls(const FreshPolls&) = delete;
  FreshPolls& operator=(const FreshPolls&) = delete;

 private:
  ProgressPolicy* polls_;
  ProgressPolicy::State before_;
};

// Five timings of `calls` runs of `algo` over `args` (median, seconds per call), after
// one that connects the links.
Status TimeCalls(const CollectiveContext& ctx, const char* algo, const CollectiveArgs& args, int calls,
                 double* seconds) {
  const AlgorithmInfo* info = FindAlgorithm(OpKind::kAllReduce, algo);
  if (info == nullptr) return InternalError(std::string("the probe's algorithm ") + algo + " is not in the table");
  FreshPolls fresh(ctx.exchange.progress);
  TESSERA_RETURN_IF_ERROR(info->run(ctx, args));
  auto run = [&]() -> Status {
    for (int i = 0; i < calls; ++i) TESSERA_RETURN_IF_ERROR(info->run(ctx, args));
    return Status::Ok();
  };
  return FiveTimings(run, calls, true, seconds);
}

// A float32 sum of `count` elements in place over `buf`.
Status SumArgs(float* buf, size_t count, CollectiveArgs* args) {
  args->send = buf;
  args->recv = buf;
  args->count = count;
  args->elem_size = sizeof(float);
  return GetReducer(DataType::kFloat32, RedOp::kSum, &args->reducer);
}

// The floor of a step where ranks outnumber cores: recursive doubling allreduces of 8
// bytes over every rank (kSmallRingsPerTiming to a timing, the median of five), each
// call's time over `rounds` of its rounds: those that cross hosts, or all of them on
// one host. The probe's pairs run in step, while a whole call's ranks wait for one
// another's cores, so a round of a real call takes several times the pairs' alpha
// there. Every rank times; `crowded` ones report it.
Status MeasureStepFloor(const CollectiveContext& ctx, int rounds, bool crowded, double* floor) {
  float buf[2] = {1.0f, 1.0f};
  CollectiveArgs args;
  TESSERA_RETURN_IF_ERROR(SumArgs(buf, 2, &args));
  double call = 0;
  TESSERA_RETURN_IF_ERROR(TimeCalls(ctx, "recursive_doubling", args, kSmallRingsPerTiming, &call));
  *floor = crowded ? call / std::max(1, rounds) : 0;
  return Status::Ok();
}

// gamma: the float32 sum over two buffers of 64 KiB, in cache (best of 5 timings of 16
// passes). The rate a small or medium call reduces at, where the choice between
// schedules of fewer steps and of less volume is made; larger calls are decided by
// their transfers.
Status MeasureGamma(double* gamma) {
  Reducer sum;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat32, RedOp::kSum, &sum));
  constexpr size_t kCount = 16384, kPasses = 16;
  std::vector<float> a(kCount, 1.0f), b(kCount, 0.5f);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    for (size_t i = 0; i < kPasses; ++i) sum.fn(a.data(), a.data(), b.data(), kCount);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  *gamma = std::max(1e-13, best / (kPasses * kCount * sizeof(float)));
  return Status::Ok();
}

// The model's five, the step floor across, the ranks per core, a leaders' call's time,
// the step floor inside a host; the fabric: NICs, hosts per rack, uplink share, and
// whether the rank read a description (1) or not (0).
constexpr int kModelParams = 13;
constexpr int kFabricFirst = 9;

// Where some rank read a fabric description, every rank's racks and uplinks must be the
// same: InvalidArgument naming rank 0 and the first rank that differs, and what each
// has. NIC counts may differ (hwloc sees each host's own): the median is the model's.
Status CheckFabrics(const std::vector<double>& table, size_t p) {
  bool described = false;
  for (size_t r = 0; r < p; ++r) described |= table[r * kModelParams + kFabricFirst + 3] > 0;
  auto text = [&](size_t r) {
    const double* f = &table[r * kModelParams + kFabricFirst];
    char buf[128];
    std::snprintf(buf, sizeof(buf), "rank %zu: %g NIC(s) a host, racks of %g hosts, uplinks %g%%%s", r, f[0], f[1],
                  f[2] * 100, f[3] > 0 ? "" : " (nothing read)");
    return std::string(buf);
  };
  for (size_t r = 1; r < p && described; ++r) {
    for (int k = 1; k < 3; ++k) {
      if (table[r * kModelParams + kFabricFirst + k] != table[kFabricFirst + k]) {
        return InvalidArgument("the ranks describe different fabrics (topology/fabric.h): " + text(0) + "; " + text(r));
      }
    }
  }
  return Status::Ok();
}

// Every rank's parameters, and each one's median over the ranks (the lower middle for
// an even count: the same on every rank). Gathered as a max-allreduce of a table where
// each rank fills its own row and leaves the others 0 (none is negative).
// The median, not the maximum: each rank's figures are the best of five timings of
// its own pair or ring, and one slow pair, a different one at each creation, would set
// the maximum, and with it the choice of algorithm.
Status AgreeOnMedians(const CollectiveContext& ctx, const double (&mine)[kModelParams], double (&agreed)[kModelParams]) {
  Reducer max;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat64, RedOp::kMax, &max));
  const size_t p = static_cast<size_t>(ctx.nranks);
  std::vector<double> table(p * kModelParams, 0.0);
  std::copy(mine, mine + kModelParams, table.begin() + static_cast<size_t>(ctx.rank) * kModelParams);
  char* bytes = reinterpret_cast<char*>(table.data());
  TESSERA_RETURN_IF_ERROR(
      RunRing(ctx, WholeRing(ctx), bytes, bytes, table.size(), 8, &max, kRingReduceScatter | kRingAllGather));
  TESSERA_RETURN_IF_ERROR(CheckFabrics(table, p));
  std::vector<double> column(p);
  for (int k = 0; k < kModelParams; ++k) {
    for (size_t r = 0; r < p; ++r) column[r] = table[r * kModelParams + k];
    std::nth_element(column.begin(), column.begin() + (p - 1) / 2, column.end());
    agreed[k] = column[(p - 1) / 2];
  }
  return Status::Ok();
}

// The hosts a column's probe ring goes round: parts of at most kProbeHosts consecutive
// hosts of the column (RingPartOf). alpha and beta are per step, so a ring round 16
// hosts measures what one round 12,500 would, in a bounded number of steps; every part
// runs at once, so each host's link carries what it would.
constexpr int kProbeHosts = 16;
RingGroup ProbeBlock(const std::vector<int>& column, int pos) {
  const RingPart part = RingPartOf(static_cast<int>(column.size()), pos, kProbeHosts);
  return RingGroup{std::vector<int>(column.begin() + part.first, column.begin() + part.end), pos - part.first};
}

// The hierarchical_leader calls to a timing of the probe's (LeadersCallBytes).
constexpr int kLeadersCallsPerTiming = 4;

// The bytes of the hierarchical_leader calls the probe times: kLeadersStepBytes a ring
// step; 0 where none are timed (hosts of one rank, uneven hosts, more than kProbeHosts
// hosts, whose ring would take the probe too long).
size_t LeadersCallBytes(const Shape& shape) {
  const bool leaders = shape.hosts > 1 && shape.hosts <= kProbeHosts && shape.per_host > 1;
  return leaders ? kLeadersStepBytes * static_cast<size_t>(shape.hosts) : 0;
}

// Where ranks outnumber cores, whole hierarchical_leader calls of LeadersCallBytes
// (kLeadersCallsPerTiming to a timing, the median of five), in seconds per call, from
// which the model takes the leaders' alpha (LeadersAlphaOf): the leaders' calls pay the
// whole alpha across or none of it, as the job's ranks happen to share cores, which
// only timing them tells (docs/algorithms.md#leaders-alpha). Every rank times;
// `crowded` ones report it.
Status TimeLeadersCalls(const CollectiveContext& ctx, const Shape& shape, bool crowded, double* seconds) {
  const size_t bytes = LeadersCallBytes(shape);
  *seconds = 0;
  if (bytes == 0) return Status::Ok();
  std::vector<float> buf(bytes / sizeof(float), 1.0f);
  CollectiveArgs args;
  TESSERA_RETURN_IF_ERROR(SumArgs(buf.data(), buf.size(), &args));
  double call = 0;
  TESSERA_RETURN_IF_ERROR(TimeCalls(ctx, "hierarchical_leader", args, kLeadersCallsPerTiming, &call));
  *seconds = crowded ? call : 0;
  return Status::Ok();
}

// Which measurements a creation makes (the same on every rank: it depends on the
// shape and the settings, which every rank shares).
struct ProbePlan {
  bool rows = false;     // inside each host (the host grid's rows)
  bool columns = false;  // across hosts (its columns)
  bool crowded = false;  // one host whose ranks outnumber its cores
};

// On one host whose ranks fit its cores the defaults hold well, so a probe is opt-in
// there (level 2). Across hosts the links vary and matter (level 1), and the rows are
// measured too: with every rank busy, a step inside a host costs what scheduling the
// host's processes costs, not an idle shared-memory hop. So does one host whose ranks
// outnumber its cores.
ProbePlan PlanOf(const CollectiveContext& ctx, const ProbeOptions& options) {
  ProbePlan plan;
  const Grid* hosts = ctx.host_grid;
  const bool multi_host = hosts != nullptr && hosts->Y > 1;
  plan.crowded = !multi_host && ctx.nranks > options.host_cores;
  const bool measure = options.level >= 1 && !options.tuning_file;
  plan.rows = measure && hosts != nullptr && (multi_host || plan.crowded || options.level >= 2);
  plan.columns = measure && multi_host;
  return plan;
}

// The columns' large rings are timed together (the host's row waits for all of them
// before and after), so the X columns' flows share each host's link in every timing:
// the link itself moves X times what one flow measured, and the model charges sharing
// per schedule. Timed alone, each column's best of five would be one that ran while
// the others did not, and beta across would come out X times the link's.
Status MeasureColumns(const CollectiveContext& ctx, const RingGroup& row, bool kernel_crowded, CostModel* model,
                      const Shape& shape, double* leaders_call) {
  const Grid& g = *ctx.host_grid;
  TESSERA_RETURN_IF_ERROR(MeasureRing(ctx, ProbeBlock(g.cols[g.x[ctx.rank]], g.y[ctx.rank]), &model->inter, &row));
  model->inter.beta /= g.X;
  const int across = CrossHostRounds(shape, Log2Floor(shape.p));
  TESSERA_RETURN_IF_ERROR(MeasureStepFloor(ctx, across, kernel_crowded, &model->inter.floor));
  return TimeLeadersCalls(ctx, shape, kernel_crowded, leaders_call);
}

// Every rank's parameters, agreed (AgreeOnMedians) and put into the model and shape.
Status Agree(const CollectiveContext& ctx, const ProbePlan& plan, double ranks_per_core, double leaders_call,
             bool fabric_described, CostModel* model, Shape* shape) {
  CostModel& m = *model;
  const FabricShape& f = shape->fabric;
  const double mine[kModelParams] = {m.intra.alpha, m.intra.beta, m.inter.alpha, m.inter.beta, m.gamma,
                                     m.inter.floor, ranks_per_core, leaders_call, m.intra.floor,
                                     static_cast<double>(f.nics), static_cast<double>(f.hosts_per_rack),
                                     f.uplink_share, fabric_described ? 1.0 : 0.0};
  double agreed[kModelParams];
  TESSERA_RETURN_IF_ERROR(AgreeOnMedians(ctx, mine, agreed));
  shape->fabric = FabricShape{static_cast<int>(agreed[kFabricFirst]), static_cast<int>(agreed[kFabricFirst + 1]),
                              agreed[kFabricFirst + 2]};
  m.intra = LinkCost{agreed[0], agreed[1], agreed[8]};
  m.inter = LinkCost{agreed[2], agreed[3], agreed[5]};
  m.gamma = agreed[4];
  // What alpha across was measured with: every rank running (LeadersLink).
  if (plan.columns) shape->ranks_per_core = agreed[6];
  if (agreed[7] > 0) m.leaders_alpha = LeadersAlphaOf(m, *shape, LeadersCallBytes(*shape), agreed[7]);
  return Status::Ok();
}

}  // namespace

Status ProbeCostModel(const CollectiveContext& ctx, const ProbeOptions& options, CostModel* model, Shape* shape,
                      bool* agreed) {
  const ProbePlan plan = PlanOf(ctx, options);
  // Across hosts the fabric is always agreed: what a rank reads of it may differ.
  *agreed = plan.rows || plan.columns || options.tuning_file || shape->hosts > 1;
  if (!*agreed) return Status::Ok();
  const Grid* hosts = ctx.host_grid;  // both measurements need it
  const RingGroup row = hosts ? RingGroup{hosts->rows[hosts->y[ctx.rank]], hosts->x[ctx.rank]} : RingGroup{};
  const bool kernel_crowded = options.ranks_per_core > 1;
  double leaders_call = 0;  // seconds (TimeLeadersCalls)
  if (plan.rows) TESSERA_RETURN_IF_ERROR(MeasureRing(ctx, row, &model->intra));
  if (plan.rows && plan.crowded) {
    TESSERA_RETURN_IF_ERROR(MeasureStepFloor(ctx, Log2Floor(ctx.nranks), kernel_crowded, &model->intra.floor));
  }
  if (plan.columns) TESSERA_RETURN_IF_ERROR(MeasureColumns(ctx, row, kernel_crowded, model, *shape, &leaders_call));
  if (plan.rows || plan.columns) TESSERA_RETURN_IF_ERROR(MeasureGamma(&model->gamma));
  return Agree(ctx, plan, options.ranks_per_core, leaders_call, options.fabric_described, model, shape);
}

}  // namespace tessera
