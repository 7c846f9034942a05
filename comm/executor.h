// Executor: runs a communicator's operations. It chooses every collective's algorithm
// from the table (collectives/algorithms.h), puts the datatype and operator policy of
// reductions around it (one front end for the host and device paths, the difference
// confined to an ElementwiseOps), and runs a group's sends and receives together. The
// Communicator owns it and keeps the membership: links, sticky error, abort, split.
#ifndef TESSERA_COMM_EXECUTOR_H_
#define TESSERA_COMM_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/call_observer.h"
#include "base/call_stamp.h"
#include "base/log.h"
#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "collectives/algorithms.h"
#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "collectives/host_memory_pool.h"
#include "comm/choice_tuner.h"
#include "comm/elementwise_ops.h"
#include "comm/operation.h"
#include "comm/premulsum_ops.h"
#include "device/device_engine.h"

namespace tessera {

// What the operator, the type and the path of a reduction decide around its algorithm:
// widening, scaling, canonical values, the division of avg (executor.cc).
struct ReductionPlan;

// The communicator as its Executor sees it: one rank's membership, owned by the
// Communicator, which outlives the Executor. Fixed once the communicator is created.
struct CommunicatorView {
  int rank = 0;
  int nranks = 1;
  const Settings* settings = nullptr;  // TESSERA_ALGO, TESSERA_HALF_WIRE
  LogLevel log_level = LogLevel::kWarn;
  const CostModel* model = nullptr;    // the same on every rank, as is the shape
  const Shape* shape = nullptr;
  const PreMulSumOps* premulsum = nullptr;
  // What records each call (base/call_observer.h): the flight recorder, the activity
  // record, the tracer, as the communicator has them.
  std::vector<CallObserver*> observers;
  // The host path's context: the links, grids and exchange options, all fixed once the
  // communicator exists; each call gives it a deadline of TESSERA_TIMEOUT_MS from its
  // start.
  CollectiveContext context;
  // Records a communication failure as the communicator's sticky error (it breaks);
  // returns what the call reports.
  std::function<Status(const Status&)> fail;
};

// Not thread-safe: a communicator runs one call at a time.
class Executor {
 public:
  explicit Executor(CommunicatorView view);

  // The algorithm of `c` for `bytes` (collectives/algorithms.h: PredictedBytes).
  Selection Choose(OpKind c, size_t bytes) const;
  // Bytes per element that a host-path reduction of `type` moves: float16 and bfloat16
  // travel widened to float32 (4) unless TESSERA_HALF_WIRE=half (2).
  size_t WireElementSize(DataType type) const;

  // Runs a group on the host path: the collectives in issue order, each with a fresh
  // context (its own deadline), then all sends and receives together (so they cannot
  // deadlock whatever their order). Arguments are validated by the caller. A failure
  // while communicating goes to CommunicatorView::fail; InvalidArgument does not.
  Status RunGroup(const Operation* ops, size_t count);
  // The same on the device path: `ctx` has the device links; every temporary buffer and
  // local copy is device memory of `engine`, and reductions' element-wise work runs on
  // `stream` (comm/communicator.h: RunGroupOnDevice).
  Status RunGroupOnDevice(const std::vector<Operation>& ops, CollectiveContext ctx, DeviceEngine* engine,
                          DeviceStream* stream);

 private:
  // Whether host-path reductions widen half types (TESSERA_HALF_WIRE is not "half").
  bool widens_half() const { return widens_half_; }
  CollectiveContext HostContext(int64_t now_us);
  // `device`: the whole group's context on the device path; null on the host path.
  Status RunGroupIn(const Operation* ops, size_t count, const CollectiveContext* device, ElementwiseOps& elementwise);
  // The call the observers are told of: a collective (which also gets the next
  // sequence number and the stamp every rank's call must match), or a group's sends and
  // receives.
  void RecordCollective(const Operation& op, bool on_device);
  void RecordPointToPoint(const Operation* p2p, size_t count);
  // Tells the observers the call began at `begin_us`.
  void CallBegan(int64_t begin_us);
  // Tells the observers how the call ended; a failure that `breaks` the communicator
  // then goes to CommunicatorView::fail (after the observers: the flight record then
  // shows the call failed, and the activity record this rank still in it while the
  // failure is diagnosed). Returns what the call reports.
  Status CallEnded(const Status& s, bool breaks);
  Status RunOne(const Operation& op, const CollectiveContext& ctx, ElementwiseOps& elementwise, bool on_device);
  Status RunReduction(const Operation& op, const CollectiveContext& ctx, ElementwiseOps& elementwise, bool on_device);
  Status RunPrepared(OpKind c, const Operation& op, const ReductionPlan& t, const CollectiveContext& ctx,
                     ElementwiseOps& elementwise, bool on_device, CollectiveArgs args);
  // `segment`: elements per piece.
  Status RunWidenedInSegments(const Operation& op, size_t segment, const CollectiveContext& ctx,
                              ElementwiseOps& elementwise);
  Status Dispatch(OpKind c, const CollectiveContext& ctx, const CollectiveArgs& args, bool on_device);
  // The algorithm for `bytes` of `c`, from the last few choices when it is among them: the
  // model and the shape are fixed once the communicator exists, and a training loop
  // repeats its sizes, so most calls skip predicting every row.
  Selection CachedChoice(OpKind c, size_t bytes);
  Status RunContender(OpKind c, size_t bytes, const ChoiceTuner::Pick& pick, const CollectiveContext& ctx,
                      const CollectiveArgs& args);
  // A group's sends and receives, `count` of them from `p2p`.
  Status RunPointToPointGroup(const Operation* p2p, size_t count, const CollectiveContext& ctx);
  Status RunPointToPoint(const Operation* ops, size_t count, const CollectiveContext& ctx);

  const CommunicatorView view_;
  Shape device_shape_;  // the shape as the device path's choices see it
  // Algorithms' scratch on the host path, reused across calls.
  HostMemoryPool host_memory_;
  CollectiveContext host_context_;  // view_.context in host_memory_
  // Collectives run so far: the sequence number that every rank gives the same call.
  uint32_t collective_seq_ = 0;
  CallRecord call_;  // the running call's
  struct Choice {
    OpKind collective = OpKind::kAllReduce;
    size_t bytes = 0;
    Selection selection;  // algo null: an empty entry
  };
  std::array<Choice, 16> choices_;  // replaced round-robin
  size_t next_choice_ = 0;
  // The last reduction's kernel (typed once set): a training loop repeats its type and
  // operator, and the lookup costs a sizeable part of a small call.
  Reducer last_reducer_;
  // TESSERA_AUTOTUNE, where nothing else decides: host-path choices measured in the job.
  bool tunes_ = false;
  bool widens_half_ = true;  // TESSERA_HALF_WIRE is not "half" (read once: every call asks)
  ChoiceTuner tuner_;
  // The point-to-point path's lists, kept between calls (a loop of groups allocates none).
  std::vector<Operation> p2p_;
  std::vector<Transfer> transfers_;
  std::vector<const Operation*> self_sends_, self_recvs_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_EXECUTOR_H_
