// Element types and reduction operators of the core, numbered as tessera.h (and nccl.h).
#ifndef TESSERA_BASE_TYPES_H_
#define TESSERA_BASE_TYPES_H_

#include <cstddef>
#include <string>

namespace tessera {

enum class DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
constexpr int kNumDataTypes = 12;

// float16 and bfloat16: reduced through float32 (see elementwise/elementwise.h).
inline bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBfloat16; }

enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumRedOps = 5;

inline size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUint8: case DataType::kFloat8e4m3: case DataType::kFloat8e5m2: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kUint32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kUint64: case DataType::kFloat64: return 8;
  }
  return 0;
}

const char* DataTypeName(DataType t);
const char* RedOpName(RedOp op);

// What a call does: one of the collectives (the first kNumCollectives kinds, which the
// algorithm table has rows for), or one side of a point-to-point message. The one
// enumeration of them, from the C API's Operation to the algorithm table and the
// call's stamp (numbered as the stamps on the wire carry them).
enum class OpKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kGather, kScatter,
                    kSend, kRecv };
constexpr int kNumOpKinds = 10;
constexpr int kNumCollectives = 8;

// "allreduce", "broadcast", "reduce", "allgather", "reduce-scatter", "alltoall",
// "gather", "scatter", "send", "recv".
const char* OpName(OpKind kind);
// The kind OpName calls `name`; false when there is none.
bool OpKindByName(const std::string& name, OpKind* out);

inline bool IsCollective(OpKind k) { return static_cast<int>(k) < kNumCollectives; }
// allreduce, reduce, reduce-scatter
inline bool IsReduction(OpKind k) { return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter; }
// The collectives with a root rank: broadcast, reduce, gather, scatter.
inline bool IsRooted(OpKind k) {
  return k == OpKind::kBroadcast || k == OpKind::kReduce || k == OpKind::kGather || k == OpKind::kScatter;
}
inline bool IsPointToPoint(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

}  // namespace tessera

#endif  // TESSERA_BASE_TYPES_H_
