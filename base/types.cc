#include "base/types.h"

namespace tessera {

const char* DataTypeName(DataType t) {
  static const char* const kNames[kNumDataTypes] = {"int8",    "uint8",   "int32",    "uint32",
                                                    "int64",   "uint64",  "float16",  "float32",
                                                    "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  int i = static_cast<int>(t);
  return i >= 0 && i < kNumDataTypes ? kNames[i] : "unknown";
}

const char* RedOpName(RedOp op) {
  static const char* const kNames[kNumRedOps] = {"sum", "prod", "max", "min", "avg"};
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumRedOps ? kNames[i] : "unknown";
}

const char* OpName(OpKind kind) {
  static const char* const kNames[kNumOpKinds] = {"allreduce", "broadcast", "reduce",  "allgather", "reduce-scatter",
                                                  "alltoall",  "gather",    "scatter", "send",      "recv"};
  int i = static_cast<int>(kind);
  return i >= 0 && i < kNumOpKinds ? kNames[i] : "unknown";
}

bool OpKindByName(const std::string& name, OpKind* out) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (name == OpName(static_cast<OpKind>(k))) {
      *out = static_cast<OpKind>(k);
      return true;
    }
  }
  return false;
}

}  // namespace tessera
