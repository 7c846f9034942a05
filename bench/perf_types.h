// Element types and reduction operators as the benchmark programs see them, with the
// names nccl-tests uses on its command line and in its table.
//
// The harness is library-agnostic, so these are its own enums; their numbering is
// nccl.h's (and so tessera.h's), which makes a backend's mapping a checked cast.
#ifndef TESSERA_BENCH_PERF_TYPES_H_
#define TESSERA_BENCH_PERF_TYPES_H_

#include <cstddef>
#include <string>
#include <vector>

namespace tessera_bench {

enum class DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9,
};
constexpr int kNumDataTypes = 10;

enum class ReduceOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumReduceOps = 5;

// Every type / op, in numbering order (what `-d all` / `-o all` run).
std::vector<DataType> AllDataTypes();
std::vector<ReduceOp> AllReduceOps();

// nccl-tests' names: "int8" "uint8" "int32" "uint32" "int64" "uint64" "half" "float"
// "double" "bfloat16"; "sum" "prod" "max" "min" "avg".
const char* DataTypeName(DataType type);
const char* ReduceOpName(ReduceOp op);

// Parses a name as printed above. Returns false for anything else.
bool ParseDataType(const std::string& name, DataType* type);
bool ParseReduceOp(const std::string& name, ReduceOp* op);

size_t ElementSize(DataType type);
bool IsFloatingPoint(DataType type);
bool IsSigned(DataType type);  // true for the signed integers and every floating type

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_TYPES_H_
