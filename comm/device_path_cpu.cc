// The device path of the CPU build (device_path.h): no handle has one, so every call
// runs on the host, and a call that names a stream is refused.
#include "comm/device_path.h"

namespace tessera {

std::unique_ptr<DevicePath> DevicePath::Create(const std::atomic<Communicator*>*, const Settings&) { return nullptr; }

Status DevicePath::CheckStream(const void* stream) {
  if (stream != nullptr) return InvalidArgument("stream must be NULL on this CPU build");
  return Status::Ok();
}

Status DevicePath::Attach(Communicator*) { return Status::Ok(); }

}  // namespace tessera
