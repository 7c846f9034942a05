// Names and sizes of the benchmark's element types.
#include "bench/perf_types.h"

namespace tessera_bench {
namespace {

const char* const kDataTypeNames[kNumDataTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
const char* const kReduceOpNames[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};

}  // namespace

std::vector<DataType> AllDataTypes() {
  std::vector<DataType> types;
  for (int i = 0; i < kNumDataTypes; ++i) types.push_back(static_cast<DataType>(i));
  return types;
}

std::vector<ReduceOp> AllReduceOps() {
  std::vector<ReduceOp> ops;
  for (int i = 0; i < kNumReduceOps; ++i) ops.push_back(static_cast<ReduceOp>(i));
  return ops;
}

const char* DataTypeName(DataType type) {
  int i = static_cast<int>(type);
  return i >= 0 && i < kNumDataTypes ? kDataTypeNames[i] : "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumReduceOps ? kReduceOpNames[i] : "unknown";
}

bool ParseDataType(const std::string& name, DataType* type) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (name == kDataTypeNames[i]) {
      *type = static_cast<DataType>(i);
      return true;
    }
  }
  return false;
}

bool ParseReduceOp(const std::string& name, ReduceOp* op) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (name == kReduceOpNames[i]) {
      *op = static_cast<ReduceOp>(i);
      return true;
    }
  }
  return false;
}

size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kInt8: case DataType::kUint8: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kUint32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kUint64: case DataType::kFloat64: return 8;
  }
  return 0;
}

bool IsFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64 || type == DataType::kBfloat16;
}

bool IsSigned(DataType type) {
  return type != DataType::kUint8 && type != DataType::kUint32 && type != DataType::kUint64;
}

}  // namespace tessera_bench
