#include "pytorch/operation_queue.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include <ATen/core/ivalue.h>

namespace tessera_torch {

TesseraWork::TesseraWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                         std::weak_ptr<OperationQueue> queue, uint64_t sequence, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      queue_(std::move(queue)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      sequence_(sequence),
      timeout_(timeout) {}

void TesseraWork::ReleaseHeld() {
  if (auto queue = queue_.lock()) queue->Release();
}

bool TesseraWork::isCompleted() {
  ReleaseHeld();
  return c10d::Work::isCompleted();
}

bool TesseraWork::wait(std::chrono::milliseconds timeout) {
  ReleaseHeld();
  // Only an unbounded wait helps: a batch run here blocks until the peers join, which
  // a wait(timeout) must not outlast.
  if (timeout == kNoTimeout) {
    if (auto queue = queue_.lock()) queue->Help(this);
  }
  return c10d::Work::wait(timeout);
}

c10::intrusive_ptr<c10::ivalue::Future> TesseraWork::getFuture() {
  ReleaseHeld();
  return future_;
}

void TesseraWork::MarkDone(std::exception_ptr error) { finish(error); }

void TesseraWork::CompleteFuture(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

namespace {

// The queues that have started, for ShutdownAll.
std::mutex g_live_mu;
std::vector<std::weak_ptr<OperationQueue>> g_live;

}  // namespace

OperationQueue::OperationQueue(tesseraComm_t comm, std::string who, WithoutInterpreter without_interpreter)
    : comm_(comm), who_(std::move(who)), without_interpreter_(std::move(without_interpreter)) {}

std::shared_ptr<OperationQueue> OperationQueue::Start(tesseraComm_t comm, std::string who,
                                                      WithoutInterpreter without_interpreter) {
  std::shared_ptr<OperationQueue> queue(new OperationQueue(comm, std::move(who), std::move(without_interpreter)));
  {
    std::lock_guard<std::mutex> lock(queue->mu_);
    queue->EnsureIdleWorkerLocked();
  }
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.erase(std::remove_if(g_live.begin(), g_live.end(), [](const auto& q) { return q.expired(); }), g_live.end());
  g_live.push_back(queue);
  return queue;
}

void OperationQueue::ShutdownAll() {
  std::vector<std::shared_ptr<OperationQueue>> live;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    for (const auto& q : g_live) {
      if (auto queue = q.lock()) live.push_back(queue);
    }
  }
  for (const auto& queue : live) {
    queue->Shutdown();
    // A worker that shut its own queue down (it was not joined) may still be in a
    // callback: let it end before the interpreter stops it mid-way.
    std::unique_lock<std::mutex> lock(queue->mu_);
    queue->ended_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return queue->running_workers_ == 0; });
  }
}

void OperationQueue::EnsureIdleWorkerLocked() {
  if (idle_workers_ > 0 || stopping_ || workers_.size() >= kMaxWorkers) return;
  ++idle_workers_;  // counted idle from now, so two callers do not both start one
  ++running_workers_;
  workers_.emplace_back([self = shared_from_this()] {
    self->Loop();
    std::lock_guard<std::mutex> lock(self->mu_);
    --self->running_workers_;
    self->ended_cv_.notify_all();
  });
}

OperationQueue::~OperationQueue() { Shutdown(); }

void OperationQueue::Submit(Operation op, bool hold) {
  DropFinished();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hold) {
      held_.push_back(std::move(op));
      return;
    }
    ReleaseLocked();
    std::vector<Operation> alone;
    alone.push_back(std::move(op));
    ready_.push_back(std::move(alone));
  }
  ready_cv_.notify_one();
}

void OperationQueue::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_.empty()) return;
    ReleaseLocked();
  }
  ready_cv_.notify_one();
}

void OperationQueue::ReleaseLocked() {
  if (held_.empty()) return;
  ready_.push_back(std::move(held_));
  held_.clear();
}

void OperationQueue::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    ReleaseLocked();
    stopping_ = true;
  }
  ready_cv_.notify_all();
  auto join = [this] {
    const std::thread::id me = std::this_thread::get_id();
    for (std::thread& worker : workers_) {
      if (worker.get_id() == me) {
        worker.detach();  // this worker ends by itself, keeping the queue alive till then
      } else {
        worker.join();
      }
    }
  };
  if (without_interpreter_) {
    without_interpreter_(join);
  } else {
    join();
  }
  DropFinished();
  if (comm_ != nullptr && !aborted_) tesseraCommDestroy(comm_);
  comm_ = nullptr;
}

void OperationQueue::Abort() {
  if (aborted_.exchange(true)) return;
  tesseraCommAbort(comm_);
}

tesseraResult_t OperationQueue::Shrink(const std::vector<int>& excluded, tesseraComm_t* newcomm,
                                       tesseraConfig_t* config, int flags) {
  return tesseraCommShrink(comm_, excluded.data(), static_cast<int>(excluded.size()), newcomm, config, flags);
}

tesseraResult_t OperationQueue::AsyncError() {
  if (aborted_) return tesseraRemoteError;
  tesseraResult_t error = tesseraSuccess;
  if (tesseraCommGetAsyncError(comm_, &error) != tesseraSuccess) return tesseraInternalError;
  return error;
}

void OperationQueue::DropFinished() {
  std::vector<Operation> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished.swap(finished_);
  }
}  // `finished` dies here, outside the lock

void OperationQueue::Loop() {
  for (;;) {
    std::vector<Operation> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock, [this] { return (stopping_ || !ready_.empty()) && !executing_; });
      if (ready_.empty()) {  // stopping, and nothing left to run
        --idle_workers_;
        return;
      }
      batch = std::move(ready_.front());
      ready_.pop_front();
      executing_ = true;
      --idle_workers_;
    }
    ExecuteExclusively(batch);
    std::lock_guard<std::mutex> lock(mu_);  // see DropFinished
    for (Operation& op : batch) finished_.push_back(std::move(op));
    ++idle_workers_;
  }
}

void OperationQueue::LogStraggler() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_health_ || aborted_ || comm_ == nullptr) return;
  next_health_ = now + std::chrono::seconds(1);
  tesseraHealth_t h = TESSERA_HEALTH_INITIALIZER;
  if (tesseraCommGetHealth(comm_, &h, nullptr, 0) != tesseraSuccess || h.straggler == straggler_) return;
  straggler_ = h.straggler;
  std::fprintf(stderr, "tessera_torch %s: %s\n", who_.c_str(), h.straggler >= 0 ? h.verdict : "no straggler any more");
}

void OperationQueue::Help(TesseraWork* work) {
  for (;;) {
    std::vector<Operation> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (executing_ || ready_.empty() || work->Done()) return;
      batch = std::move(ready_.front());
      ready_.pop_front();
      executing_ = true;
    }
    ExecuteExclusively(batch);
  }
}

void OperationQueue::ExecuteExclusively(std::vector<Operation>& batch) {
  std::exception_ptr error = Execute(batch);
  LogStraggler();
  // Works complete in issue order: before the next batch can start.
  for (Operation& op : batch) op.work->MarkDone(error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    executing_ = false;
    EnsureIdleWorkerLocked();  // to run what the callbacks below may wait for
  }
  ready_cv_.notify_all();
  // Futures only now, with the communicator free: a callback that posts and waits for
  // another operation of this group has it run by another thread (Help, or an idle
  // worker) instead of waiting for this one.
  for (Operation& op : batch) op.work->CompleteFuture(error);
}

std::string OperationQueue::Describe(const std::vector<Operation>& batch, tesseraResult_t result) const {
  std::string names = batch[0].name;
  if (batch.size() > 1) {
    names = "group of " + std::to_string(batch.size()) + " operations (";
    for (size_t i = 0; i < batch.size(); ++i) names += (i ? ", " : "") + batch[i].name;
    names += ")";
  }
  if (aborted_) return "tessera " + names + " failed on " + who_ + ": the group was aborted (abort())";
  // tessera's own message says "timed out" and names the peer; the first words say it too.
  const char* verb = result == tesseraTimeout ? " timed out on " : " failed on ";
  return "tessera " + names + verb + who_ + ": " + tesseraGetErrorString(result) + ": " + tesseraGetLastError(comm_);
}

// Issues the batch (one operation alone, several as one tessera group), then finishes
// each. Any failure is the error of every operation of the batch; it is returned.
std::exception_ptr OperationQueue::Execute(std::vector<Operation>& batch) {
  std::exception_ptr error;
  bool group_open = false;
  try {
    if (aborted_) throw TesseraCallFailed{tesseraRemoteError};
    if (batch.size() > 1) {
      Ok(tesseraGroupStart());
      group_open = true;
    }
    for (Operation& op : batch) op.issue(comm_);
    if (group_open) {
      group_open = false;
      Ok(tesseraGroupEnd());
    }
    for (Operation& op : batch) {
      if (op.finish) op.finish(comm_);
    }
  } catch (const TesseraCallFailed& failed) {
    error = BackendFailure(Describe(batch, failed.result));
  } catch (...) {
    error = std::current_exception();
  }
  if (group_open) tesseraGroupEnd();  // an issue threw inside the group: close it
  return error;
}

}  // namespace tessera_torch
