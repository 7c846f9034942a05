// AsyncWorker: the background thread of a non-blocking communicator (config.blocking
// = 0). Calls on such a communicator post their work here and return
// tesseraInProgress; the work runs in order; the state answers InProgress until the
// queue is empty, then the first error or OK.
#ifndef TESSERA_COMM_ASYNC_WORKER_H_
#define TESSERA_COMM_ASYNC_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/status.h"

namespace tessera {

class AsyncWorker {
 public:
  AsyncWorker();
  // Runs what is queued (each task is bounded by the communicator's timeout), then stops.
  ~AsyncWorker();

  void Post(std::function<Status()> task);
  // InProgress while work is queued or running; then the first failure, or OK.
  Status state() const;
  // Blocks until the queue is empty.
  void WaitIdle();
  // Drops queued work that has not started (for abort).
  void DropPending();

 private:
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::function<Status()>> queue_;
  bool running_ = false;
  bool stopping_ = false;
  Status first_error_;
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_ASYNC_WORKER_H_
