#include "comm/executor.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "collectives/fixed_point.h"
#include "comm/deterministic_reduction.h"
#include "elementwise/elementwise.h"
#include "elementwise/reduce_kernels.h"

namespace tessera {

// What the operator, the type and the path decide, on the host path and the device
// path alike.
struct ReductionPlan {
  size_t in_count = 0;          // input elements (nranks blocks for reduce-scatter)
  bool writes_out = false;      // false on a reduce's non-root ranks
  bool custom = false;          // a PreMulSum operator
  RedOp base = RedOp::kSum;     // the operator asked for (sum for PreMulSum)
  RedOp combine = RedOp::kSum;  // how two elements combine (sum for avg)
  bool widen = false;           // a half type that travels as float32
  DataType wire = DataType::kFloat32;  // the type that travels and is combined
  bool canonical = false;       // deterministic max or min of floats: canonical zeros and NaNs
};

namespace {

bool IsFloat(DataType type) {
  return IsHalf(type) || type == DataType::kFloat32 || type == DataType::kFloat64;
}

ReductionPlan ReductionPlanOf(const Operation& op, int rank, int nranks, bool widens_half, bool deterministic) {
  ReductionPlan t;
  t.in_count = op.count * (op.kind == OpKind::kReduceScatter ? nranks : 1);
  t.writes_out = op.kind != OpKind::kReduce || rank == op.root;
  t.custom = op.op >= kNumRedOps;
  t.base = t.custom ? RedOp::kSum : static_cast<RedOp>(op.op);
  t.combine = t.base == RedOp::kAvg ? RedOp::kSum : t.base;
  t.widen = IsHalf(op.type) && widens_half;
  t.wire = t.widen ? DataType::kFloat32 : op.type;
  t.canonical = deterministic && !t.custom && IsFloat(op.type) && (t.base == RedOp::kMax || t.base == RedOp::kMin);
  return t;
}

// The links' kernel for the wire type: a half type that travels as it is combines in
// float32 at each step. The reducer names its type and operator (device links launch
// kernels by them).
Status ReducerOf(const ReductionPlan& t, Reducer* out) {
  TESSERA_RETURN_IF_ERROR(IsHalf(t.wire) ? GetHalfReducer(t.wire, t.combine, out) : GetReducer(t.wire, t.combine, out));
  out->typed = true;
  out->type = t.wire;
  out->op = t.combine;
  return Status::Ok();
}

// The algorithm's arguments on the operation's buffers, whose elements travel as
// `elem_size` bytes.
CollectiveArgs ArgsOf(const Operation& op, size_t elem_size) {
  CollectiveArgs args;
  args.send = op.send;
  args.recv = op.recv;
  args.count = op.count;
  args.elem_size = elem_size;
  args.root = op.root;
  return args;
}

// In `buf`: `input` (an input of `op`) widened to float32 (t.widen), then with canonical
// zeros and NaNs (t.canonical) or scaled by its PreMulSum scalar (t.custom), in float32
// for a widened half type.
Status PrepareInput(const Operation& op, const void* input, const ReductionPlan& t, const PreMulSumOps& premulsum,
                    const CollectiveContext& ctx, ElementwiseOps& elementwise, Scratch* buf) {
  TESSERA_RETURN_IF_ERROR(buf->Allocate(ctx, t.in_count * SizeOf(t.wire)));
  const void* from = input;
  if (t.widen) {
    TESSERA_RETURN_IF_ERROR(elementwise.Widen(op.type, input, reinterpret_cast<float*>(buf->data()), t.in_count));
    from = buf->data();
  }
  if (t.canonical) CanonicalizeZerosAndNans(t.wire, from, t.in_count, buf->data());
  if (!t.custom) return Status::Ok();
  PreMulSumOps::Scalar scalar;
  TESSERA_RETURN_IF_ERROR(premulsum.Get(op.op, &scalar));
  if (!t.widen) return elementwise.Scale(op.type, scalar.get(), from, buf->data(), t.in_count);
  const float wide_scalar = HalfValueToFloat(op.type, scalar.get());
  return elementwise.Scale(DataType::kFloat32, &wide_scalar, from, buf->data(), t.in_count);
}

// The algorithm's input, in *out: the operation's input, prepared by PrepareInput where
// it must be, and for several parts (tesseraAllReduceParts) their combination with the
// call's reducer in the wire type, in `acc` (`tmp` holds a prepared part). Host memory.
Status PrepareInputs(const Operation& op, const ReductionPlan& t, const PreMulSumOps& premulsum,
                     const CollectiveContext& ctx, ElementwiseOps& elementwise, const Reducer& reducer, Scratch* acc,
                     Scratch* tmp, const void** out) {
  const bool prepare = t.widen || t.custom || t.canonical;
  *out = op.send;
  if (prepare) {
    TESSERA_RETURN_IF_ERROR(PrepareInput(op, op.send, t, premulsum, ctx, elementwise, acc));
    *out = acc->data();
  }
  for (size_t j = 1; j < op.parts.size(); ++j) {
    const void* part = op.parts[j];
    if (prepare) {
      TESSERA_RETURN_IF_ERROR(PrepareInput(op, part, t, premulsum, ctx, elementwise, tmp));
      part = tmp->data();
    }
    if (*out != acc->data()) TESSERA_RETURN_IF_ERROR(acc->Allocate(ctx, t.in_count * SizeOf(t.wire)));
    reducer.fn(acc->data(), *out, part, t.in_count);
    *out = acc->data();
  }
  return Status::Ok();
}

// What the device path cannot do: several parts, and deterministic mode's float sums,
// max and min (their kernels run on host memory).
Status CheckDeviceReduction(const Operation& op, const ReductionPlan& t, bool deterministic) {
  if (!op.parts.empty()) return InvalidUsage("tesseraAllReduceParts takes host buffers");
  if (deterministic && (t.canonical || ReducesOnGrid(op, t.base, t.custom))) {
    return InvalidUsage("deterministic mode (TESSERA_DETERMINISTIC=1) reduces floats in host buffers; "
                        "device-resident calls are not supported");
  }
  return Status::Ok();
}

// What a reduction's errors are annotated with: the collective, and whether on the device.
std::string ReductionWhere(OpKind c, bool on_device) {
  return std::string(OpName(c)) + (on_device ? " (device)" : "");
}

// After the algorithm, where this rank has a result: avg's division, and a widened result
// narrowed into the call's buffer (from args.recv, the algorithm's output).
Status FinishReduction(const Operation& op, const ReductionPlan& t, const CollectiveArgs& args, int nranks,
                       ElementwiseOps& elementwise) {
  if (!t.writes_out) return Status::Ok();
  Status s = t.base == RedOp::kAvg ? elementwise.Divide(t.wire, args.recv, op.count, nranks) : Status::Ok();
  if (s.ok() && t.widen) s = elementwise.Narrow(op.type, reinterpret_cast<const float*>(args.recv), op.recv, op.count);
  return s;
}

// Deterministic mode (comm/deterministic_reduction.h): this rank's contributions (scaled
// first for PreMulSum, each in the call's type) summed on the grid, the collectives
// running through `dispatch`. Host memory.
Status RunOnGrid(const Operation& op, const ReductionPlan& t, const CommunicatorView& view, const CollectiveContext& ctx,
                 ElementwiseOps& elementwise, const std::function<Status(OpKind, const CollectiveArgs&)>& dispatch) {
  std::vector<const void*> inputs = op.parts.empty() ? std::vector<const void*>{op.send} : op.parts;
  std::vector<Scratch> scaled(t.custom ? inputs.size() : 0);
  if (t.custom) {
    PreMulSumOps::Scalar scalar;
    TESSERA_RETURN_IF_ERROR(view.premulsum->Get(op.op, &scalar));
    for (size_t j = 0; j < inputs.size(); ++j) {
      TESSERA_RETURN_IF_ERROR(scaled[j].Allocate(ctx, t.in_count * SizeOf(op.type)));
      TESSERA_RETURN_IF_ERROR(elementwise.Scale(op.type, scalar.get(), inputs[j], scaled[j].data(), t.in_count));
      inputs[j] = scaled[j].data();
    }
  }
  const GridRunner grid{view.rank, view.nranks, view.settings, view.model, view.shape, dispatch};
  return RunGridReduction(op, t.base, inputs, grid, ctx, elementwise);
}

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

Executor::Executor(CommunicatorView view)
    : view_(std::move(view)), device_shape_(*view_.shape),
      tuner_(static_cast<int>(view_.settings->autotune_turn_calls)) {
  device_shape_.board_bytes = 0;  // device-resident buffers never go on the host board
  const Settings& s = *view_.settings;
  tunes_ = s.autotune != 0 && s.algo == "auto" && s.algo_table.empty() && s.deterministic == 0;
  widens_half_ = s.half_wire != "half";
  host_context_ = view_.context;
  host_context_.local_memory = &host_memory_;
}

Selection Executor::Choose(OpKind c, size_t bytes) const {
  if (const AlgorithmInfo* a = tunes_ ? tuner_.Winner(c, bytes) : nullptr) {
    return Selection{a, a->predict(*view_.model, *view_.shape, bytes)};
  }
  return SelectAlgorithm(c, view_.settings->algo, *view_.model, *view_.shape, bytes);
}


size_t Executor::WireElementSize(DataType type) const {
  return IsHalf(type) && widens_half() ? SizeOf(DataType::kFloat32) : SizeOf(type);
}

CollectiveContext Executor::HostContext(int64_t now_us) {
  CollectiveContext ctx = host_context_;
  ctx.exchange.deadline = Deadline::AfterMsFrom(now_us, ctx.exchange.timeout_ms);
  return ctx;
}

Status Executor::RunGroup(const Operation* ops, size_t count) {
  HostElementwiseOps elementwise(widens_half());
  return RunGroupIn(ops, count, nullptr, elementwise);
}

Status Executor::RunGroupOnDevice(const std::vector<Operation>& ops, CollectiveContext ctx, DeviceEngine* engine,
                                  DeviceStream* stream) {
  EngineMemory memory(engine, stream, ctx.exchange);
  ctx.local_memory = &memory;
  DeviceElementwiseOps elementwise(stream, ctx.exchange, view_.rank);
  return RunGroupIn(ops.data(), ops.size(), &ctx, elementwise);
}

Status Executor::RunGroupIn(const Operation* ops, size_t count, const CollectiveContext* device,
                            ElementwiseOps& elementwise) {
  // A group of sends and receives only (the usual one) runs from `ops` as they are.
  if (std::all_of(ops, ops + count, [](const Operation& op) { return IsPointToPoint(op.kind); })) {
    if (count == 0) return Status::Ok();
    return RunPointToPointGroup(ops, count, device ? *device : HostContext(CoarseNowMicros()));
  }
  p2p_.clear();
  for (size_t i = 0; i < count; ++i) {
    const Operation& op = ops[i];
    if (IsPointToPoint(op.kind)) {
      p2p_.push_back(op);
      continue;
    }
    RecordCollective(op, device != nullptr);
    // One reading of the tick clock at each end of the call serves the observers and the
    // deadline: a read of the precise clock costs a sizeable part of an 8-byte call.
    const int64_t begin_us = CoarseNowMicros();
    CallBegan(begin_us);
    CollectiveContext ctx = device ? *device : HostContext(begin_us);
    ctx.exchange.stamp = &call_.stamp;
    const Status s = RunOne(op, ctx, elementwise, device != nullptr);
    // An argument found wrong as the call runs leaves the communicator usable.
    TESSERA_RETURN_IF_ERROR(CallEnded(s, s.code() != Code::kInvalidArgument));
  }
  if (p2p_.empty()) return Status::Ok();
  return RunPointToPointGroup(p2p_.data(), p2p_.size(), device ? *device : HostContext(CoarseNowMicros()));
}

void Executor::RecordCollective(const Operation& op, bool on_device) {
  call_.what = OpName(op.kind);
  call_.bytes = op.count * SizeOf(op.type);
  call_.on_device = on_device;
  CallStamp& stamp = call_.stamp;
  stamp = CallStamp{};
  stamp.count = op.count;
  stamp.seq = ++collective_seq_;
  stamp.kind = static_cast<uint8_t>(op.kind);
  stamp.type = static_cast<uint8_t>(op.type);
  if (IsReduction(op.kind)) stamp.op = static_cast<uint8_t>(op.op < kNumRedOps ? op.op : kNumRedOps);
  if (!op.parts.empty()) stamp.flags = kStampParts;
  if (IsRooted(op.kind)) stamp.root = op.root;
}

// Sequence number 0: sends and receives are not matched across all ranks.
void Executor::RecordPointToPoint(const Operation* p2p, size_t count) {
  uint64_t sent = 0;
  for (size_t i = 0; i < count; ++i) sent += p2p[i].kind == OpKind::kSend ? p2p[i].count * SizeOf(p2p[i].type) : 0;
  call_.what = "send/recv";
  call_.bytes = sent;
  call_.on_device = false;
  call_.stamp = CallStamp{};
  call_.stamp.kind = static_cast<uint8_t>(p2p[0].kind);
  call_.stamp.count = sent;
}

void Executor::CallBegan(int64_t begin_us) {
  for (CallObserver* o : view_.observers) o->CallBegan(call_, begin_us);
}

Status Executor::CallEnded(const Status& s, bool breaks) {
  const CallOutcome outcome = s.ok() ? CallOutcome::kDone : breaks ? CallOutcome::kBreaking : CallOutcome::kFailed;
  const int64_t end_us = CoarseNowMicros();
  for (CallObserver* o : view_.observers) o->CallEnded(outcome, end_us);
  if (outcome == CallOutcome::kBreaking) return view_.fail(s);
  return s;
}

Status Executor::RunOne(const Operation& op, const CollectiveContext& ctx, ElementwiseOps& elementwise,
                        bool on_device) {
  if (IsReduction(op.kind)) return RunReduction(op, ctx, elementwise, on_device);
  if (op.count == 0) return Status::Ok();
  CollectiveArgs args = ArgsOf(op, SizeOf(op.type));
  // An in-place alltoall (NCCL accepts one) reads its input from a copy.
  Scratch input;
  if (op.kind == OpKind::kAlltoAll && op.send == op.recv) {
    const size_t bytes = op.count * args.elem_size * static_cast<size_t>(view_.nranks);
    TESSERA_RETURN_IF_ERROR(input.Allocate(ctx, bytes));
    TESSERA_RETURN_IF_ERROR(LocalCopy(ctx, input.data(), op.send, bytes));
    args.send = input.data();
  }
  return Dispatch(op.kind, ctx, args, on_device);
}

// Reductions, one front end for both paths: the operator, the type and the path decide
// what happens around the algorithm, and `elementwise` does it in the path's memory.
// float16/bfloat16 are widened to float32, reduced in float32 and rounded once at the
// end where the path widens (the host, unless TESSERA_HALF_WIRE=half), else reduced in
// their own type (each step in float32, rounded: half the bytes on the wire); avg is a
// sum divided at the end (integers truncate, as in NCCL); PreMulSum scales this rank's
// input by its scalar, then sums.
Status Executor::RunReduction(const Operation& op, const CollectiveContext& ctx, ElementwiseOps& elementwise,
                              bool on_device) {
  const bool deterministic = view_.settings->deterministic != 0;
  const ReductionPlan t = ReductionPlanOf(op, view_.rank, view_.nranks, elementwise.widens_half(), deterministic);
  if (!last_reducer_.typed || last_reducer_.type != t.wire || last_reducer_.op != t.combine) {
    TESSERA_RETURN_IF_ERROR(ReducerOf(t, &last_reducer_));
  }
  CollectiveArgs args = ArgsOf(op, SizeOf(t.wire));
  args.reducer = last_reducer_;
  if (op.count == 0) return Status::Ok();
  const OpKind c = op.kind;
  if (on_device) {
    TESSERA_RETURN_IF_ERROR(CheckDeviceReduction(op, t, deterministic).Annotate(ReductionWhere(c, on_device)));
  }
  if (deterministic && ReducesOnGrid(op, t.base, t.custom)) {
    const auto dispatch = [&](OpKind collective, const CollectiveArgs& a) {
      return Dispatch(collective, ctx, a, false);
    };
    return RunOnGrid(op, t, view_, ctx, elementwise, dispatch).Annotate(ReductionWhere(c, on_device));
  }
  const size_t segment = static_cast<size_t>(view_.settings->half_segment_bytes) / sizeof(float);
  if (t.widen && !on_device && op.kind == OpKind::kAllReduce && op.parts.empty() && op.count > segment) {
    return RunWidenedInSegments(op, segment, ctx, elementwise);
  }
  if (t.widen || t.custom || t.canonical || op.parts.size() > 1) {
    return RunPrepared(c, op, t, ctx, elementwise, on_device, args);
  }
  TESSERA_RETURN_IF_ERROR(Dispatch(c, ctx, args, on_device));
  const Status s = FinishReduction(op, t, args, view_.nranks, elementwise);
  return s.ok() ? s : s.Annotate(ReductionWhere(c, on_device));
}

// A reduction whose input is prepared first, in scratch memory of the context (the host
// pool, no zero-fill, or the device): widened, scaled, made canonical or combined from
// parts (PrepareInputs); a widened result is narrowed into the call's buffer. Apart
// from RunReduction so that the usual call makes none of its three scratch buffers.
Status Executor::RunPrepared(OpKind c, const Operation& op, const ReductionPlan& t, const CollectiveContext& ctx,
                             ElementwiseOps& elementwise, bool on_device, CollectiveArgs args) {
  Scratch in_buf, part_buf, out_buf;
  Status s = PrepareInputs(op, t, *view_.premulsum, ctx, elementwise, args.reducer, &in_buf, &part_buf, &args.send);
  if (!s.ok()) return s.Annotate(ReductionWhere(c, on_device));
  if (t.widen) {
    if (t.writes_out) TESSERA_RETURN_IF_ERROR(out_buf.Allocate(ctx, op.count * args.elem_size));
    args.recv = t.writes_out ? out_buf.data() : nullptr;
  }
  TESSERA_RETURN_IF_ERROR(Dispatch(c, ctx, args, on_device));
  s = FinishReduction(op, t, args, view_.nranks, elementwise);
  return s.ok() ? s : s.Annotate(ReductionWhere(c, on_device));
}

// A half-type allreduce on the float32 wire, segment by segment (TESSERA_HALF_SEGMENT_BYTES
// of float32): each segment is widened, reduced and narrowed while it is in cache, where
// the whole buffer at once would take three passes through memory, several times
// float32's time per element.
Status Executor::RunWidenedInSegments(const Operation& op, size_t segment, const CollectiveContext& ctx,
                                      ElementwiseOps& elementwise) {
  const size_t es = SizeOf(op.type);
  Operation piece = op;
  for (size_t first = 0; first < op.count; first += segment) {
    piece.send = static_cast<const char*>(op.send) + first * es;
    piece.recv = static_cast<char*>(op.recv) + first * es;
    piece.count = std::min(segment, op.count - first);
    TESSERA_RETURN_IF_ERROR(RunReduction(piece, ctx, elementwise, false));
  }
  return Status::Ok();
}

Selection Executor::CachedChoice(OpKind c, size_t bytes) {
  for (const Choice& k : choices_) {
    if (k.selection.algo != nullptr && k.collective == c && k.bytes == bytes) return k.selection;
  }
  Choice& slot = choices_[next_choice_++ % choices_.size()];
  slot = Choice{c, bytes, SelectAlgorithm(c, view_.settings->algo, *view_.model, *view_.shape, bytes)};
  return slot.selection;
}

// The collective's algorithm from its table: the same choice on every rank (the model
// and the shape agree, and so do the tuner's measurements). The choice is logged at
// INFO with every candidate's prediction (the text is built only then) and names the
// operation in the trace.
Status Executor::Dispatch(OpKind c, const CollectiveContext& ctx, const CollectiveArgs& args, bool on_device) {
  const size_t bytes = PredictedBytes(c, view_.nranks, args.count, args.elem_size);
  const bool explain = view_.log_level >= LogLevel::kInfo;
  const ChoiceTuner::Pick pick =
      tunes_ && !on_device ? tuner_.Next(c, bytes, *view_.model, *view_.shape) : ChoiceTuner::Pick{};
  std::string why;
  Selection choice;
  if (pick.algorithm != nullptr) {
    choice = Selection{pick.algorithm, pick.algorithm->predict(*view_.model, *view_.shape, bytes)};
    if (explain) {
      why = pick.size >= 0 ? "a contender, measured (TESSERA_AUTOTUNE)" : "measured in the job (TESSERA_AUTOTUNE)";
    }
  } else if (explain || on_device) {
    choice = SelectAlgorithm(c, view_.settings->algo, *view_.model, on_device ? device_shape_ : *view_.shape, bytes,
                             explain ? &why : nullptr);
  } else {
    choice = CachedChoice(c, bytes);
  }
  const char* label = choice.algo->Label();
  for (CallObserver* o : view_.observers) o->AlgorithmChosen(c, label);
  if (explain) {
    Log(view_.log_level, LogLevel::kInfo,
        "rank " + std::to_string(view_.rank) + ": " + (on_device ? "device " : "") + OpName(c) + " of " +
            std::to_string(bytes) + " B: " + label + " (predicted " + std::to_string(choice.predicted_s * 1e6) +
            " us; " + why + ")");
  }
  Status s = pick.size >= 0 ? RunContender(c, bytes, pick, ctx, args) : choice.algo->run(ctx, args);
  if (s.ok()) return s;
  return s.Annotate(std::string(OpName(c)) + " (" + label + (on_device ? ", device" : "") + ")");
}

// A contender's call (TESSERA_AUTOTUNE), timed, with the contender's own polling
// state in place of the communicator's; after a size's last call its decision is
// logged and, on rank 0, saved to TESSERA_AUTOTUNE_FILE. A file that cannot be written
// is a warning: the job's calls do not depend on it.
Status Executor::RunContender(OpKind c, size_t bytes, const ChoiceTuner::Pick& pick, const CollectiveContext& ctx,
                              const CollectiveArgs& args) {
  ProgressPolicy* progress = ctx.exchange.progress;
  const int64_t start_us = NowMicros();
  const ProgressPolicy::State own = progress != nullptr ? progress->Save(start_us) : ProgressPolicy::State{};
  if (progress != nullptr) progress->Resume(*tuner_.PolicyOf(pick), start_us);
  const Status ran = pick.algorithm->run(ctx, args);
  const int64_t end_us = NowMicros();
  if (progress != nullptr) {
    *tuner_.PolicyOf(pick) = progress->Save(end_us);
    progress->Resume(own, end_us);
  }
  TESSERA_RETURN_IF_ERROR(ran);
  std::string decided;
  TESSERA_RETURN_IF_ERROR(tuner_.Record(pick, (end_us - start_us) * 1e-6, ctx, &decided));
  if (decided.empty()) return Status::Ok();
  const std::string who = "rank " + std::to_string(view_.rank) + ": ";
  Log(view_.log_level, LogLevel::kInfo,
      who + OpName(c) + " of " + std::to_string(bytes) + " B, measured in the job: " + decided);
  const std::string& path = view_.settings->autotune_file;
  if (view_.rank != 0 || path.empty()) return Status::Ok();
  const Status saved = CostModel::SaveChoices(path, "TESSERA_AUTOTUNE: the algorithms measured in the job",
                                              tuner_.Decided(*view_.shape));
  if (!saved.ok()) Log(view_.log_level, LogLevel::kWarn, who + "TESSERA_AUTOTUNE_FILE: " + saved.message());
  return Status::Ok();
}

Status Executor::RunPointToPointGroup(const Operation* p2p, size_t count, const CollectiveContext& ctx) {
  // Sends to self must pair with receives from self: a local mistake, checked before
  // communicating, so it does not break the communicator.
  size_t self_sends = 0, self_recvs = 0;
  for (size_t i = 0; i < count; ++i) {
    if (p2p[i].peer == view_.rank) ++(p2p[i].kind == OpKind::kSend ? self_sends : self_recvs);
  }
  if (self_sends != self_recvs) {
    return InvalidUsage(std::to_string(self_sends) + " send(s) to self but " + std::to_string(self_recvs) +
                        " receive(s) from self: a send to self needs its receive in the same group");
  }
  RecordPointToPoint(p2p, count);
  CallBegan(CoarseNowMicros());
  Status s = RunPointToPoint(p2p, count, ctx);
  if (!s.ok()) s = s.Annotate(count == 1 ? OpName(p2p[0].kind) : "send/recv group");
  return CallEnded(s, true);
}

// Every send and receive of the group in one exchange: the engine progresses them all
// together, so their order on each rank does not matter. Sends to self are copies,
// matched in order with receives from self.
Status Executor::RunPointToPoint(const Operation* ops, size_t count, const CollectiveContext& ctx) {
  std::vector<Transfer>& t = transfers_;
  std::vector<const Operation*>& self_sends = self_sends_;
  std::vector<const Operation*>& self_recvs = self_recvs_;
  t.clear();
  self_sends.clear();
  self_recvs.clear();
  for (size_t i = 0; i < count; ++i) {
    const Operation& op = ops[i];
    const size_t bytes = op.count * SizeOf(op.type);
    if (op.peer == view_.rank) {
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

}  // namespace tessera
