#include "comm/premulsum_ops.h"

#include <cstring>
#include <string>

namespace tessera {

Status PreMulSumOps::Create(const void* scalar, DataType type, bool read_now, int* op) {
  Entry entry{type, Scalar{}};
  if (read_now) {
    std::memcpy(entry.scalar.copy, scalar, SizeOf(type));
  } else {
    entry.scalar.external = scalar;
  }
  std::lock_guard<std::mutex> lock(mu_);
  *op = next_op_++;
  ops_[*op] = entry;
  return Status::Ok();
}

Status PreMulSumOps::Destroy(int op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ops_.erase(op) == 0) {
    return InvalidArgument("op " + std::to_string(op) + " is not an operator created on this communicator (or was destroyed)");
  }
  return Status::Ok();
}

Status PreMulSumOps::Validate(int op, DataType type) const {
  if (op >= 0 && op < kNumRedOps) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    return InvalidArgument("op " + std::to_string(op) +
                           " is neither a built-in operator nor one created on this communicator (or it was destroyed)");
  }
  if (it->second.type != type) {
    return InvalidArgument("op " + std::to_string(op) + " was created for datatype " + DataTypeName(it->second.type) +
                           ", not " + DataTypeName(type));
  }
  return Status::Ok();
}

Status PreMulSumOps::Get(int op, Scalar* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end()) return InvalidArgument("op " + std::to_string(op) + " was destroyed while in use");
  *out = it->second.scalar;
  return Status::Ok();
}

}  // namespace tessera
