// DevicePath: a communicator's calls with CUDA device buffers and streams (docs/cuda.md).
//
// Where this build and process can use CUDA (the CUDA build: //comm:device_path_cuda,
// or --config=cuda), every communicator handle has one, and the C API hands it every
// call first: a single call, or one communicator's part of a group. Elsewhere (the
// default library, or no usable CUDA) a handle has none, every call runs on the host,
// and a non-NULL stream is InvalidArgument. The build chooses the implementation:
// device_path_cuda.cc or device_path_cpu.cc.
//
// A call whose buffers are device or managed memory, or that names a stream, is staged:
// on the caller's thread the stream receives the copies to pinned host memory and a
// GPU-side wait (cuda/device_buffers.h), and the call returns at once; a proxy thread
// (the communicator's own, or a non-blocking communicator's worker) then waits for the
// inputs, runs the ordinary host collective and lets the stream continue. The caller's
// thread never waits for the GPU. Host buffers on the NULL stream run as on the CPU
// build.
//
// Device-resident calls: a call of a blocking communicator whose buffers are all
// cudaMalloc'd memory of the communicator's device, on a communicator whose ranks are
// either all on one host (with cuda_ipc allowed by TESSERA_TRANSPORT) or all able to do
// GPUDirect RDMA, is not staged: the caller's thread waits (bounded) until its streams
// reach the call, then runs the collective on the device buffers themselves, over
// cuda_ipc links inside a host and ibverbs links in GPUDirect mode between hosts
// (Communicator::RunGroupOnDevice; Attach set the engine and the links up when the
// communicator was created), and returns when the results are in place. It never runs
// on the proxy: the proxy's CUDA calls (copies, kernel launches) may block for good on
// the driver's locks while a stream waits on the GPU for the proxy (cuda/device_buffers.h).
// Every rank must then pass device buffers, as NCCL requires; a rank that stages while
// its peers do not times out naming the peer. A non-blocking communicator, or a group
// of several communicators, stages instead.
//
// Thread-safety: as the C API's: calls on one communicator are serialised by the caller,
// except Abort and async_error, which any thread may call at any time.
#ifndef TESSERA_COMM_DEVICE_PATH_H_
#define TESSERA_COMM_DEVICE_PATH_H_

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "comm/operation.h"
#include "device/device_engine.h"

namespace tessera {

class AsyncWorker;
class Communicator;

// Whether `ops` can run device-resident (Communicator::RunGroupOnDevice) on `rank`: every
// buffer each one uses there (BytesOf) is device memory that `engine` can reach.
bool RunsOnDevice(const std::vector<Operation>& ops, int rank, int nranks, const DeviceEngine& engine);

// One communicator's calls as the C API hands them over: a single call, or its part of a
// group (then they run as one group, as without staging).
struct DeviceBatch {
  std::vector<Operation> ops;
  std::vector<void*> streams;  // streams[i] is ops[i]'s; nullptr: the NULL stream
  int rank = 0;
  int nranks = 1;
  // A non-blocking communicator's worker: it is then the proxy, so that every call of
  // the communicator keeps its issue order. Null for a blocking communicator.
  AsyncWorker* worker = nullptr;
  // Called on the proxy thread with the result of a handled batch's run (its collective,
  // or why its inputs never reached the host), before its streams continue. The C API
  // records it as the communicator's last error. May be empty.
  std::function<void(const Status&)> report;
  // Whether the batch may run device-resident on the caller's thread, which waits for
  // the result: false for a part of a group of several communicators (one thread may
  // drive all their ranks, so no part may wait for the others).
  bool may_block = true;
};

class DevicePath {
 public:
  // The path of the communicator that `comm` points to (null until created; read with
  // acquire), whose settings are `settings` (the staging timeout is settings.timeout_ms),
  // or null where this build or process has no usable CUDA. `comm` is read when a batch
  // is planned and again when it runs on the proxy: a non-blocking communicator is
  // created on its worker, possibly after its first call was submitted (still null
  // when it runs: creation failed, and the batch reports InvalidUsage). `comm` must
  // outlive the path.
  static std::unique_ptr<DevicePath> Create(const std::atomic<Communicator*>* comm, const Settings& settings);

  // A non-NULL stream: OK where calls may name one, else InvalidArgument saying why (a
  // CPU build, or no usable CUDA in this process). OK for NULL.
  static Status CheckStream(const void* stream);

  // At the creation of `comm`, before it is handed out (the CUDA build; the CPU build
  // does nothing): when device-resident calls are possible (Communicator::
  // device_resident_possible), gives the communicator a CUDA engine on the current
  // device and its device links, as NCCL binds a communicator to the current device.
  // Collective among comm's ranks: they first agree (one integer allreduce) on whether
  // every rank could create its engine, so that all set the links up or none does; a
  // rank without usable CUDA thus turns device-resident calls off for all, and calls
  // are staged. Every rank of a communicator must use the same library.
  static Status Attach(Communicator* comm);

  // Runs what is still queued (each part bounded by the timeout), then releases every
  // stream and frees the staging memory (cuda/device_buffers.h).
  virtual ~DevicePath() = default;

  // *handled = false: the batch has host buffers on the NULL stream only; the caller
  // runs it on the host as on the CPU build (a blocking communicator first waits here
  // until its staged calls have run, so that calls keep their issue order). *handled =
  // true: this path ran or queued the batch, and the result is OK (queued, or run
  // device-resident), InProgress (queued on a non-blocking communicator's worker), or
  // the error. Waits for the GPU only for a device-resident batch (bounded by the
  // timeout).
  virtual Status Submit(const DeviceBatch& batch, bool* handled) = 0;

  // After a handled Submit, before the call returns: a staged batch that also had a host
  // operation on the NULL stream must complete first, as host calls always do (only
  // then, and only on a blocking communicator, does this wait: for the whole batch,
  // including its streams' inputs). Otherwise returns OK at once. Called after every
  // communicator of a group has been handed its part, so that one thread can drive
  // several ranks.
  virtual Status WaitForHostBuffers() = 0;

  // tesseraRedOpCreatePreMulSum / tesseraRedOpDestroy on `comm`. A scalar in device or
  // managed memory with residence "device" (read_now false) is staged with every call
  // that uses the operator; with read_now (host-immediate) it is InvalidArgument.
  // Destroying an operator that queued calls still use takes effect after them.
  virtual Status CreatePreMulSum(Communicator* comm, const void* scalar, DataType type, bool read_now, int* op) = 0;
  virtual Status DestroyRedOp(Communicator* comm, int op) = 0;

  // Blocks until the queued staged calls have run (before a call that uses the
  // communicator on the caller's thread: split, finalize).
  virtual void WaitIdle() = 0;
  // tesseraCommAbort: drops queued calls, releases every waiting stream at once.
  virtual void Abort() = 0;
  // The first failure of staged work (a CUDA error, inputs that never arrived), or OK.
  virtual Status async_error() const = 0;
};

}  // namespace tessera

#endif  // TESSERA_COMM_DEVICE_PATH_H_
