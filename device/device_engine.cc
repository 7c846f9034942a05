// DeviceStream::Drain, the one piece of DeviceEngine (device_engine.h) shared by both
// engines: a bounded wait built from Record and Done.
#include "device/device_engine.h"

#include "base/poll.h"

namespace tessera {

Status DeviceStream::Drain(const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what) {
  uint64_t ticket = 0;
  TESSERA_RETURN_IF_ERROR(Record(&ticket).Annotate(what));
  return PollUntil([&](bool* done) { return Done(ticket, done).Annotate(what); }, deadline, abort, what,
                   "the device work did not finish within the timeout");
}

}  // namespace tessera
