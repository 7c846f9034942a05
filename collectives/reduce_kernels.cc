#include "collectives/reduce_kernels.h"

#include <cstdint>
#include <cstring>

namespace tessera {
namespace {

constexpr size_t kVectorBytes = 32;

// Vector ops update `a` in place (vectors by reference: no vector crosses a call ABI).
struct Sum { template <typename V> static void Apply(V& a, const V& b) { a = a + b; } };
struct Prod { template <typename V> static void Apply(V& a, const V& b) { a = a * b; } };
// Max and min propagate NaN whichever side it is on (a != a only for NaN).
struct Max { template <typename V> static void Apply(V& a, const V& b) { a = (a > b) | (a != a) ? a : b; } };
struct Min { template <typename V> static void Apply(V& a, const V& b) { a = (a < b) | (a != a) ? a : b; } };

// Scalar ops for the tail, matching the vector ones element for element.
struct SumS { template <typename T> static T Apply(T a, T b) { return static_cast<T>(a + b); } };
struct ProdS { template <typename T> static T Apply(T a, T b) { return static_cast<T>(a * b); } };
struct MaxS { template <typename T> static T Apply(T a, T b) { return (a > b || a != a) ? a : b; } };
struct MinS { template <typename T> static T Apply(T a, T b) { return (a < b || a != a) ? a : b; } };

template <typename T, typename VecOp, typename ScalarOp>
void Kernel(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  typedef T V __attribute__((vector_size(kVectorBytes)));
  constexpr size_t kLanes = kVectorBytes / sizeof(T);
  char* dst = static_cast<char*>(dst_v);
  const char* a = static_cast<const char*>(a_v);
  const char* b = static_cast<const char*>(b_v);
  size_t i = 0;
  // Four vectors per iteration keeps enough loads in flight to saturate memory.
  for (; i + 4 * kLanes <= count; i += 4 * kLanes) {
    V va[4], vb[4];
    std::memcpy(va, a + i * sizeof(T), sizeof(va));
    std::memcpy(vb, b + i * sizeof(T), sizeof(vb));
    for (int k = 0; k < 4; ++k) VecOp::Apply(va[k], vb[k]);
    std::memcpy(dst + i * sizeof(T), va, sizeof(va));
  }
  for (; i < count; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    T r = ScalarOp::Apply(x, y);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

template <typename T>
Status ForType(RedOp op, Reducer* out) {
  out->elem_size = sizeof(T);
  switch (op) {
    case RedOp::kSum: out->fn = &Kernel<T, Sum, SumS>; return Status::Ok();
    case RedOp::kProd: out->fn = &Kernel<T, Prod, ProdS>; return Status::Ok();
    case RedOp::kMax: out->fn = &Kernel<T, Max, MaxS>; return Status::Ok();
    case RedOp::kMin: out->fn = &Kernel<T, Min, MinS>; return Status::Ok();
    case RedOp::kAvg: break;
  }
  return InvalidArgument(std::string("op ") + RedOpName(op) + " is not supported yet");
}

}  // namespace

Status GetReducer(DataType type, RedOp op, Reducer* out) {
  switch (type) {
    case DataType::kInt8: return ForType<int8_t>(op, out);
    case DataType::kUint8: return ForType<uint8_t>(op, out);
    case DataType::kInt32: return ForType<int32_t>(op, out);
    case DataType::kUint32: return ForType<uint32_t>(op, out);
    case DataType::kInt64: return ForType<int64_t>(op, out);
    case DataType::kUint64: return ForType<uint64_t>(op, out);
    case DataType::kFloat32: return ForType<float>(op, out);
    case DataType::kFloat64: return ForType<double>(op, out);
    case DataType::kFloat16:
    case DataType::kBfloat16:  // reduced through float32 by the communicator
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: break;
  }
  return InvalidArgument(std::string("datatype ") + DataTypeName(type) + " is not supported yet");
}

}  // namespace tessera
