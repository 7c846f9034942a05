#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/hash.h"
#include "collectives/algorithms.h"
#include "elementwise/reduce_kernels.h"
#include "collectives/ring_allreduce.h"
#include "collectives/ring_pattern.h"
#include "collectives/topology_allreduce.h"
#include "topology/host_identity.h"
#include "topology/layout.h"

namespace tessera {

Status Communicator::Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                            std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator());
  TESSERA_RETURN_IF_ERROR(c->Init(settings, id, nranks, rank));
  c->executor_ = std::make_unique<Executor>(c->Site());
  *out = std::move(c);
  return Status::Ok();
}

Communicator::~Communicator() {
  if (tracer_) {
    const std::string path = settings_.trace_dir + "/tessera-trace-" + std::to_string(getpid()) + "-rank" +
                             std::to_string(rank_) + ".json";
    Status s = tracer_->WriteChromeTrace(path, rank_);
    if (!s.ok()) Log(log_level_, LogLevel::kWarn, s.message());
  }
}

namespace {

// The settings every rank must agree on (base/settings.h: AgreedLines), as lines:
// TESSERA_TRANSPORT as the list of backends it stands for, TESSERA_ALGO_TABLE as a
// digest of the choices read from it ("" when there are none).
std::string AgreedSettings(const Settings& settings, const std::vector<std::string>& listed,
                           const std::vector<MeasuredChoice>& measured) {
  std::string list;
  for (const std::string& name : listed) list += (list.empty() ? "" : ",") + name;
  const std::string digest = measured.empty() ? "" : std::to_string(Fnv1a(CostModel::ChoicesToText(measured)));
  return AgreedLines(settings, listed, {{"TESSERA_TRANSPORT", list}, {"TESSERA_ALGO_TABLE", digest}});
}

// The card that tells the others which kernel (and so which cores) a rank runs on.
constexpr const char* kKernelCard = "kernel";

// The host's online cores. Not this process's affinity mask: mpirun binds each of 2
// ranks to a core of its own, and the ranks together still fit the host.
int HostCores() { return static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN))); }

// How many of the communicator's ranks share this rank's kernel, so its cores: the
// host's ranks, and those of other hosts emulated on this machine.
Status CountRanksOnMyKernel(const RankTable& all, int my_rank, int* count) {
  std::vector<std::string> kernels(all.size());
  for (int r = 0; r < all.size(); ++r) {
    TESSERA_RETURN_IF_ERROR(all.FindCard(r, kKernelCard, &kernels[r]).Annotate("rank " + std::to_string(r)));
  }
  *count = RanksOnMyKernel(kernels, my_rank);
  return Status::Ok();
}

// How this rank's waits poll (transport/progress_policy.h), from TESSERA_POLL and
// TESSERA_SPIN_US; a backend may ask for a longer budget (UCX wakes slowly).
// `kernel_ranks`: the ranks whose processes share this rank's cores.
ProgressSettings ChooseProgress(const Settings& settings, int kernel_ranks, int64_t spin_hint_us) {
  ProgressSettings p;
  const bool crowded = kernel_ranks > HostCores();
  const bool yields = settings.poll == "yield" || (settings.poll == "auto" && crowded);
  p.mode = yields ? PollMode::kYield : PollMode::kRelax;
  p.spin_us = std::max(settings.spin_us, spin_hint_us);
  p.kernel_ranks = kernel_ranks;
  return p;
}

}  // namespace

Status Communicator::Init(const Settings& settings, const UniqueIdData& id, int nranks, int rank) {
  TESSERA_RETURN_IF_ERROR(CheckAlgorithmName(settings.algo));
  settings_ = settings;
  log_level_ = ParseLogLevel(settings.debug);
  rank_ = rank;
  nranks_ = nranks;
  const Deadline deadline = Deadline::AfterMs(settings.timeout_ms);

  RankInfo mine;
  mine.pid = getpid();
  std::string host = HostIdentity(settings.host_id);
  if (!settings.topo_file.empty()) {
    TESSERA_RETURN_IF_ERROR(HostIdFromLayoutFile(settings.topo_file, rank, nranks, &host).Annotate("TESSERA_TOPO_FILE"));
  }
  host = host.substr(0, kMaxHostBytes);
  mine.host = host;
  flight_.SetCapacity(static_cast<size_t>(settings.flight_recorder));
  flight_identity_ = FlightIdentity{id.secret, rank, nranks, static_cast<int>(mine.pid), host};
  if (settings.diagnosis_ms > 0 && nranks > 1) TESSERA_RETURN_IF_ERROR(StartWatch(settings, id.secret, &mine));
  if (!settings.algo_table.empty()) {
    TESSERA_RETURN_IF_ERROR(CostModel::ChoicesFromFile(settings.algo_table, &model_.measured));
    TESSERA_RETURN_IF_ERROR(CheckMeasuredChoices(model_.measured, settings.algo_table));
  }
  // Open what peers will reach this rank by before telling them where it is.
  TESSERA_RETURN_IF_ERROR(transports_.Open(settings, rank, nranks, id.secret));
  TESSERA_RETURN_IF_ERROR(AddAgreed(AgreedSettings(settings, transports_.listed(), model_.measured), &mine));
  for (const auto& [name, bytes] : transports_.cards()) TESSERA_RETURN_IF_ERROR(AddCard(name, bytes, &mine));
  TESSERA_RETURN_IF_ERROR(AddCard(kKernelCard, KernelIdentity(), &mine));

  CallStamp creation;
  creation.flags = kStampCreation;
  activity_.BeginCall(creation);
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip).Annotate("rendezvous"));
  RankTable all;
  const Status joined = JoinRendezvous(id, rank, nranks, mine, ip, settings.timeout_ms, &all);
  if (!joined.ok()) return FailRendezvous(joined);
  const Status s = SetUpWith(all, deadline);
  if (!s.ok()) return FailCreation(s);
  activity_.EndCall(true);
  return Status::Ok();
}

// After the rendezvous: the links, the shape and the cost model, with every rank's info.
Status Communicator::SetUpWith(const RankTable& all, const Deadline& deadline) {
  std::vector<std::string> hosts;
  std::vector<int> pids;
  for (int r = 0; r < all.size(); ++r) {
    hosts.push_back(all.host(r));
    pids.push_back(all.pid(r));
  }
  InitMembership(all, hosts, pids);
  const std::vector<LocalRank> local = LocalRanks(hosts, pids, rank_);
  auto card_of = [&all](int r, const std::string& name, std::string* bytes) { return all.FindCard(r, name, bytes); };
  TESSERA_RETURN_IF_ERROR(transports_.Finish(card_of, local, deadline, &links_));
  board_ = links_->Board();
  const int local_ranks = static_cast<int>(local.size());
  // Before the shape: the cost-model probe's waits must poll as every later call's do
  // (without a policy they sleep at once, and the probe measured 17-20 us per step
  // on 4 ranks of 2 cores, whose calls take 2.5).
  int kernel_ranks = 0;
  TESSERA_RETURN_IF_ERROR(CountRanksOnMyKernel(all, rank_, &kernel_ranks));
  const int sharing = std::max(local_ranks, kernel_ranks);
  const ProgressSettings progress = ChooseProgress(settings_, sharing, transports_.spin_us_hint());
  progress_ = std::make_unique<ProgressPolicy>(progress);
  TESSERA_RETURN_IF_ERROR(InitShape(hosts, static_cast<double>(sharing) / HostCores()));
  if (!settings_.trace_dir.empty()) tracer_ = std::make_unique<Tracer>();

  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + " ready: host " + hosts[rank_] + ", " +
          std::to_string(local_ranks) + " rank(s) on this host, " + std::to_string(kernel_ranks) +
          " on its kernel, transports " + transports_.description() +
          ", waits poll " + (progress.mode == PollMode::kYield ? "yielding" : "pausing") + " for " +
          std::to_string(progress.spin_us) + " us");
  return Status::Ok();
}

Status Communicator::StartWatch(const Settings& settings, uint64_t secret, RankInfo* mine) {
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip).Annotate("watch service"));
  auto dump = [this] {
    std::string path;
    DumpFlightRecordNow("asked by a peer's diagnosis or the dump signal", &path);  // best effort
  };
  const bool on_signal = settings.dump_signal > 0;
  if (on_signal) TESSERA_RETURN_IF_ERROR(InstallDumpSignal(static_cast<int>(settings.dump_signal)));
  TESSERA_RETURN_IF_ERROR(WatchService::Start(ip, secret, rank_, &activity_, dump, on_signal, &watch_));
  const SocketAddress a = watch_->address();
  std::string card(6, '\0');
  std::memcpy(&card[0], &a.ip_be, 4);
  std::memcpy(&card[4], &a.port_be, 2);
  return AddCard("watch", card, mine);
}

// Diagnosis needs every rank's watch service; without one (TESSERA_DIAGNOSIS_MS=0
// somewhere) there is none.
void Communicator::InitMembership(const RankTable& all, const std::vector<std::string>& hosts,
                                  const std::vector<int>& pids) {
  if (!watch_) return;
  std::vector<SocketAddress> addresses(all.size());
  for (int r = 0; r < all.size(); ++r) {
    std::string card;
    if (!all.FindCard(r, "watch", &card).ok() || card.size() != 6) return;
    std::memcpy(&addresses[r].ip_be, &card[0], 4);
    std::memcpy(&addresses[r].port_be, &card[4], 2);
  }
  membership_ = Membership{rank_, flight_identity_.comm_id, std::move(addresses), pids, hosts};
}

// A failure after the rendezvous: diagnosed like a collective's (the culprit among ranks
// that are gone or silent), and told to the peers, which are in the same set-up.
Status Communicator::FailCreation(const Status& cause) {
  const Status s = Diagnosed(cause, /*in_creation=*/true);
  activity_.Break();
  if (links_) links_->PublishFailure(s);
  // A failed creation takes this rank's watch service with it, and a peer that asks
  // after that finds nothing there and blames this rank as gone. Unless the failure was a
  // timeout (then every rank diagnoses at about the same time), stay answerable with the
  // verdict for as long as a diagnosis asks, for the peers that fail later.
  if (!membership_.watch.empty() && s.code() != Code::kTimeout) {
    std::this_thread::sleep_for(std::chrono::milliseconds(settings_.diagnosis_ms));
  }
  return s;
}

// A rank whose table did not come knows no peer to ask, but may know the culprit (a
// rank that forwards the table and is gone): it stays answerable with that verdict, as
// FailCreation does, so that the ranks that did get the table and diagnose later adopt
// it instead of blaming this rank for being gone.
Status Communicator::FailRendezvous(const Status& cause) {
  const std::vector<int32_t> culprits = CulpritsOfTag(cause.message());
  if (!watch_ || culprits.empty() || cause.code() == Code::kTimeout) return cause;
  activity_.Break();
  activity_.SetVerdict(cause.message(), culprits);
  std::this_thread::sleep_for(std::chrono::milliseconds(settings_.diagnosis_ms));
  return cause;
}

// Hosts numbered by first appearance; grids and the cost model's shape from them.
// `ranks_per_core`: this rank's kernel's ranks over its cores.
Status Communicator::InitShape(const std::vector<std::string>& hosts, double ranks_per_core) {
  Layout layout;
  TESSERA_RETURN_IF_ERROR(Layout::FromHostIds(hosts, &layout));
  LayoutGrids grids;
  TESSERA_RETURN_IF_ERROR(MakeLayoutGrids(layout.host_of_rank(), settings_.torus, &grids));
  host_grid_ = std::move(grids.host);
  torus_grid_ = std::move(grids.torus);
  shape_ = grids.shape;
  if (board_ != nullptr) shape_.board_bytes = board_->capacity();
  if (!settings_.tuning_file.empty()) TESSERA_RETURN_IF_ERROR(CostModel::FromTuningFile(settings_.tuning_file, &model_));
  if (nranks_ > 1) {
    TESSERA_RETURN_IF_ERROR(ProbeAndAgree(ranks_per_core).Annotate("cost-model probe"));
  }
  char sharing[48] = "";
  if (shape_.ranks_per_core > 1) std::snprintf(sharing, sizeof(sharing), ", %.1f ranks per core", shape_.ranks_per_core);
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + ": " + std::to_string(shape_.hosts) + " host(s), " +
          (shape_.per_host > 0 ? std::to_string(shape_.per_host) + " rank(s) each" : "uneven ranks per host") +
          (torus_grid_ ? ", torus " + std::to_string(shape_.torus_x) + "x" + std::to_string(shape_.torus_y) : "") +
          sharing);
  return Status::Ok();
}

namespace {

// Small probe rings timed back to back, per timing: a rank times its ring from its own
// start, so one timed alone includes how long it waited for a partner still finishing
// the previous one (or nothing, for the last to arrive). One at a time measured 1 us to
// 2 ms per ring on 2x2 emulated hosts, and alpha_inter came out 21-590 us between
// creations against the 80 us a call's step takes.
constexpr int kSmallRingsPerTiming = 16;

// The ranks of `group` the small probe times together: neighbours in pairs (positions
// 2j, 2j+1), the last three together when the group is odd. A latency-bound schedule's
// step is one exchange between two ranks, all pairs at once, and a ring of two is two
// such exchanges; round the whole group a small ring chains its steps through every
// rank instead. (On 4x2 emulated hosts either gave some ranks 2-4x the typical step;
// the median over ranks, AgreeOnMedians, is what keeps those out of the model.)
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
// which a step's transfer overlaps. With the median of the timings there (a step's
// wait included), alpha across came out 7.7-88 us between creations on 4x2 emulated
// hosts, and the model priced Rabenseifner at 32-64 KiB 1.3-1.5x what it ran
// (docs/algorithms.md#where-the-parameters-come-from).
Status MeasureRing(const CollectiveContext& ctx, const RingGroup& group, LinkCost* cost,
                   const RingGroup* sharing = nullptr) {
  const int q = static_cast<int>(group.ranks.size());
  if (q < 2) return Status::Ok();
  const size_t big = 1 << 20;
  std::vector<char> buf(big, 0);
  TESSERA_RETURN_IF_ERROR(RunRings(ctx, group, 2, 1, buf.data()));  // connects the links
  // The small ring sends one element per step: fewer elements than ranks would leave
  // blocks empty, and empty blocks are not sent, which once made alpha look 3-4x smaller.
  const RingGroup pair = ProbePairOf(group);
  const int g = static_cast<int>(pair.ranks.size());
  double small = 0, large = 0;
  TESSERA_RETURN_IF_ERROR(
      TimeRings(ctx, pair, static_cast<size_t>(g), kSmallRingsPerTiming, buf.data(), &small));
  TESSERA_RETURN_IF_ERROR(TimeRings(ctx, group, big / 4, 1, buf.data(), &large, sharing));
  const double steps = 2.0 * (q - 1);
  cost->alpha = std::max(1e-7, small / (2.0 * (g - 1)));
  // beta comes from a difference of two timings, so a slow small ring (8 ranks on 2
  // cores stall now and then) once made it near zero and the model chose recursive
  // doubling for 512 KiB-8 MiB. At least half of the large ring's time is taken as
  // transfer: true by far on any link where 1 MiB takes longer than a few steps.
  const double transfer = std::max(large - cost->alpha * steps, large / 2);
  cost->beta = std::max(1e-12, transfer / (steps / q * static_cast<double>(big)));
  return Status::Ok();
}

// The probe's polls start afresh while it times small calls, as in a job of small
// calls, and take up their state again after: the large rings before may have made
// yields run late, and the policy then stops yielding for 100 ms, which on 4x2 emulated
// hosts made every call of the timings 3x slower in some creations.
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
// one host. On 4x2 emulated hosts pinned to 2 cores the probe's pairs measured alpha
// across at 8 us while each round across of a whole call took 37-39: the pairs run in
// step, a call's ranks do not (docs/performance.md#step-floor); 4 ranks on 2 cores,
// alpha inside 1.5 us and a round 4-5 us. Every rank times; `crowded` ones report it.
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

// Every rank's parameters, and each one's median over the ranks (the lower middle for
// an even count: the same on every rank). Gathered as a max-allreduce of a table where
// each rank fills its own row and leaves the others 0 (none is negative).
// The median, not the maximum: each rank's figures are the best of five timings of
// its own pair or ring, and on 4x2 emulated hosts (2 cores) one slow pair made the
// maximum alpha_inter 48-187 us between creations, with typical pairs at 11-45 us;
// the choice at 32 KiB flipped with it (recursive doubling 2.4x slower than
// Rabenseifner there).
// The model's five, the step floor across, the ranks per core, a leaders' call's time,
// the step floor inside a host.
constexpr int kModelParams = 9;
Status AgreeOnMedians(const CollectiveContext& ctx, const double (&mine)[kModelParams], double (&agreed)[kModelParams]) {
  Reducer max;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat64, RedOp::kMax, &max));
  const size_t p = static_cast<size_t>(ctx.nranks);
  std::vector<double> table(p * kModelParams, 0.0);
  std::copy(mine, mine + kModelParams, table.begin() + static_cast<size_t>(ctx.rank) * kModelParams);
  char* bytes = reinterpret_cast<char*>(table.data());
  TESSERA_RETURN_IF_ERROR(
      RunRing(ctx, WholeRing(ctx), bytes, bytes, table.size(), 8, &max, kRingReduceScatter | kRingAllGather));
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
// which the model takes the leaders' alpha (LeadersAlphaOf). On unpinned 4x2 emulated
// hosts the same calls took 208 us in some jobs and 300-445 in others, every
// communicator of a job alike: the whole alpha across or none of it, as the job's
// ranks happened to be placed (docs/algorithms.md#leaders-alpha). Every rank times;
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

}  // namespace

// Measures alpha and beta of the intra-host rows and the inter-host columns of the host
// grid (MeasureRing; columns in blocks of at most kProbeHosts hosts), and across hosts
// the step floor and the leaders' alpha (MeasureStepFloor, TimeLeadersCalls; not where
// ranks fit their cores), then takes the median of every parameter over all ranks
// (AgreeOnMedians), so that every rank's model, and so every choice of algorithm, is
// the same. All rows (or all columns) are measured at once, so the figures include what
// the real schedules meet: links shared by a host's ranks, and processes waiting for a
// core when ranks outnumber cores. The agreement runs round the whole ring (2(p-1)
// steps; recursive doubling would take lg p, docs/scale.md#creation-at-scale says why
// not yet), and not at all when nothing was measured or read: every rank then holds
// the built-in defaults.
Status Communicator::ProbeAndAgree(double ranks_per_core) {
  const CollectiveContext ctx = Context();
  // On one host whose ranks fit its cores the defaults hold well, so a probe is opt-in
  // there (2). Across hosts the links vary and matter (1), and the rows are measured
  // too: with every rank busy, a step inside a host costs what scheduling the host's
  // processes costs, not the 2 us of an idle shared-memory hop. gamma is measured with
  // either.
  const bool multi_host = host_grid_ && host_grid_->Y > 1;
  // One host whose ranks outnumber its cores (the same on every rank: they share the
  // host) is measured too: a step there costs scheduling, not an idle hop.
  const bool crowded = !multi_host && nranks_ > HostCores();
  const bool measure_rows =
      settings_.probe >= (multi_host || crowded ? 1 : 2) && settings_.tuning_file.empty() && host_grid_;
  const bool measure_columns = settings_.probe >= 1 && settings_.tuning_file.empty() && multi_host;
  // This rank's host row (both measurements need a host grid).
  const Grid* hosts = host_grid_.get();
  const RingGroup row = hosts ? RingGroup{hosts->rows[hosts->y[rank_]], hosts->x[rank_]} : RingGroup{};
  const bool kernel_crowded = ranks_per_core > 1;
  double leaders_call = 0;  // seconds (TimeLeadersCalls)
  if (measure_rows) TESSERA_RETURN_IF_ERROR(MeasureRing(ctx, row, &model_.intra));
  if (measure_rows && crowded) {
    TESSERA_RETURN_IF_ERROR(MeasureStepFloor(ctx, Log2Floor(nranks_), kernel_crowded, &model_.intra.floor));
  }
  if (measure_columns) {
    const Grid& g = *hosts;
    // The X columns' large rings are timed together (the host's row waits for all of
    // them before and after), so X flows share each host's link in every timing: the
    // link itself moves X times what one flow measured. The model charges sharing per
    // schedule. Timed alone, each column's best of five was one that ran while the
    // others did not: on 2x2 emulated hosts beta_inter came out 0.49-0.54 GB/s for a
    // 0.25 GB/s link (2x1: 0.27).
    TESSERA_RETURN_IF_ERROR(
        MeasureRing(ctx, ProbeBlock(g.cols[g.x[rank_]], g.y[rank_]), &model_.inter, &row));
    model_.inter.beta /= g.X;
    const int across = CrossHostRounds(shape_, Log2Floor(shape_.p));
    TESSERA_RETURN_IF_ERROR(MeasureStepFloor(ctx, across, kernel_crowded, &model_.inter.floor));
    TESSERA_RETURN_IF_ERROR(TimeLeadersCalls(ctx, shape_, kernel_crowded, &leaders_call));
  }
  if (!measure_rows && !measure_columns && settings_.tuning_file.empty()) return Status::Ok();
  if (measure_rows || measure_columns) TESSERA_RETURN_IF_ERROR(MeasureGamma(&model_.gamma));
  const double mine[kModelParams] = {model_.intra.alpha, model_.intra.beta, model_.inter.alpha,
                                     model_.inter.beta, model_.gamma, model_.inter.floor,
                                     ranks_per_core, leaders_call, model_.intra.floor};
  double agreed[kModelParams];
  TESSERA_RETURN_IF_ERROR(AgreeOnMedians(ctx, mine, agreed));
  model_.intra = LinkCost{agreed[0], agreed[1], agreed[8]};
  model_.inter = LinkCost{agreed[2], agreed[3], agreed[5]};
  model_.gamma = agreed[4];
  // What alpha across was measured with: every rank running (LeadersLink).
  if (measure_columns) shape_.ranks_per_core = agreed[6];
  if (agreed[7] > 0) model_.leaders_alpha = LeadersAlphaOf(model_, shape_, LeadersCallBytes(shape_), agreed[7]);
  Log(log_level_, LogLevel::kInfo, "rank " + std::to_string(rank_) + ": cost model " + model_.ToString());
  return Status::Ok();
}

// What the executor runs on: this rank's membership (it outlives the executor).
ExecutionSite Communicator::Site() {
  ExecutionSite site;
  site.rank = rank_;
  site.nranks = nranks_;
  site.settings = &settings_;
  site.log_level = log_level_;
  site.model = &model_;
  site.shape = &shape_;
  site.tracer = tracer_.get();
  site.premulsum = &premulsum_;
  site.recorder = &flight_;
  site.activity = &activity_;
  site.context = [this](int64_t now_us) { return Context(now_us); };
  site.fail = [this](const Status& s) { return Break(s); };
  return site;
}

CollectiveContext Communicator::Context(int64_t now_us) const {
  CollectiveContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.links = links_.get();
  ctx.exchange.deadline = Deadline::AfterMsFrom(now_us, settings_.timeout_ms);
  ctx.exchange.timeout_ms = settings_.timeout_ms;
  ctx.exchange.progress = progress_.get();
  ctx.exchange.abort = &abort_;
  ctx.exchange.notices = links_.get();
  ctx.exchange.tracer = tracer_.get();
  ctx.exchange.observer = &activity_;
  ctx.exchange.check_calls = settings_.check_calls != 0;
  ctx.host_grid = host_grid_.get();
  ctx.torus_grid = torus_grid_.get();
  ctx.board = board_;
  return ctx;
}

Status Communicator::sticky_error() const {
  if (!broken_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::Break(const Status& cause) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) return revoked_.load() ? error_ : cause;  // a call cut short by a revoke says so
  }
  const Status s = DumpFlightRecord(Diagnosed(cause));
  activity_.Break();
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) return s;
    error_ = s;
    broken_.store(true, std::memory_order_release);
  }
  // Tell the peers, so they fail now with this root cause instead of timing out on us.
  links_->PublishFailure(s);
  if (device_links_) device_links_->PublishFailure(s);
  return s;
}

Status Communicator::Diagnosed(const Status& cause, bool in_creation) {
  if (revoked_.load()) {
    // The peers adopt this instead of diagnosing a revoke as a failure.
    const std::string why = "rank " + std::to_string(rank_) + " revoked the communicator (tesseraCommRevoke)";
    activity_.SetVerdict(why, {});
    return RemoteError(why);
  }
  if (membership_.watch.empty() || abort_.load()) return cause;
  const Code c = cause.code();
  if (c != Code::kTimeout && c != Code::kRemoteError && !(in_creation && c == Code::kSystemError)) return cause;
  const Verdict v = Diagnose(membership_, activity_, !settings_.flight_recorder_dir.empty(),
                             Deadline::AfterMs(settings_.diagnosis_ms));
  activity_.SetVerdict(v.text, v.culprits);
  Log(log_level_, LogLevel::kWarn, "rank " + std::to_string(rank_) + ": " + v.text);
  return Status(cause.code(), v.text + "; rank " + std::to_string(rank_) + " saw: " + cause.message());
}

Status Communicator::DumpFlightRecordNow(const std::string& reason, std::string* path) const {
  if (settings_.flight_recorder_dir.empty()) return InvalidUsage("TESSERA_FLIGHT_RECORDER_DIR is not set");
  return flight_.Dump(settings_.flight_recorder_dir, flight_identity_, reason, path);
}

// With TESSERA_FLIGHT_RECORDER_DIR: writes the flight recorder and returns `cause` with
// the file named, else `cause` as it is.
Status Communicator::DumpFlightRecord(const Status& cause) const {
  if (settings_.flight_recorder_dir.empty()) return cause;
  std::string path;
  const Status written = flight_.Dump(settings_.flight_recorder_dir, flight_identity_, cause.message(), &path);
  if (!written.ok()) return Status(cause.code(), cause.message() + " (" + written.message() + ")");
  return Status(cause.code(), cause.message() + " (flight record: " + path + ")");
}

Status Communicator::CreatePreMulSum(const void* scalar, DataType type, bool read_now, int* op) {
  return premulsum_.Create(scalar, type, read_now, op);
}

Status Communicator::DestroyRedOp(int op) { return premulsum_.Destroy(op); }

Status Communicator::Run(const Operation& op) { return RunOps(&op, 1); }

// Split: two allgathers over this communicator. The first tells every rank each rank's
// (color, key); the lowest-ranked member of each new group then creates its unique id
// (starting its rendezvous service) and the second allgather hands the ids around.
Status Communicator::Split(int color, int key, const Settings& settings, std::unique_ptr<Communicator>* out) {
  const int p = nranks_;
  std::vector<int32_t> mine = {color, key}, all(2 * p);
  Operation gather;
  gather.kind = OpKind::kAllGather;
  gather.send = mine.data();
  gather.recv = all.data();
  gather.count = 2;
  gather.type = DataType::kInt32;
  TESSERA_RETURN_IF_ERROR(Run(gather).Annotate("split: exchanging colors"));
  // Members of my group, ordered by (key, old rank).
  std::vector<std::pair<int32_t, int>> members;
  for (int r = 0; r < p; ++r) {
    if (color >= 0 && all[2 * r] == color) members.push_back({all[2 * r + 1], r});
  }
  std::sort(members.begin(), members.end());
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank_) new_rank = static_cast<int>(i);
  }
  std::vector<char> my_id(kUniqueIdBytes, 0), ids(kUniqueIdBytes * p);
  UniqueIdData id;
  if (new_rank == 0) {
    std::string ip;
    TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip));
    id.secret = RandomSecret();
    TESSERA_RETURN_IF_ERROR(StartRendezvous(ip, 0, id.secret, settings.timeout_ms, settings.bootstrap_fanout, &id.root).Annotate("split"));
    id.root_pid = getpid();
    id.root_rank = 0;
    id.root_host = flight_identity_.host;
    EncodeUniqueId(id, my_id.data());
  }
  gather.send = my_id.data();
  gather.recv = ids.data();
  gather.count = kUniqueIdBytes;
  gather.type = DataType::kUint8;
  TESSERA_RETURN_IF_ERROR(Run(gather).Annotate("split: exchanging ids"));
  if (new_rank < 0) return Status::Ok();  // no color: no new communicator
  TESSERA_RETURN_IF_ERROR(DecodeUniqueId(ids.data() + kUniqueIdBytes * members[0].second, &id).Annotate("split"));
  return Create(settings, id, static_cast<int>(members.size()), new_rank, out)
      .Annotate("split: color " + std::to_string(color) + ", new rank " + std::to_string(new_rank));
}

Status Communicator::RunGroup(const std::vector<Operation>& ops) { return RunOps(ops.data(), ops.size()); }

Status Communicator::RunOps(const Operation* ops, size_t count) {
  std::lock_guard<std::mutex> running(run_mu_);
  TESSERA_RETURN_IF_ERROR(sticky_error());
  if (abort_.load()) return Break(RemoteError("the communicator was aborted"));
  return Revoked(executor_->RunGroup(ops, count));
}

// A call that ended while a revoke arrived from another thread: it is revoked too, and
// (the revoking thread left it to this one) the peers are told now.
Status Communicator::Revoked(Status s) {
  if (!s.ok() || !revoked_.load()) return s;
  return Break(RemoteError("revoked"));
}

// --- Device-resident calls ------------------------------------------------------------

bool Communicator::device_resident_possible() const { return transports_.DevicePossible(); }

Status Communicator::EnableDeviceLinks(std::unique_ptr<DeviceEngine> engine) {
  if (device_links_) return InvalidUsage("device links are already enabled");
  if (!device_resident_possible()) {
    return InvalidUsage("device-resident calls need more than one rank and either all ranks on one host with "
                        "TESSERA_TRANSPORT allowing cuda_ipc, or GPUDirect RDMA (ibverbs) on every rank");
  }
  TESSERA_RETURN_IF_ERROR(sticky_error());
  const std::string where = "rank " + std::to_string(rank_) + ": enabling device-resident calls";
  const Deadline deadline = Deadline::AfterMs(settings_.timeout_ms);
  std::unique_ptr<DeviceStream> stream;
  TESSERA_RETURN_IF_ERROR(engine->CreateStream(&stream).Annotate("device stream"));
  std::string described;
  Status s = transports_.FinishDevice(engine.get(), deadline, &device_links_, &described);
  if (!s.ok()) {
    s = Break(s.Annotate(where));  // also over the device links made so far
    device_links_.reset();         // before the engine they use
    return s;
  }
  device_engine_ = std::move(engine);
  device_stream_ = std::move(stream);
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + ": device-resident calls over " + described + ", " + device_engine_->name() +
          " engine");
  return Status::Ok();
}

Status Communicator::RunGroupOnDevice(const std::vector<Operation>& ops) {
  std::lock_guard<std::mutex> running(run_mu_);
  TESSERA_RETURN_IF_ERROR(sticky_error());
  if (!device_links_) return InvalidUsage("a device-resident call before EnableDeviceLinks");
  if (abort_.load()) return Break(RemoteError("the communicator was aborted"));
  CollectiveContext ctx = Context();
  ctx.links = device_links_.get();
  ctx.exchange.notices = device_links_.get();
  ctx.board = nullptr;  // device buffers never go on the host board
  return Revoked(executor_->RunGroupOnDevice(ops, ctx, device_engine_.get(), device_stream_.get()));
}

}  // namespace tessera
