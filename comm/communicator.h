// Communicator: one rank's membership of a group, owning its settings, its links to
// peers, its sticky error and its PreMulSum operators. Its Executor (executor.h) runs
// the operations. The C API (c_api.cc) holds one in each handle (handle.h).
#ifndef TESSERA_COMM_COMMUNICATOR_H_
#define TESSERA_COMM_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "bootstrap/rendezvous.h"
#include "collectives/algorithms.h"
#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "collectives/grid.h"
#include "comm/executor.h"
#include "comm/operation.h"
#include "comm/flight_recorder.h"
#include "comm/premulsum_ops.h"
#include "diagnosis/activity.h"
#include "diagnosis/call_stats.h"
#include "diagnosis/diagnose.h"
#include "diagnosis/health.h"
#include "diagnosis/straggler_judge.h"
#include "diagnosis/watch.h"
#include "metrics/metrics_endpoint.h"
#include "device/device_engine.h"
#include "transport/link_table.h"
#include "transport/registry.h"

namespace tessera {

class Communicator {
 public:
  // Joins the rendezvous of `id` as `rank` of `nranks` and sets up transports.
  // Arguments are assumed validated by the caller.
  static Status Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Settings& settings() const { return settings_; }
  LogLevel log_level() const { return log_level_; }

  // What runs the operations: algorithm choice (Choose) and the wire size of reductions.
  const Executor& executor() const { return *executor_; }
  // The reduction operators created for this communicator, which validation asks.
  const PreMulSumOps& premulsum() const { return premulsum_; }

  // Runs one operation, or a group of them (Executor::RunGroup): the collectives in
  // issue order, then all sends and receives together. Arguments are validated by the
  // caller (comm/call_validation.h). A failure while
  // communicating breaks the communicator: later calls return the same error without
  // communicating.
  Status Run(const Operation& op);
  Status RunGroup(const std::vector<Operation>& ops);

  // Reduction operators created for this communicator (PreMulSumOps). Thread-safe.
  Status CreatePreMulSum(const void* scalar, DataType type, bool read_now, int* op);
  Status DestroyRedOp(int op);

  // Collective over this communicator: the ranks passing the same color form a new
  // communicator ordered by (key, rank); color < 0 gives none (*out stays null).
  Status Split(int color, int key, const Settings& settings, std::unique_ptr<Communicator>* out);

  // --- Device-resident calls (docs/cuda.md) ---------------------------------------
  // Whether calls may run device-resident here. Fixed at creation, the same on every
  // rank. More than one rank, and either
  // - all on one host, with TESSERA_TRANSPORT allowing cuda_ipc; or
  // - on several hosts, every rank with GPUDirect RDMA over ibverbs (its summary says
  //   so), and TESSERA_TRANSPORT allowing cuda_ipc where a host has several ranks.
  bool device_resident_possible() const;
  // Sets up the device links with `engine`, which the communicator then owns: cuda_ipc
  // among the ranks of this host, ibverbs with GPUDirect RDMA to the other hosts.
  // Collective: every rank must call it (comm/device_path.cc's Attach does, at creation);
  // blocks until all have, bounded by the timeout.
  // InvalidUsage when !device_resident_possible() or when already enabled.
  Status EnableDeviceLinks(std::unique_ptr<DeviceEngine> engine);
  // Null until EnableDeviceLinks.
  DeviceEngine* device_engine() const { return device_engine_.get(); }
  // Runs `ops` as RunGroup does, over the device links: every buffer must be device
  // memory of device_engine() (comm/device_path.h: RunsOnDevice), and so is every
  // temporary buffer and local copy. Reductions run as device kernels: float16 and
  // bfloat16 travel as they are and are reduced in float32 at each step (as with
  // TESSERA_HALF_WIRE=half), PreMulSum scales and avg divides on the device. Allreduce
  // uses the ring, reduce the chain, reduce-scatter the ring's first phase, allgather
  // the ring, broadcast the chain. Alltoall is not device-resident (InvalidUsage).
  Status RunGroupOnDevice(const std::vector<Operation>& ops);

  // Thread-safe: the error that broke the communicator, or OK.
  Status sticky_error() const;
  // Thread-safe: makes a blocked or future collective fail promptly.
  void RequestAbort() { abort_.store(true); }

  // --- Surviving a lost rank (docs/diagnosis.md#revoke-and-shrink) --------------------
  // Thread-safe, not collective: every pending and future call on this communicator
  // fails promptly, on this rank ("revoked") and, through the failure notice, on every
  // rank that can still be reached. The communicator keeps its resources (its watch
  // service, which Shrink uses) until it is destroyed.
  void Revoke();
  // Called by the surviving ranks only, each with the same `exclude` (ranks of this
  // communicator; empty: the culprits of this communicator's diagnosis, or with `lost`
  // the ranks whose watch service is gone or silent now): they create a
  // new communicator of the ranks not excluded, numbered in their old order, without
  // the excluded ranks taking part and without this communicator's links. They agree
  // through the lowest survivor's watch service: it serves the new unique id and its
  // list of excluded ranks, and a survivor whose explicit list differs fails naming
  // both (an empty list adopts the lowest survivor's). When the diagnosis named nobody
  // (the first failure this rank saw was a peer's revoke), an empty list means the lost
  // ranks as with `lost`. InvalidUsage when this rank is excluded or diagnosis is off
  // (TESSERA_DIAGNOSIS_MS=0).
  Status Shrink(const std::vector<int>& exclude, bool lost, const Settings& settings,
                std::unique_ptr<Communicator>* out);

  // Thread-safe, any time: writes the flight recorder to TESSERA_FLIGHT_RECORDER_DIR
  // now; *path names the file. InvalidUsage when the setting is empty.
  Status DumpFlightRecordNow(const std::string& reason, std::string* path) const;

  // Thread-safe, any time, never communicates: this rank's health snapshot (its calls,
  // its stalls on each peer, the straggler verdict it last got; diagnosis/health.h).
  HealthSnapshot Health() const;

 private:
  Communicator() = default;
  Status Init(const Settings& settings, const UniqueIdData& id, int nranks, int rank);
  // Before the rendezvous: opens what peers will reach this rank by (the watch service,
  // the transports) and fills what this rank tells them: its pid and host, the settings
  // every rank must agree on, its cards.
  Status OpenForPeers(uint64_t secret, RankInfo* mine);
  // `now_us`: NowMicros(), which the exchange deadline (TESSERA_TIMEOUT_MS) counts from.
  CollectiveContext Context(int64_t now_us = NowMicros()) const;
  CommunicatorView View();
  Status SetUpWith(const RankTable& all, const Deadline& deadline);
  Status FailCreation(const Status& cause);
  Status FailRendezvous(const Status& cause);
  Status InitShape(const std::vector<std::string>& hosts, double ranks_per_core);
  Status Probe(double ranks_per_core);
  // The communicator breaks: records `cause` as the sticky error (the first one wins:
  // later calls return it without communicating) and returns what the failing call
  // reports. The first is diagnosed (WithDiagnosis), written to the flight record
  // (TESSERA_FLIGHT_RECORDER_DIR, naming its file) and told to the peers, so that they
  // fail now with this root cause instead of timing out.
  Status RecordFailure(const Status& cause);
  // When `cause` can be a peer's doing (a timeout, a peer gone or failed; during
  // creation also a system error, such as a crashed peer's missing segment; not an
  // abort): the verdict of asking every rank (diagnosis/diagnose.h) first, then what
  // this rank saw. The verdict is also published for peers to adopt. Else `cause`.
  Status WithDiagnosis(const Status& cause, bool in_creation = false);
  // `s` of a call that ended while a revoke arrived from another thread: the call is
  // revoked too, and (the revoking thread left it to this one) the peers are told now.
  Status FailIfRevoked(Status s);
  // Run and RunGroup: `count` operations from `ops`, as one group.
  Status RunOps(const Operation* ops, size_t count);
  // The watch service, started before the rendezvous (its address is this rank's
  // "watch" card), and after it everyone's addresses, pids and hosts.
  Status StartWatch(const Settings& settings, uint64_t secret, RankInfo* mine);
  void InitMembership(const RankTable& all, const std::vector<std::string>& hosts, const std::vector<int>& pids);
  // Shrink's agreement: the lowest survivor offers the id and its list; the others fetch.
  Status OfferShrink(const std::vector<int>& exclude, const Settings& settings, UniqueIdData* id);
  Status FetchShrink(int leader, bool adopt, std::vector<int>* exclude, UniqueIdData* id);
  // The ranks whose watch service refuses or does not answer within TESSERA_DIAGNOSIS_MS.
  Status LostRanks(std::vector<int>* lost) const;
  Status DumpFlightRecord(const Status& cause) const;
  // After creation: rank 0's straggler judge (TESSERA_STRAGGLER_WINDOW) and the metrics
  // server (TESSERA_METRICS_PORT; a failure to serve is logged, not fatal).
  void StartWatchers(const RankTable& all);

  Settings settings_;
  LogLevel log_level_ = LogLevel::kWarn;
  // The shape of the communicator for algorithm choice, and its grids.
  Shape shape_;
  CostModel model_;
  bool fabric_described_ = false;  // this rank read a fabric description (topology/fabric.h)
  std::unique_ptr<Grid> host_grid_;
  std::unique_ptr<TorusGrids> torus_grids_;
  std::unique_ptr<Tracer> tracer_;  // TESSERA_TRACE_DIR only
  // Runs the operations on this membership; created once Init has succeeded.
  std::unique_ptr<Executor> executor_;
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<ProgressPolicy> progress_;  // how waits poll; used by the thread in a call
  std::atomic<bool> abort_{false};
  mutable std::mutex error_mu_;
  Status error_;
  std::atomic<bool> broken_{false};  // error_ is set (read without error_mu_ by every call)
  PreMulSumOps premulsum_;
  // The last TESSERA_FLIGHT_RECORDER operations, and who this rank is in its dumps.
  FlightRecorder flight_{0};
  FlightIdentity flight_identity_;
  // What the calls did, by kind (an observer of every call), for Health.
  CallStats call_stats_;
  // The backends, from their opening to the device links (declared before the link
  // tables: destroyed after them). Once device links are enabled: the engine, its
  // stream for local work, and the device links (declared after the engine: closed first).
  TransportSet transports_;
  std::unique_ptr<LinkTable> links_;
  HostBoard* board_ = nullptr;  // links_->Board(), found once the links exist
  std::unique_ptr<DeviceEngine> device_engine_;
  std::unique_ptr<DeviceStream> device_stream_;
  std::unique_ptr<LinkTable> device_links_;
  // Diagnosis: what this rank is doing, who the ranks are, and the service answering
  // peers about it (declared last: its thread, which reads the members above, stops
  // first).
  mutable Activity activity_;  // internally locked; the exchange tells it what it waits for
  Membership membership_;  // watch addresses empty: no diagnosis
  std::atomic<bool> revoked_{false};
  std::mutex run_mu_;      // held while a call runs (Revoke breaks the communicator only when free)
  std::atomic<uint32_t> shrinks_{0};  // Shrink calls so far: which offer of the lowest survivor is current
  std::unique_ptr<WatchService> watch_;
  // Rank 0's straggler judge and the metrics server's hold on Health (declared last:
  // their threads read the members above, and stop first).
  std::unique_ptr<StragglerJudge> judge_;
  std::unique_ptr<MetricsEndpoint> metrics_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_COMMUNICATOR_H_
