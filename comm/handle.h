// tesseraComm, the handle the C API hands out (tesseraComm_t): a Communicator with what
// the C API keeps around it: the thread of a non-blocking communicator, the device path
// of the CUDA build, and the communicator's last error. handle_registry.h says which
// handles are live.
#ifndef TESSERA_COMM_HANDLE_H_
#define TESSERA_COMM_HANDLE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "comm/async_worker.h"
#include "comm/communicator.h"
#include "comm/device_path.h"
#include "tessera/tessera.h"

struct tesseraComm {
  explicit tesseraComm(const tessera::Settings& settings)
      : device(tessera::DevicePath::Create(&published, settings)) {}

  // The communicator, or null until created (a non-blocking one is created on its worker
  // while the caller's thread may already read it: published with release, read with
  // acquire, never changed after).
  tessera::Communicator* impl() const { return published.load(std::memory_order_acquire); }
  void Publish(std::unique_ptr<tessera::Communicator> c) {
    owned = std::move(c);
    published.store(owned.get(), std::memory_order_release);
  }

  // "rank r of n" and the communicator's name, for errors.
  std::string Describe() const;
  // Blocks until the calls queued on the worker and the device path have run (before
  // a call that uses the communicator on the caller's thread: split, shrink, finalize).
  void WaitIdle();
  // tesseraCommGetAsyncError: the worker's failure, else the communicator's sticky
  // error, else the device path's.
  tessera::Status AsyncError() const;
  // tesseraRedOpCreatePreMulSum (after the queued calls) and tesseraRedOpDestroy.
  tessera::Status CreatePreMulSum(const void* scalar, tessera::DataType type, bool host_immediate, int* op);
  tessera::Status DestroyRedOp(int op);
  // tesseraAllReduceAlgorithm: the name of the algorithm an allreduce of `count` elements
  // of `type` runs (after the queued calls).
  tessera::Status AllReduceAlgorithm(size_t count, tessera::DataType type, const char** name);
  // tesseraCommAbort, before the handle waits for the calls inside it: they fail promptly.
  void Abort();

  std::unique_ptr<tessera::Communicator> owned;
  std::atomic<tessera::Communicator*> published{nullptr};
  int rank = 0;
  int nranks = 0;
  std::string name;
  std::unique_ptr<tessera::AsyncWorker> worker;  // non-blocking communicators only
  std::atomic<int> active_calls{0};              // handle_registry.h: CallGuard
  std::mutex error_mu;
  std::string last_error;
  // CUDA device buffers and streams; null where there is no usable CUDA (then every
  // call runs on the host). Declared last: stops first.
  std::unique_ptr<tessera::DevicePath> device;
};

#endif  // TESSERA_COMM_HANDLE_H_
