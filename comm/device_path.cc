// What the CPU and the CUDA builds of the device path share (device_path.h).
#include "comm/device_path.h"

namespace tessera {

bool RunsOnDevice(const std::vector<Operation>& ops, int rank, int nranks, const DeviceEngine& engine) {
  for (const Operation& op : ops) {
    const OperationBytes bytes = BytesOf(op, rank, nranks);
    if (bytes.send > 0 && !engine.IsDeviceMemory(op.send, bytes.send)) return false;
    if (bytes.recv > 0 && !engine.IsDeviceMemory(op.recv, bytes.recv)) return false;
  }
  return true;
}

}  // namespace tessera
