#include "simulator/recorder.h"

#include "transport/link_table.h"

namespace tessera {
namespace {

// Long enough for any rank's recording; a recorder that stopped completing messages
// (a bug) ends with the engine's timeout instead of hanging.
constexpr int64_t kRecordTimeoutMs = 120000;

}  // namespace

Status CallRecorder::Create(const Layout& layout, const std::string& torus, const FabricShape& fabric,
                            const CostModel& model, std::unique_ptr<CallRecorder>* out) {
  std::unique_ptr<CallRecorder> r(new CallRecorder());
  TESSERA_RETURN_IF_ERROR(MakeLayoutGrids(layout.host_of_rank(), torus, fabric, &r->grids_));
  r->model_ = model;
  *out = std::move(r);
  return Status::Ok();
}

Status CallRecorder::Row(const CallSpec& spec, const AlgorithmInfo** out) const {
  const AlgorithmInfo* row = FindAlgorithm(spec.collective, spec.algorithm);
  if (row == nullptr) {
    return InvalidArgument(std::string(OpName(spec.collective)) + " has no algorithm '" + spec.algorithm + "'");
  }
  if (!row->applies(grids_.shape)) {
    return InvalidArgument(std::string(OpName(spec.collective)) + " " + spec.algorithm +
                           " does not apply here: " + row->not_applicable);
  }
  *out = row;
  return Status::Ok();
}

// Send and receive buffers of the largest size the collective's buffers take (its whole
// p blocks), then room for the algorithms' scratch, all reserved and untouchable.
Status CallRecorder::PrepareBuffers(const CallSpec& spec) {
  const size_t big = PredictedBytes(spec.collective, grids_.shape.p, spec.count, spec.elem_size);
  const size_t want = 4 * big + (size_t{1} << 30);
  if (arena_.reserved() < want) TESSERA_RETURN_IF_ERROR(arena_.Reserve(want));
  arena_.Rewind(0);
  TESSERA_RETURN_IF_ERROR(arena_.Take(big, &buffers_.send));
  return arena_.Take(big, &buffers_.recv);
}

Status CallRecorder::RecordRank(const CallSpec& spec, int rank, RankSchedule* out, bool keep_addresses) {
  const AlgorithmInfo* row = nullptr;
  TESSERA_RETURN_IF_ERROR(Row(spec, &row));
  if (rank < 0 || rank >= grids_.shape.p) return InvalidArgument("rank " + std::to_string(rank) + " is not in the layout");
  TESSERA_RETURN_IF_ERROR(PrepareBuffers(spec));
  const size_t after_buffers = arena_.used();
  ScheduleRecorder recorder(&arena_, keep_addresses);
  LinkTable links(grids_.shape.p);
  links.Add(std::make_unique<RecordingTransport>(&recorder), false);
  CollectiveContext ctx;
  ctx.rank = rank;
  ctx.nranks = grids_.shape.p;
  ctx.links = &links;
  ctx.exchange.deadline = Deadline::AfterMs(kRecordTimeoutMs);
  ctx.exchange.timeout_ms = kRecordTimeoutMs;
  ctx.exchange.progress = nullptr;  // sleep at once
  ctx.exchange.check_calls = false;
  ctx.host_grid = grids_.host.get();
  ctx.torus_grids = grids_.torus.get();
  ctx.model = &model_;
  ctx.shape = &grids_.shape;
  ctx.local_memory = &recorder;
  CollectiveArgs args;
  args.send = buffers_.send;
  args.recv = buffers_.recv;
  args.count = spec.count;
  args.elem_size = spec.elem_size;
  args.reducer.elem_size = spec.elem_size;
  args.root = spec.root;
  const Status s = row->run(ctx, args);
  arena_.Rewind(after_buffers);
  if (!s.ok()) return s.Annotate("recording " + std::string(row->name) + " on rank " + std::to_string(rank));
  return recorder.Finish(out);
}

Status CallRecorder::RecordAll(const CallSpec& spec, std::vector<RankSchedule>* out) {
  out->assign(grids_.shape.p, RankSchedule());
  for (int r = 0; r < grids_.shape.p; ++r) TESSERA_RETURN_IF_ERROR(RecordRank(spec, r, &(*out)[r]));
  return CheckSchedulesMatch(*out).Annotate(std::string("recorded ") + spec.algorithm + " schedules");
}

}  // namespace tessera
