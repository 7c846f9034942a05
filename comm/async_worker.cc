#include "comm/async_worker.h"

namespace tessera {

AsyncWorker::AsyncWorker() : thread_([this] { Loop(); }) {}

AsyncWorker::~AsyncWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void AsyncWorker::Post(std::function<Status()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

Status AsyncWorker::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_error_.ok()) return first_error_;
  if (running_ || !queue_.empty()) return Status(Code::kInProgress, "operations in progress");
  return Status::Ok();
}

void AsyncWorker::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return !running_ && queue_.empty(); });
}

void AsyncWorker::DropPending() {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
}

void AsyncWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<Status()> task = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    Status s = task();
    lock.lock();
    running_ = false;
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    changed_.notify_all();
  }
}

}  // namespace tessera
