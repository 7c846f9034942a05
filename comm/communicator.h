// Communicator: one rank's membership of a group, owning its settings, its links to
// peers and its sticky error. The C API (c_api.cc) is a thin shim over it.
#ifndef TESSERA_COMM_COMMUNICATOR_H_
#define TESSERA_COMM_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <map>
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
#include "collectives/host_memory_pool.h"
#include "comm/operation.h"
#include "transport/cuda_ipc/device_engine.h"
#include "transport/link_table.h"
#include "transport/shm/shm_transport.h"

namespace tessera {

class IbverbsTransport;

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

  // The allreduce algorithm the communicator would choose for `bytes`.
  Selection ChooseAllReduce(size_t bytes) const;
  // Bytes per element that a host-path reduction of `type` moves: float16 and bfloat16
  // travel widened to float32 (4) unless TESSERA_HALF_WIRE=half (2).
  size_t WireElementSize(DataType type) const;

  // InvalidArgument when the operation cannot run here (operator, datatype).
  Status CheckOperation(const Operation& op) const;
  // Runs one operation, or a group of them: the collectives in issue order, then all
  // sends and receives together (so they cannot deadlock whatever their order).
  // Arguments are validated by the caller (ValidateOp for the reduction operator). A
  // failure while communicating breaks the communicator: later calls return the same
  // error without communicating.
  Status Run(const Operation& op);
  Status RunGroup(const std::vector<Operation>& ops);

  // Reduction operators created for this communicator (PreMulSum).
  Status CreatePreMulSum(const void* scalar, DataType type, bool read_now, int* op);
  Status DestroyRedOp(int op);
  // InvalidArgument unless `op` is a built-in operator or one of this communicator's
  // operators created for `type`.
  Status ValidateOp(int op, DataType type) const;

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
  // Collective: every rank must call it (comm/device_path.cc does on the first
  // device-resident call); blocks until all have, bounded by the timeout.
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

 private:
  Communicator() = default;
  Status Init(const Settings& settings, const UniqueIdData& id, int nranks, int rank);
  CollectiveContext Context() const;
  Status InitShape(const std::vector<RankInfo>& all);
  Status ProbeAndAgree();
  // The group's collectives one by one, then its sends and receives in one exchange.
  // `device` is the device-resident context for the whole group; null on the host path,
  // where each operation gets a fresh Context() (its own deadline).
  Status RunGroupIn(const std::vector<Operation>& ops, const CollectiveContext* device);
  Status RunOne(const Operation& op, const CollectiveContext& ctx, bool on_device);
  Status Dispatch(Collective c, const CollectiveContext& ctx, const CollectiveArgs& args, bool on_device);
  Status RunReduction(const Operation& op, const CollectiveContext& ctx);
  Status RunPointToPoint(const std::vector<Operation>& ops, const CollectiveContext& ctx);
  Status RunReductionOnDevice(const Operation& op, const CollectiveContext& ctx);
  // Runs the point-to-point operations of a group after checking sends to self.
  Status RunPointToPointGroup(const std::vector<Operation>& p2p, const CollectiveContext& ctx);

  struct PreMulSumOp {
    DataType type;
    const void* scalar_ptr;  // read at each call when not copied
    double value[1];         // the scalar copied at creation (room for any type)
    bool copied;
  };
  // Records `s` as the sticky error (the first one wins) and returns it.
  Status Break(const Status& s);

  Settings settings_;
  LogLevel log_level_ = LogLevel::kWarn;
  // The shape of the communicator for algorithm choice, and its grids.
  Shape shape_;
  CostModel model_;
  std::unique_ptr<Grid> host_grid_, torus_grid_;
  std::unique_ptr<Tracer> tracer_;  // TESSERA_TRACE_DIR only
  // Algorithms' scratch on the host path, reused across calls (collectives run one at a
  // time per communicator).
  std::unique_ptr<HostMemoryPool> host_memory_ = std::make_unique<HostMemoryPool>();
  uint64_t op_count_ = 0;
  int rank_ = 0;
  int nranks_ = 1;
  int64_t spin_us_ = 0;
  std::unique_ptr<LinkTable> links_;
  std::atomic<bool> abort_{false};
  mutable std::mutex error_mu_;
  Status error_;
  std::map<int, PreMulSumOp> custom_ops_;  // by operator id (>= kNumRedOps)
  int next_op_ = kNumRedOps;
  // Device-resident calls: this host's ranks, and once enabled the engine, its stream
  // for local work, and the cuda_ipc links (declared after the engine: closed first).
  std::vector<ShmTransport::LocalRank> local_;
  bool allows_cuda_ipc_ = false;
  int hosts_ = 1;
  IbverbsTransport* ibverbs_ = nullptr;  // in links_, if ibverbs carries some pair
  std::unique_ptr<DeviceEngine> device_engine_;
  std::unique_ptr<DeviceStream> device_stream_;
  std::unique_ptr<LinkTable> device_links_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_COMMUNICATOR_H_
