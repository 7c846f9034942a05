// --elastic: going on without the ranks that were lost (see trainer.h).
//
// Every survivor, whatever call failed it:
//  1. revokes both communicators, so the other survivors' calls end at once;
//  2. ends the gradient thread's work and keeps the last state it holds complete: the
//     weights after its last applied update and, with staleness 1, the pending gradient
//     only if its allreduce finished (else it steps back to before that gradient's step,
//     whose images are then read again);
//  3. shrinks the main communicator to the ranks still alive (TESSERA_SHRINK_LOST: a
//     survivor that was computing is kept) and splits the gradients' one off it;
//  4. with the others, agrees on the most advanced state any survivor holds (one allgather
//     of each one's step; a rank one step ahead holds a full reduced gradient, so its
//     step is complete) and takes it from the lowest rank holding it;
//  5. reopens the metrics at that step (the new rank 0, which may not be the old one)
//     and goes on with the rest of the epoch over the new world.
// events.csv and stderr say what happened and when.
#include <chrono>
#include <cstdio>

#include "trainer/trainer.h"

namespace trainer {
namespace {

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr int kMaxRecoveries = 16;

std::string RankList(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : " ") + std::to_string(r);
  return text.empty() ? "none" : text;
}

}  // namespace

tessera::Status Trainer::Recover(const tessera::Status& cause) {
  if (++recovery_.count > kMaxRecoveries) {
    return tessera::SystemError("gave up after " + std::to_string(kMaxRecoveries) + " recoveries: " + cause.message());
  }
  recovery_.seen_s = WallNow();
  const int old_rank = comms_.rank, old_world = comms_.world;
  const int64_t failed_step = progress_.global_step;
  const char* newline = display_ != nullptr && display_->redraws_in_place() ? "\n" : "";
  std::fprintf(stderr, "%strain_resnet: rank %d of %d: a peer is lost after global step %lld: %s\n"
               "train_resnet: rank %d: revoking the communicators, shrinking to the ranks still alive (--elastic)\n",
               newline, old_rank, old_world, static_cast<long long>(failed_step), cause.message().c_str(), old_rank);
  tesseraCommRevoke(comms_.gradients, 0);
  tesseraCommRevoke(comms_.main, 0);
  if (!buckets_->Abandon() && progress_.pending) {  // its allreduce did not finish: step back
    std::fprintf(stderr, "train_resnet: rank %d: the gradient of global step %lld was not reduced in full: its images "
                 "will be read again\n", old_rank, static_cast<long long>(progress_.global_step));
    TrainProgress before = pending_start_;
    before.loss_scale = progress_.loss_scale;
    before.clean_steps = progress_.clean_steps;
    before.pending = false;
    progress_ = before;
  }
  torch::Tensor pending = progress_.pending ? buckets_->PendingGradients() : torch::Tensor();
  buckets_.reset();
  const tessera::Status shrunk = ShrinkCommunicators();
  if (!shrunk.ok()) {  // not retried: the survivors no longer agree on a communicator
    return tessera::SystemError("the survivors could not shrink the communicator: " + shrunk.message());
  }
  buckets_ = std::make_unique<GradientBuckets>(model_->parameters(), settings_.bucket_mb * 1024 * 1024,
                                               settings_.wire_type, settings_.staleness, comms_.gradients);
  buckets_->SetPendingGradients(pending);  // kept if this recovery fails again
  std::vector<int> lost;
  int root = 0;
  TESSERA_RETURN_IF_ERROR(AgreeOnState(old_rank, old_world, &lost, &root));
  TESSERA_RETURN_IF_ERROR(BroadcastState(root, &pending).Annotate("taking the agreed state"));
  if (!leader()) return tessera::Status::Ok();
  TESSERA_RETURN_IF_ERROR(OpenMetrics(/*fresh=*/false));
  // A lost leader may have completed the agreed step without writing its row.
  if (log_.last_step() < progress_.global_step && recovery_.last_step.global_step == progress_.global_step) {
    log_.AddStep(recovery_.last_step);
  }
  const std::string batch = "global batch " + std::to_string(GlobalBatch(progress_.epoch));
  log_.AddEvent(recovery_.seen_s, "failure", failed_step, progress_.epoch, old_world,
                "seen by rank " + std::to_string(old_rank) + ": " + cause.message().substr(0, 400));
  log_.AddEvent(WallNow(), "shrunk", progress_.global_step, progress_.epoch, comms_.world,
                "lost ranks " + RankList(lost) + "; state of rank " + std::to_string(root) + "; " + batch);
  std::fprintf(stderr, "train_resnet: lost rank(s) %s; going on with %d ranks from global step %lld (epoch %d, step "
               "%lld; the state of rank %d), %s, %.2f s after the failure was seen\n",
               RankList(lost).c_str(), comms_.world, static_cast<long long>(progress_.global_step), progress_.epoch + 1,
               static_cast<long long>(progress_.step_in_epoch), root, batch.c_str(), WallNow() - recovery_.seen_s);
  return tessera::Status::Ok();
}

// Replaces both communicators by the survivors' (the old ones are destroyed).
tessera::Status Trainer::ShrinkCommunicators() {
  tesseraComm_t main = nullptr, gradients = nullptr;
  TESSERA_RETURN_IF_ERROR(TesseraCall(tesseraCommShrink(comms_.main, nullptr, 0, &main, nullptr, TESSERA_SHRINK_LOST),
                                      comms_.main, "tesseraCommShrink"));
  int rank = 0, world = 0;
  tesseraCommUserRank(main, &rank);
  tesseraCommCount(main, &world);
  const tessera::Status split = TesseraCall(tesseraCommSplit(main, 0, rank, &gradients, nullptr), main,
                                            "tesseraCommSplit of the survivors' communicator");
  if (!split.ok()) {
    tesseraCommDestroy(main);
    return split;
  }
  tesseraCommDestroy(comms_.gradients);
  tesseraCommDestroy(comms_.main);
  comms_ = Communicators{main, gradients, rank, world};
  return tessera::Status::Ok();
}

// Each survivor's old rank and state, gathered: *root holds the most advanced complete
// state (a step and, at the same step, a pending gradient, count); *lost lists the old
// ranks that are gone.
tessera::Status Trainer::AgreeOnState(int old_rank, int old_world, std::vector<int>* lost, int* root) {
  const double key = state_valid_ ? 2.0 * static_cast<double>(progress_.global_step) + (progress_.pending ? 1 : 0) : -1;
  std::vector<double> mine = {static_cast<double>(old_rank), key};
  std::vector<double> all(2 * static_cast<size_t>(comms_.world));
  TESSERA_RETURN_IF_ERROR(TesseraCall(tesseraAllGather(mine.data(), all.data(), 2, tesseraFloat64, comms_.main, nullptr),
                                      comms_.main, "tesseraAllGather of the survivors' states"));
  std::vector<bool> present(static_cast<size_t>(old_world), false);
  double best = -1;
  for (int r = 0; r < comms_.world; ++r) {
    present[static_cast<size_t>(all[2 * r])] = true;
    if (all[2 * r + 1] > best) {
      best = all[2 * r + 1];
      *root = r;
    }
  }
  if (best < 0) return tessera::SystemError("no survivor holds a whole training state (a second failure during recovery)");
  for (int r = 0; r < old_world; ++r) {
    if (!present[static_cast<size_t>(r)]) lost->push_back(r);
  }
  return tessera::Status::Ok();
}

// The first step completed after a recovery: how long it took from the failure.
void Trainer::NoteRecovered(const StepMetrics& metrics) {
  if (recovery_.seen_s < 0) return;
  const double after = WallNow() - recovery_.seen_s;
  recovery_.seen_s = -1;
  if (!leader()) return;
  char detail[96];
  std::snprintf(detail, sizeof(detail), "%.3f s after the failure was seen", after);
  log_.AddEvent(WallNow(), "first_step", metrics.global_step, metrics.epoch, comms_.world, detail);
  const char* newline = display_->redraws_in_place() ? "\n" : "";
  std::fprintf(stderr, "%strain_resnet: first step on %d ranks (global step %lld) done %s\n", newline, comms_.world,
               static_cast<long long>(metrics.global_step), detail);
}

}  // namespace trainer
