// One recorded call: a collective or a point-to-point operation, as the C API received
// it (validated). The communicator runs operations one at a time or as a group.
// OpKind and its names are in base/types.h.
#ifndef TESSERA_COMM_OPERATION_H_
#define TESSERA_COMM_OPERATION_H_

#include <cstddef>
#include <vector>

#include "base/types.h"

namespace tessera {

struct Operation {
  OpKind kind = OpKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements, as nccl.h counts them for this kind
  DataType type = DataType::kFloat32;
  int op = 0;        // a RedOp, or an operator created by CreatePreMulSum
  int root = 0;      // rooted collectives (IsRooted)
  int peer = 0;      // send / recv
  // tesseraAllReduceParts: every local contribution, `send` being the first; empty for
  // every other call.
  std::vector<const void*> parts;
};

// How many bytes an operation reads from `send` and writes to `recv` on `rank` of
// `nranks` (0 for a buffer it does not use there, e.g. a broadcast's sendbuff off the
// root): what validation checks and what the device path stages.
struct OperationBytes {
  size_t send = 0;
  size_t recv = 0;
};
OperationBytes BytesOf(const Operation& op, int rank, int nranks);

}  // namespace tessera

#endif  // TESSERA_COMM_OPERATION_H_
