#include "comm/communicator.h"

#include "comm/transport_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/collectives.h"
#include "collectives/elementwise.h"
#include "collectives/reduce_kernels.h"
#include "collectives/ring_allreduce.h"
#include "topology/host_identity.h"
#include "topology/layout.h"
#include "transport/cuda_ipc/cuda_ipc_transport.h"
#include "transport/ibverbs/ibverbs_transport.h"

namespace tessera {

Status Communicator::Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                            std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator());
  TESSERA_RETURN_IF_ERROR(c->Init(settings, id, nranks, rank));
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
  std::strncpy(mine.host, host.c_str(), sizeof(mine.host) - 1);
  mine.agreed.shm_slot_bytes = settings.shm_slot_bytes;
  mine.agreed.shm_slots = settings.shm_slots;
  mine.agreed.tcp_streams = settings.tcp_streams;
  mine.agreed.tcp_chunk_bytes = settings.tcp_chunk_bytes;
  mine.agreed.half_wire = settings.half_wire == "half" ? 1 : 0;
  // Open what peers will reach this rank by before telling them where it is.
  TransportSetup setup;
  TESSERA_RETURN_IF_ERROR(setup.Prepare(settings, rank, nranks, &mine));

  std::vector<RankInfo> all;
  TESSERA_RETURN_IF_ERROR(JoinRendezvous(id, rank, nranks, mine, settings.timeout_ms, &all));
  int local_ranks = 1;
  TESSERA_RETURN_IF_ERROR(setup.Finish(all, id.secret, deadline, &links_, &local_ranks));
  local_ = setup.local_ranks();
  allows_cuda_ipc_ = setup.allows_cuda_ipc();
  ibverbs_ = setup.ibverbs();
  TESSERA_RETURN_IF_ERROR(InitShape(all));
  if (!settings.trace_dir.empty()) tracer_ = std::make_unique<Tracer>();

  const int64_t cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  // Waking from UCX's event fd costs far more than from the shm doorbell or a socket,
  // and a UCX chunk's rendezvous takes longer than 50 us: spin longer over UCX
  // (docs/performance.md#ucx measured 1.7-4x from never sleeping).
  const int64_t spin_when_fits = setup.uses_ucx() ? 1000 : 50;
  spin_us_ = settings.spin_us >= 0 ? settings.spin_us : (local_ranks <= cores ? spin_when_fits : 0);
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " ready: host " + mine.host + ", " +
          std::to_string(local_ranks) + " rank(s) on this host, transports " + setup.description() +
          ", listening on " + mine.listen.ToString() +
          ", spin " + std::to_string(spin_us_) + " us");
  return Status::Ok();
}

// Hosts numbered by first appearance; grids and the cost model's shape from them.
Status Communicator::InitShape(const std::vector<RankInfo>& all) {
  std::vector<std::string> ids;
  for (const RankInfo& info : all) ids.emplace_back(info.host, strnlen(info.host, sizeof(info.host)));
  Layout layout;
  TESSERA_RETURN_IF_ERROR(Layout::FromHostIds(ids, &layout));
  shape_.p = nranks_;
  shape_.hosts = layout.num_hosts();
  hosts_ = layout.num_hosts();
  Grid grid;
  if (GridFromHosts(layout.host_of_rank(), &grid).ok()) {
    host_grid_ = std::make_unique<Grid>(grid);
    shape_.per_host = grid.X;
  }
  if (!settings_.torus.empty()) {
    TESSERA_RETURN_IF_ERROR(ParseGrid(settings_.torus, nranks_, &grid));
    torus_grid_ = std::make_unique<Grid>(grid);
  } else if (host_grid_) {
    torus_grid_ = std::make_unique<Grid>(*host_grid_);
  }
  if (torus_grid_) {
    shape_.torus_x = torus_grid_->X;
    shape_.torus_y = torus_grid_->Y;
  }
  if (!settings_.tuning_file.empty()) TESSERA_RETURN_IF_ERROR(CostModel::FromTuningFile(settings_.tuning_file, &model_));
  if (nranks_ > 1) {
    Status s = ProbeAndAgree().Annotate("cost-model probe");
    if (!s.ok()) {
      links_->PublishFailure(s);  // the others are in the probe too: tell them why
      return s;
    }
  }
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + ": " + std::to_string(shape_.hosts) + " host(s), " +
          (shape_.per_host > 0 ? std::to_string(shape_.per_host) + " rank(s) each" : "uneven ranks per host") +
          (torus_grid_ ? ", torus " + std::to_string(shape_.torus_x) + "x" + std::to_string(shape_.torus_y) : ""));
  return Status::Ok();
}

// Measures alpha and beta of the intra-host rows and the inter-host columns of the host
// grid with ring allreduces of one element per rank and of 1 MiB (the best of five),
// then takes the maximum of every parameter over all ranks, so that every rank's model,
// and so every choice of algorithm, is the same. All rows (or all columns) are measured
// at once, so the figures include what the real schedules meet: links shared by a
// host's ranks, and processes waiting for a core when ranks outnumber cores.
Status Communicator::ProbeAndAgree() {
  const CollectiveContext ctx = Context();
  Reducer sum;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat32, RedOp::kSum, &sum));
  auto measure = [&](const RingGroup& group, LinkCost* cost) -> Status {
    const int q = static_cast<int>(group.ranks.size());
    if (q < 2) return Status::Ok();
    const size_t big = 1 << 20;
    std::vector<char> buf(big, 0);
    // A first round connects the links and lines the ranks up.
    TESSERA_RETURN_IF_ERROR(RunRing(ctx, group, buf.data(), buf.data(), 2, 4, &sum, kRingReduceScatter | kRingAllGather));
    double t[2];
    // The small ring sends one element per step: fewer elements than ranks would leave
    // blocks empty, and empty blocks are not sent, which once made alpha look 3-4x smaller.
    const size_t sizes[2] = {4 * static_cast<size_t>(q), big};
    for (int k = 0; k < 2; ++k) {
      t[k] = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        const int64_t start = NowMicros();
        TESSERA_RETURN_IF_ERROR(RunRing(ctx, group, buf.data(), buf.data(), sizes[k] / 4, 4, &sum,
                                        kRingReduceScatter | kRingAllGather));
        t[k] = std::min(t[k], (NowMicros() - start) * 1e-6);
      }
    }
    const double steps = 2.0 * (q - 1);
    cost->alpha = std::max(1e-7, t[0] / steps);
    // beta comes from a difference of two timings, so a slow small ring (8 ranks on 2
    // cores stall now and then) once made it near zero and the model chose recursive
    // doubling for 512 KiB-8 MiB. At least half of the large ring's time is taken as
    // transfer: true by far on any link where 1 MiB takes longer than a few steps.
    const double transfer = std::max(t[1] - t[0], t[1] / 2);
    cost->beta = std::max(1e-12, transfer / (steps / q * static_cast<double>(big)));
    return Status::Ok();
  };
  // On one host the defaults hold well and a probe mostly measures scheduling noise, so
  // it is opt-in there (2). Across hosts the links vary and matter (1), and the rows are
  // measured too: with every rank busy, a step inside a host costs what scheduling the
  // host's processes costs, not the 2 us of an idle shared-memory hop.
  const bool multi_host = host_grid_ && host_grid_->Y > 1;
  if (settings_.probe >= (multi_host ? 1 : 2) && settings_.tuning_file.empty() && host_grid_) {
    const Grid& g = *host_grid_;
    TESSERA_RETURN_IF_ERROR(measure(RingGroup{g.rows[g.y[rank_]], g.x[rank_]}, &model_.intra));
  }
  if (settings_.probe >= 1 && settings_.tuning_file.empty() && multi_host) {
    const Grid& g = *host_grid_;
    TESSERA_RETURN_IF_ERROR(measure(RingGroup{g.cols[g.x[rank_]], g.y[rank_]}, &model_.inter));
    // The X columns ran at once, so X flows shared each host's link: the link itself
    // moves X times what one flow measured. The model charges sharing per schedule.
    model_.inter.beta /= g.X;
  }
  Reducer max;
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat64, RedOp::kMax, &max));
  double params[5] = {model_.intra.alpha, model_.intra.beta, model_.inter.alpha, model_.inter.beta, model_.gamma};
  TESSERA_RETURN_IF_ERROR(RunRing(ctx, WholeRing(ctx), reinterpret_cast<char*>(params),
                                  reinterpret_cast<char*>(params), 5, 8, &max, kRingReduceScatter | kRingAllGather));
  model_.intra = LinkCost{params[0], params[1]};
  model_.inter = LinkCost{params[2], params[3]};
  model_.gamma = params[4];
  Log(log_level_, LogLevel::kInfo, "rank " + std::to_string(rank_) + ": cost model " + model_.ToString());
  return Status::Ok();
}

Selection Communicator::ChooseAllReduce(size_t bytes) const {
  return SelectAlgorithm(Collective::kAllReduce, settings_.algo, model_, shape_, bytes);
}

size_t Communicator::WireElementSize(DataType type) const {
  if (!IsHalf(type)) return SizeOf(type);
  return settings_.half_wire == "half" ? SizeOf(type) : SizeOf(DataType::kFloat32);
}

CollectiveContext Communicator::Context() const {
  CollectiveContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.links = links_.get();
  ctx.exchange.deadline = Deadline::AfterMs(settings_.timeout_ms);
  ctx.exchange.timeout_ms = settings_.timeout_ms;
  ctx.exchange.spin_us = spin_us_;
  ctx.exchange.abort = &abort_;
  ctx.exchange.notices = links_.get();
  ctx.exchange.tracer = tracer_.get();
  ctx.host_grid = host_grid_.get();
  ctx.torus_grid = torus_grid_.get();
  ctx.local_memory = host_memory_.get();
  return ctx;
}

Status Communicator::sticky_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::Break(const Status& s) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) return s;
    error_ = s;
  }
  // Tell the peers, so they fail now with this root cause instead of timing out on us.
  links_->PublishFailure(s);
  if (device_links_) device_links_->PublishFailure(s);
  return s;
}

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kReduceScatter: return "reduce-scatter";
    case OpKind::kAlltoAll: return "alltoall";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
  }
  return "unknown";
}

bool IsReduction(OpKind k) { return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter; }
bool IsPointToPoint(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

Status Communicator::CreatePreMulSum(const void* scalar, DataType type, bool read_now, int* op) {
  PreMulSumOp custom{type, scalar, {0.0}, read_now};
  if (read_now) std::memcpy(custom.value, scalar, SizeOf(type));
  std::lock_guard<std::mutex> lock(error_mu_);
  *op = next_op_++;
  custom_ops_[*op] = custom;
  return Status::Ok();
}

Status Communicator::DestroyRedOp(int op) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (custom_ops_.erase(op) == 0) {
    return InvalidArgument("op " + std::to_string(op) + " is not an operator created on this communicator (or was destroyed)");
  }
  return Status::Ok();
}

Status Communicator::ValidateOp(int op, DataType type) const {
  if (op >= 0 && op < kNumRedOps) return Status::Ok();
  std::lock_guard<std::mutex> lock(error_mu_);
  auto it = custom_ops_.find(op);
  if (it == custom_ops_.end()) {
    return InvalidArgument("op " + std::to_string(op) +
                           " is neither a built-in operator nor one created on this communicator (or it was destroyed)");
  }
  if (it->second.type != type) {
    return InvalidArgument("op " + std::to_string(op) + " was created for datatype " + DataTypeName(it->second.type) +
                           ", not " + DataTypeName(type));
  }
  return Status::Ok();
}

Status Communicator::CheckOperation(const Operation& op) const {
  if (!IsReduction(op.kind)) return Status::Ok();
  if (op.type == DataType::kFloat8e4m3 || op.type == DataType::kFloat8e5m2) {
    return InvalidArgument(std::string("datatype ") + DataTypeName(op.type) + " is not supported by reductions");
  }
  return ValidateOp(op.op, op.type);
}

Status Communicator::Run(const Operation& op) { return RunGroup({op}); }

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
    TESSERA_RETURN_IF_ERROR(StartRendezvous(ip, 0, id.secret, settings.timeout_ms, &id.root).Annotate("split"));
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

Status Communicator::RunGroup(const std::vector<Operation>& ops) {
  TESSERA_RETURN_IF_ERROR(sticky_error());
  if (abort_.load()) return Break(RemoteError("the communicator was aborted"));
  return RunGroupIn(ops, nullptr);
}

Status Communicator::RunGroupIn(const std::vector<Operation>& ops, const CollectiveContext* device) {
  std::vector<Operation> p2p;
  for (const Operation& op : ops) {
    if (IsPointToPoint(op.kind)) {
      p2p.push_back(op);
      continue;
    }
    Status s = RunOne(op, device ? *device : Context(), device != nullptr);
    if (!s.ok()) return s.code() == Code::kInvalidArgument ? s : Break(s);
  }
  return RunPointToPointGroup(p2p, device ? *device : Context());
}

Status Communicator::RunPointToPointGroup(const std::vector<Operation>& p2p, const CollectiveContext& ctx) {
  if (p2p.empty()) return Status::Ok();
  // Sends to self must pair with receives from self: a local mistake, checked before
  // communicating, so it does not break the communicator.
  size_t self_sends = 0, self_recvs = 0;
  for (const Operation& op : p2p) {
    if (op.peer == rank_) ++(op.kind == OpKind::kSend ? self_sends : self_recvs);
  }
  if (self_sends != self_recvs) {
    return InvalidUsage(std::to_string(self_sends) + " send(s) to self but " + std::to_string(self_recvs) +
                        " receive(s) from self: a send to self needs its receive in the same group");
  }
  if (tracer_) tracer_->BeginOperation("send/recv#" + std::to_string(++op_count_));
  Status s = RunPointToPoint(p2p, ctx);
  return s.ok() ? s : Break(s.Annotate(p2p.size() == 1 ? OpName(p2p[0].kind) : "send/recv group"));
}

namespace {

// The collective of an operation that is not a send or a receive.
Collective CollectiveOf(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return Collective::kAllReduce;
    case OpKind::kBroadcast: return Collective::kBroadcast;
    case OpKind::kReduce: return Collective::kReduce;
    case OpKind::kAllGather: return Collective::kAllGather;
    case OpKind::kReduceScatter: return Collective::kReduceScatter;
    case OpKind::kAlltoAll: return Collective::kAlltoAll;
    case OpKind::kGather: return Collective::kGather;
    case OpKind::kScatter: return Collective::kScatter;
    case OpKind::kSend:
    case OpKind::kRecv: break;
  }
  return Collective::kAllReduce;  // not reached: RunOne never sees sends and receives
}

}  // namespace

// The collective's algorithm from its table: the same choice on every rank (the model and
// the shape agree). The choice is logged at INFO with every candidate's prediction (the
// text is built only then) and names the operation in the trace.
Status Communicator::Dispatch(Collective c, const CollectiveContext& ctx, const CollectiveArgs& args,
                              bool on_device) {
  const size_t bytes = PredictedBytes(c, nranks_, args.count, args.elem_size);
  const bool explain = log_level_ >= LogLevel::kInfo;
  std::string why;
  const Selection choice = SelectAlgorithm(c, settings_.algo, model_, shape_, bytes, explain ? &why : nullptr);
  const char* label = choice.algo->Label();
  if (explain) {
    Log(log_level_, LogLevel::kInfo,
        "rank " + std::to_string(rank_) + ": " + (on_device ? "device " : "") + CollectiveName(c) + " of " +
            std::to_string(bytes) + " B: " + label + " (predicted " + std::to_string(choice.predicted_s * 1e6) +
            " us; " + why + ")");
  }
  if (tracer_) tracer_->BeginOperation(std::string(CollectiveName(c)) + "#" + std::to_string(op_count_) + " (" + label + ")");
  const Status s = choice.algo->run(ctx, args);
  if (s.ok()) return s;
  return s.Annotate(std::string(CollectiveName(c)) + " (" + label + (on_device ? ", device" : "") + ")");
}

Status Communicator::RunOne(const Operation& op, const CollectiveContext& ctx, bool on_device) {
  if (tracer_) {
    tracer_->BeginOperation(std::string(OpName(op.kind)) + "#" + std::to_string(++op_count_) + (on_device ? " (device)" : ""));
  }
  if (IsReduction(op.kind)) return on_device ? RunReductionOnDevice(op, ctx) : RunReduction(op, ctx);
  CollectiveArgs args;
  args.send = op.send;
  args.recv = op.recv;
  args.count = op.count;
  args.elem_size = SizeOf(op.type);
  args.root = op.root;
  if (op.count == 0) return Status::Ok();
  return Dispatch(CollectiveOf(op.kind), ctx, args, on_device);
}

namespace {

// What the operator and the type decide, on the host path and the device path alike.
struct ReductionTerms {
  size_t in_count = 0;          // input elements (nranks blocks for reduce-scatter)
  bool writes_out = false;      // false on a reduce's non-root ranks
  bool custom = false;          // a PreMulSum operator
  RedOp base = RedOp::kSum;     // the operator asked for (sum for PreMulSum)
  RedOp combine = RedOp::kSum;  // how two elements combine (sum for avg)
};

Status TermsOf(const Operation& op, int rank, int nranks, ReductionTerms* t) {
  if (op.type == DataType::kFloat8e4m3 || op.type == DataType::kFloat8e5m2) {
    return InvalidArgument(std::string("datatype ") + DataTypeName(op.type) + " is not supported by reductions");
  }
  t->in_count = op.count * (op.kind == OpKind::kReduceScatter ? nranks : 1);
  t->writes_out = op.kind != OpKind::kReduce || rank == op.root;
  t->custom = op.op >= kNumRedOps;
  t->base = t->custom ? RedOp::kSum : static_cast<RedOp>(op.op);
  t->combine = t->base == RedOp::kAvg ? RedOp::kSum : t->base;
  return Status::Ok();
}

}  // namespace

// Reductions: the operator and the type decide what happens around the algorithm.
// float16/bfloat16 are widened to float32, reduced in float32 and rounded once at the
// end, or, with TESSERA_HALF_WIRE=half, reduced in their own type (each step in float32,
// rounded: half the bytes on the wire); avg is a sum divided at the end (integers
// truncate, as in NCCL); PreMulSum scales this rank's input by its scalar, then sums.
Status Communicator::RunReduction(const Operation& op, const CollectiveContext& ctx) {
  const bool half = IsHalf(op.type);
  const bool half_wire = half && settings_.half_wire == "half";
  const bool widen = half && !half_wire;
  ReductionTerms terms;
  TESSERA_RETURN_IF_ERROR(TermsOf(op, rank_, nranks_, &terms));
  const auto [in_count, writes_out, custom, base, combine] = terms;
  const DataType work = widen ? DataType::kFloat32 : op.type;
  const size_t es = WireElementSize(op.type);
  CollectiveArgs args;
  args.count = op.count;
  args.elem_size = es;
  args.root = op.root;
  TESSERA_RETURN_IF_ERROR(half_wire ? GetHalfReducer(op.type, combine, &args.reducer)
                                    : GetReducer(work, combine, &args.reducer));
  if (op.count == 0) return Status::Ok();

  // The input in the working type, scaled for PreMulSum (half types in float32, then
  // rounded back when they travel as they are).
  Scratch in_buf, out_buf;  // from the communicator's pool: no zero-fill per call
  args.send = op.send;
  args.recv = op.recv;
  if (widen || custom) {
    // Half types are scaled in float32: in in_buf when they travel widened, else in a
    // temporary rounded back into in_buf.
    std::vector<float> wide_tmp;
    float* wide = nullptr;
    if (widen) {
      TESSERA_RETURN_IF_ERROR(in_buf.Allocate(ctx, in_count * es));
      wide = reinterpret_cast<float*>(in_buf.data());
    } else if (half) {
      wide_tmp.resize(in_count);
      wide = wide_tmp.data();
    }
    if (half) WidenHalf(op.type, op.send, wide, in_count);
    if (custom) {
      PreMulSumOp c;
      {
        std::lock_guard<std::mutex> lock(error_mu_);
        c = custom_ops_.at(op.op);
      }
      const void* scalar = c.copied ? static_cast<const void*>(c.value) : c.scalar_ptr;
      if (half) {
        uint16_t bits;
        std::memcpy(&bits, scalar, 2);
        const float half_scalar = op.type == DataType::kFloat16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
        ScaleArray(DataType::kFloat32, &half_scalar, wide, wide, in_count);
      } else {
        TESSERA_RETURN_IF_ERROR(in_buf.Allocate(ctx, in_count * es));
        ScaleArray(work, scalar, op.send, in_buf.data(), in_count);
      }
    }
    if (half_wire) {
      TESSERA_RETURN_IF_ERROR(in_buf.Allocate(ctx, in_count * es));
      NarrowHalf(op.type, wide, in_buf.data(), in_count);
    }
    args.send = in_buf.data();
    if (widen) {
      if (writes_out) TESSERA_RETURN_IF_ERROR(out_buf.Allocate(ctx, op.count * es));
      args.recv = writes_out ? out_buf.data() : nullptr;
    }
  }

  TESSERA_RETURN_IF_ERROR(Dispatch(CollectiveOf(op.kind), ctx, args, false));

  if (writes_out && half_wire && base == RedOp::kAvg) {
    std::vector<float> wide(op.count);
    WidenHalf(op.type, op.recv, wide.data(), op.count);
    DivideArray(DataType::kFloat32, wide.data(), op.count, nranks_);
    NarrowHalf(op.type, wide.data(), op.recv, op.count);
  } else if (writes_out) {
    if (base == RedOp::kAvg) DivideArray(work, args.recv, op.count, nranks_);
    if (widen) NarrowHalf(op.type, reinterpret_cast<const float*>(out_buf.data()), op.recv, op.count);
  }
  return Status::Ok();
}

// Every send and receive of the group in one exchange: the engine progresses them all
// together, so their order on each rank does not matter. Sends to self are copies,
// matched in order with receives from self.
Status Communicator::RunPointToPoint(const std::vector<Operation>& ops, const CollectiveContext& ctx) {
  std::vector<Transfer> t;
  std::vector<const Operation*> self_sends, self_recvs;
  for (const Operation& op : ops) {
    const size_t bytes = op.count * SizeOf(op.type);
    if (op.peer == rank_) {
      (op.kind == OpKind::kSend ? self_sends : self_recvs).push_back(&op);
      continue;
    }
    Link* link = nullptr;
    TESSERA_RETURN_IF_ERROR(ctx.links->Get(op.peer, ctx.exchange.deadline, &link));
    t.push_back(op.kind == OpKind::kSend ? Transfer::Send(link, op.send, bytes) : Transfer::Recv(link, op.recv, bytes));
  }
  for (size_t i = 0; i < self_sends.size(); ++i) {
    const size_t sb = self_sends[i]->count * SizeOf(self_sends[i]->type);
    const size_t rb = self_recvs[i]->count * SizeOf(self_recvs[i]->type);
    if (sb != rb) {
      return InvalidUsage("send to self of " + std::to_string(sb) + " bytes matched with a receive of " +
                          std::to_string(rb));
    }
    if (sb == 0 || self_recvs[i]->recv == self_sends[i]->send) continue;
    if (ctx.local_memory != nullptr) {
      TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, self_recvs[i]->recv, self_sends[i]->send, sb));
    } else {
      std::memmove(self_recvs[i]->recv, self_sends[i]->send, sb);
    }
  }
  return Exchange(t.data(), t.size(), ctx.exchange);
}

// --- Device-resident calls ------------------------------------------------------------

namespace {

// An algorithm's local copies and temporary buffers on the device engine: copies run on
// the communicator's device stream and are waited for (bounded) before returning.
class EngineMemory : public LocalMemory {
 public:
  EngineMemory(DeviceEngine* engine, DeviceStream* stream, const ExchangeOptions& exchange)
      : engine_(engine), stream_(stream), exchange_(exchange) {}
  Status Copy(void* dst, const void* src, size_t bytes) override {
    TESSERA_RETURN_IF_ERROR(stream_->Copy(dst, src, bytes).Annotate("device copy"));
    return stream_->Drain(exchange_.deadline, exchange_.abort, "device copy of " + std::to_string(bytes) + " bytes");
  }
  Status Allocate(size_t bytes, std::shared_ptr<void>* out) override {
    return engine_->Allocate(bytes, out).Annotate("device scratch of " + std::to_string(bytes) + " bytes");
  }

 private:
  DeviceEngine* engine_;
  DeviceStream* stream_;
  const ExchangeOptions& exchange_;
};

}  // namespace

bool Communicator::device_resident_possible() const {
  if (nranks_ < 2) return false;
  if (hosts_ == 1) return allows_cuda_ipc_ && static_cast<int>(local_.size()) == nranks_;
  // Across hosts: GPUDirect RDMA between hosts, cuda_ipc inside those with several ranks.
  // Both terms are the same on every rank (summaries all ranks saw, agreed settings).
  return ibverbs_ != nullptr && ibverbs_->gpu_direct_everywhere() && (allows_cuda_ipc_ || hosts_ == nranks_);
}

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
  std::vector<std::unique_ptr<Transport>> transports;
  std::string described;
  if (local_.size() > 1) {  // the ranks of this host: CUDA IPC
    CudaIpcTransport::Options options;
    options.slot_bytes = settings_.cuda_ipc_slot_bytes;
    std::unique_ptr<CudaIpcTransport> cuda_ipc;
    Status s = CudaIpcTransport::Create(options, engine.get(), rank_, local_, deadline, &cuda_ipc);
    if (!s.ok()) return Break(s.Annotate(where));
    transports.push_back(std::move(cuda_ipc));
    described = "cuda_ipc (4 slots of " + std::to_string(settings_.cuda_ipc_slot_bytes) + " B per peer)";
  }
  if (hosts_ > 1) {  // the other hosts: GPUDirect RDMA
    std::unique_ptr<IbverbsTransport> gpu_direct;
    Status s = ibverbs_->CreateDeviceTransport(engine.get(), &gpu_direct);
    if (!s.ok()) return Break(s.Annotate(where));
    transports.push_back(std::move(gpu_direct));
    described += std::string(described.empty() ? "" : " and ") + "ibverbs with GPUDirect RDMA (" +
                 ibverbs_->Describe() + ")";
  }
  device_engine_ = std::move(engine);
  device_stream_ = std::move(stream);
  device_links_ = std::make_unique<LinkTable>(nranks_, std::move(transports));
  // Every link now, in increasing peer order: a link's set-up waits for its peer's, and
  // pairs taken in one global order cannot wait in a cycle (lazily, a ring would).
  for (int peer = 0; peer < nranks_; ++peer) {
    Link* link = nullptr;
    if (peer == rank_) continue;
    Status s = device_links_->Get(peer, deadline, &link);
    if (!s.ok()) return Break(s.Annotate(where));
  }
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + ": device-resident calls over " + described + ", " + device_engine_->name() +
          " engine");
  return Status::Ok();
}

Status Communicator::RunGroupOnDevice(const std::vector<Operation>& ops) {
  TESSERA_RETURN_IF_ERROR(sticky_error());
  if (!device_links_) return InvalidUsage("a device-resident call before EnableDeviceLinks");
  if (abort_.load()) return Break(RemoteError("the communicator was aborted"));
  CollectiveContext ctx = Context();
  ctx.links = device_links_.get();
  ctx.exchange.notices = device_links_.get();
  EngineMemory memory(device_engine_.get(), device_stream_.get(), ctx.exchange);
  ctx.local_memory = &memory;
  return RunGroupIn(ops, &ctx);
}

Status Communicator::RunReductionOnDevice(const Operation& op, const CollectiveContext& ctx) {
  ReductionTerms terms;
  TESSERA_RETURN_IF_ERROR(TermsOf(op, rank_, nranks_, &terms));
  const auto [in_count, writes_out, custom, base, combine] = terms;
  const size_t es = SizeOf(op.type);
  CollectiveArgs args;
  args.count = op.count;
  args.elem_size = es;
  args.root = op.root;
  args.send = op.send;
  args.recv = op.recv;
  // The link's kernel for (type, op); half types are combined in float32 at each step.
  TESSERA_RETURN_IF_ERROR(IsHalf(op.type) ? GetHalfReducer(op.type, combine, &args.reducer)
                                          : GetReducer(op.type, combine, &args.reducer));
  args.reducer.typed = true;
  args.reducer.type = op.type;
  args.reducer.op = combine;
  if (op.count == 0) return Status::Ok();
  const std::string what = "rank " + std::to_string(rank_);

  // PreMulSum: this rank's input scaled on the device into a temporary buffer.
  std::shared_ptr<void> scaled;
  if (custom) {
    PreMulSumOp c;
    {
      std::lock_guard<std::mutex> lock(error_mu_);
      c = custom_ops_.at(op.op);
    }
    const void* scalar = c.copied ? static_cast<const void*>(c.value) : c.scalar_ptr;
    TESSERA_RETURN_IF_ERROR(ctx.local_memory->Allocate(in_count * es, &scaled));
    TESSERA_RETURN_IF_ERROR(device_stream_->Scale(op.type, scalar, op.send, scaled.get(), in_count).Annotate("PreMulSum"));
    TESSERA_RETURN_IF_ERROR(device_stream_->Drain(ctx.exchange.deadline, ctx.exchange.abort, what + ": PreMulSum scaling"));
    args.send = scaled.get();
  }

  // The same algorithms and choices as on the host: every algorithm makes its copies and
  // temporary buffers through ctx.local_memory, so they all run on device memory.
  TESSERA_RETURN_IF_ERROR(Dispatch(CollectiveOf(op.kind), ctx, args, true));
  if (writes_out && base == RedOp::kAvg) {
    TESSERA_RETURN_IF_ERROR(device_stream_->Divide(op.type, op.recv, op.count, nranks_).Annotate("avg"));
    TESSERA_RETURN_IF_ERROR(device_stream_->Drain(ctx.exchange.deadline, ctx.exchange.abort, what + ": avg's division"));
  }
  return Status::Ok();
}

}  // namespace tessera
