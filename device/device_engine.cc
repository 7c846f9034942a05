// DeviceStream::Drain, the one piece of DeviceEngine (device_engine.h) shared by both
// engines: a bounded wait built from Record and Done.
#include "device/device_engine.h"

#include <unistd.h>

#include <algorithm>

namespace tessera {

Status DeviceStream::Drain(const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what) {
  uint64_t ticket = 0;
  TESSERA_RETURN_IF_ERROR(Record(&ticket).Annotate(what));
  int64_t pause_us = 0;
  for (;;) {
    bool done = false;
    TESSERA_RETURN_IF_ERROR(Done(ticket, &done).Annotate(what));
    if (done) return Status::Ok();
    if (abort != nullptr && abort->load()) return RemoteError(what + ": the communicator was aborted");
    if (deadline.Expired()) return TimeoutError(what + ": the device work did not finish within the timeout");
    // Device copies and kernels take microseconds: poll often at first, then every 1 ms.
    if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
    pause_us = std::min<int64_t>(1000, std::max<int64_t>(1, pause_us * 2));
  }
}

}  // namespace tessera
