// Which handles are live. The C API validates every handle against this registry, so a
// call on a destroyed handle is an error rather than a use after free, and destroying a
// handle waits until the calls inside it have left before it frees anything.
//
// Each thread that calls into tessera has a hazard slot: a call publishes the handle it
// uses there (CallGuard, one exchange, no lock), and ReleaseHandle, having taken the
// handle out of the live set, waits until no slot holds it. A thread that found a handle
// live keeps it as live until some handle is released (a generation count that
// ReleaseHandle bumps before it looks at the slots), so the usual call asks the live
// set, under its lock, only once.
#ifndef TESSERA_COMM_HANDLE_REGISTRY_H_
#define TESSERA_COMM_HANDLE_REGISTRY_H_

#include "base/settings.h"
#include "base/status.h"
#include "comm/handle.h"

namespace tessera {

struct HazardSlot;  // a thread's (handle_registry.cc)

// A new live handle for `rank` of `nranks` (`name` may be null) whose communicator is
// created, or will be, with `settings`.
tesseraComm* NewHandle(int rank, int nranks, const char* name, const Settings& settings);
// Takes out and frees a handle that was never handed out (its creation failed).
void DiscardHandle(tesseraComm* handle);
// tesseraCommDestroy, and with `abort` tesseraCommAbort: takes `comm` out of the live
// set, makes the calls inside it fail promptly (abort), waits until they have left,
// and frees it. InvalidArgument when `comm` is not live.
Status ReleaseHandle(tesseraComm* comm, bool abort);

// Marks a call in progress on a live handle for as long as it exists, so that Release
// waits for it. comm() is the handle if it is live, else null.
class CallGuard {
 public:
  explicit CallGuard(tesseraComm* comm);
  ~CallGuard();
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  tesseraComm* comm() const { return comm_; }

 private:
  tesseraComm* comm_ = nullptr;
  HazardSlot* slot_ = nullptr;  // this thread's, when the handle is published there
};

// InvalidArgument unless `given` is a live handle (`live`: CallGuard::comm()). Inlined:
// every call checks it, and it is a compare.
[[gnu::always_inline]] inline Status CheckCommHandle(const tesseraComm* given, const tesseraComm* live) {
  if (given == nullptr) return InvalidArgument("comm is NULL");
  if (live == nullptr) return InvalidArgument("comm is not a live communicator (destroyed, aborted or never created)");
  return Status::Ok();
}

}  // namespace tessera

#endif  // TESSERA_COMM_HANDLE_REGISTRY_H_
