#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/hash.h"
#include "collectives/algorithms.h"
#include "collectives/cost_model_probe.h"
#include "topology/fabric.h"
#include "topology/host_identity.h"
#include "topology/layout.h"

namespace tessera {

Status Communicator::Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                            std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator());
  TESSERA_RETURN_IF_ERROR(c->Init(settings, id, nranks, rank));
  c->executor_ = std::make_unique<Executor>(c->View());
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
  TESSERA_RETURN_IF_ERROR(OpenForPeers(id.secret, &mine));
  CallRecord creation;  // what peers' diagnosis sees this rank in until it is created
  creation.what = "creation";
  creation.stamp.flags = kStampCreation;
  activity_.CallBegan(creation, NowMicros());
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip).Annotate("rendezvous"));
  RankTable all;
  const Status joined = JoinRendezvous(id, rank, nranks, mine, ip, settings.timeout_ms, &all);
  if (!joined.ok()) return FailRendezvous(joined);
  const Status s = SetUpWith(all, deadline);
  if (!s.ok()) return FailCreation(s);
  activity_.CallEnded(CallOutcome::kDone, NowMicros());
  StartWatchers(all);
  return Status::Ok();
}

Status Communicator::OpenForPeers(uint64_t secret, RankInfo* mine) {
  mine->pid = getpid();
  std::string host = HostIdentity(settings_.host_id);
  if (!settings_.topo_file.empty()) {
    TESSERA_RETURN_IF_ERROR(
        HostIdFromLayoutFile(settings_.topo_file, rank_, nranks_, &host).Annotate("TESSERA_TOPO_FILE"));
  }
  mine->host = host.substr(0, kMaxHostBytes);
  flight_.SetCapacity(static_cast<size_t>(settings_.flight_recorder));
  flight_identity_ = FlightIdentity{secret, rank_, nranks_, static_cast<int>(mine->pid), mine->host};
  activity_.SetRanks(nranks_, settings_.straggler_window > 0);
  if (settings_.diagnosis_ms > 0 && nranks_ > 1) TESSERA_RETURN_IF_ERROR(StartWatch(settings_, secret, mine));
  if (!settings_.algo_table.empty()) {
    TESSERA_RETURN_IF_ERROR(CostModel::ChoicesFromFile(settings_.algo_table, &model_.measured));
    TESSERA_RETURN_IF_ERROR(CheckMeasuredChoices(model_.measured, settings_.algo_table));
  }
  TESSERA_RETURN_IF_ERROR(transports_.Open(settings_, rank_, nranks_, secret));
  TESSERA_RETURN_IF_ERROR(AddAgreed(AgreedSettings(settings_, transports_.listed(), model_.measured), mine));
  for (const auto& [name, bytes] : transports_.cards()) TESSERA_RETURN_IF_ERROR(AddCard(name, bytes, mine));
  return AddCard(kKernelCard, KernelIdentity(), mine);
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
  // (without a policy they sleep at once, and the probe would time the kernel's
  // wake-ups rather than the steps).
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
  TESSERA_RETURN_IF_ERROR(WatchService::Start(ip, secret, rank_, nranks_, &activity_, dump, on_signal, &watch_));
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
  // Before the judge runs (it starts once rank 0 is created) and so before any verdict.
  activity_.OnStragglerChange([this, pids, hosts](const StragglerVerdict& v) {
    flight_.NoteStraggler(StragglerText(v, pids, hosts));
  });
}

void Communicator::StartWatchers(const RankTable& all) {
  if (rank_ == 0 && settings_.straggler_window > 0 && !membership_.watch.empty()) {
    StragglerOptions options;
    options.window = static_cast<size_t>(settings_.straggler_window);
    options.share_percent = static_cast<int>(settings_.straggler_share);
    options.period_ms = settings_.straggler_period_ms;
    options.log_level = log_level_;
    judge_ = StragglerJudge::Start(membership_, &activity_, options);
  }
  if (settings_.metrics_port == 0) return;
  std::vector<std::string> hosts;
  for (int r = 0; r < all.size(); ++r) hosts.push_back(all.host(r));
  int local_index = 0;
  for (int r = 0; r < rank_; ++r) local_index += hosts[r] == hosts[rank_] ? 1 : 0;
  const int port = static_cast<int>(settings_.metrics_port) + local_index;
  const Status s = MetricsEndpoint::Join(port, [this] { return Health(); }, &metrics_);
  if (!s.ok()) Log(log_level_, LogLevel::kWarn, "rank " + std::to_string(rank_) + ": no metrics: " + s.message());
}

HealthSnapshot Communicator::Health() const {
  HealthSnapshot h;
  h.comm_id = Fnv1a(&flight_identity_.comm_id, sizeof(flight_identity_.comm_id));  // not the secret itself
  h.rank = rank_;
  h.nranks = nranks_;
  h.pid = flight_identity_.pid;
  h.host = flight_identity_.host;
  h.broken = broken_.load(std::memory_order_acquire);
  h.revokes = revoked_.load() ? 1 : 0;
  h.shrinks = shrinks_.load();
  for (int k = 0; k < kCallKinds; ++k) h.kinds[k] = call_stats_.Counts(k);
  h.stalled_us = activity_.Stalled();
  h.peer_stall_us = activity_.PeerStalls();
  h.straggler = activity_.Straggler();
  if (h.straggler.named() && static_cast<size_t>(h.straggler.rank) < membership_.hosts.size()) {
    h.straggler_text = StragglerText(h.straggler, membership_.pids, membership_.hosts);
    h.straggler_host = membership_.hosts[h.straggler.rank];
  }
  h.judge = judge_ != nullptr;
  return h;
}

// A failure after the rendezvous: diagnosed like a collective's (the culprit among ranks
// that are gone or silent), and told to the peers, which are in the same set-up.
Status Communicator::FailCreation(const Status& cause) {
  const Status s = WithDiagnosis(cause, /*in_creation=*/true);
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

// Hosts numbered by first appearance; grids and the cost model's shape from them, with
// the fabric the rank reads (agreed with the model's parameters by the probe).
// `ranks_per_core`: this rank's kernel's ranks over its cores.
Status Communicator::InitShape(const std::vector<std::string>& hosts, double ranks_per_core) {
  Layout layout;
  TESSERA_RETURN_IF_ERROR(Layout::FromHostIds(hosts, &layout));
  Fabric fabric;  // what lies above the hosts: only across hosts does the model price it
  if (layout.num_hosts() > 1) TESSERA_RETURN_IF_ERROR(ReadFabric(FabricSourcesOf(settings_), &fabric).Annotate("fabric"));
  fabric_described_ = fabric.described();
  LayoutGrids grids;
  TESSERA_RETURN_IF_ERROR(MakeLayoutGrids(layout.host_of_rank(), settings_.torus, fabric.ShapeFor(layout), &grids));
  host_grid_ = std::move(grids.host);
  torus_grids_ = std::move(grids.torus);
  shape_ = grids.shape;
  if (board_ != nullptr) shape_.board_bytes = board_->capacity();
  if (!settings_.tuning_file.empty()) TESSERA_RETURN_IF_ERROR(CostModel::FromTuningFile(settings_.tuning_file, &model_));
  if (nranks_ > 1) TESSERA_RETURN_IF_ERROR(Probe(ranks_per_core).Annotate("cost-model probe"));
  char sharing[48] = "";
  if (shape_.ranks_per_core > 1) std::snprintf(sharing, sizeof(sharing), ", %.1f ranks per core", shape_.ranks_per_core);
  char racks[96] = "";
  if (shape_.hosts > 1) {
    char rack_text[48] = "no racks";
    if (shape_.fabric.hosts_per_rack > 0) {
      std::snprintf(rack_text, sizeof(rack_text), "racks of %d hosts, uplinks %.0f%%", shape_.fabric.hosts_per_rack,
                    shape_.fabric.uplink_share * 100);
    }
    std::snprintf(racks, sizeof(racks), ", %d NIC(s) a host, %s", shape_.fabric.nics, rack_text);
  }
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank_) + ": " + std::to_string(shape_.hosts) + " host(s), " +
          (shape_.per_host > 0 ? std::to_string(shape_.per_host) + " rank(s) each" : "uneven ranks per host") +
          (shape_.torus_forced ? ", torus " + std::to_string(shape_.torus_x) + "x" + std::to_string(shape_.torus_y) : "") +
          sharing + racks);
  return Status::Ok();
}

// The cost model measured in the job and agreed by every rank (cost_model_probe.h).
Status Communicator::Probe(double ranks_per_core) {
  ProbeOptions options;
  options.level = static_cast<int>(settings_.probe);
  options.tuning_file = !settings_.tuning_file.empty();
  options.ranks_per_core = ranks_per_core;
  options.host_cores = HostCores();
  options.fabric_described = fabric_described_;
  bool agreed = false;
  TESSERA_RETURN_IF_ERROR(ProbeCostModel(Context(), options, &model_, &shape_, &agreed));
  if (agreed) Log(log_level_, LogLevel::kInfo, "rank " + std::to_string(rank_) + ": cost model " + model_.ToString());
  return Status::Ok();
}

// What the executor runs on: this rank's membership (it outlives the executor).
CommunicatorView Communicator::View() {
  CommunicatorView view;
  view.rank = rank_;
  view.nranks = nranks_;
  view.settings = &settings_;
  view.log_level = log_level_;
  view.model = &model_;
  view.shape = &shape_;
  view.premulsum = &premulsum_;
  if (flight_.capacity() > 0) view.observers.push_back(&flight_);
  view.observers.push_back(&activity_);
  view.observers.push_back(&call_stats_);
  if (tracer_) view.observers.push_back(tracer_.get());
  view.context = Context();
  view.fail = [this](const Status& s) { return RecordFailure(s); };
  return view;
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
  ctx.torus_grids = torus_grids_.get();
  ctx.model = &model_;
  ctx.shape = &shape_;
  ctx.board = board_;
  return ctx;
}

Status Communicator::sticky_error() const {
  if (!broken_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::RecordFailure(const Status& cause) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) return revoked_.load() ? error_ : cause;  // a call cut short by a revoke says so
  }
  const Status s = DumpFlightRecord(WithDiagnosis(cause));
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

Status Communicator::WithDiagnosis(const Status& cause, bool in_creation) {
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
    TESSERA_RETURN_IF_ERROR(NewUniqueId(settings, 0, flight_identity_.host, &id).Annotate("split"));
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
  if (abort_.load()) return RecordFailure(RemoteError("the communicator was aborted"));
  return FailIfRevoked(executor_->RunGroup(ops, count));
}

Status Communicator::FailIfRevoked(Status s) {
  if (!s.ok() || !revoked_.load()) return s;
  return RecordFailure(RemoteError("revoked"));
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
    s = RecordFailure(s.Annotate(where));  // also over the device links made so far
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
  if (abort_.load()) return RecordFailure(RemoteError("the communicator was aborted"));
  CollectiveContext ctx = Context();
  ctx.links = device_links_.get();
  ctx.exchange.notices = device_links_.get();
  ctx.board = nullptr;  // device buffers never go on the host board
  return FailIfRevoked(executor_->RunGroupOnDevice(ops, ctx, device_engine_.get(), device_stream_.get()));
}

}  // namespace tessera
