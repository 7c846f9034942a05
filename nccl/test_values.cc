// test_values: see test_values.h. The float16 and bfloat16 encodings are written out for
// exactly representable values, so the tests need no compiler support for those types.
#include "nccl/test_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace nccl_test {
namespace {

bool IsUnsigned(ncclDataType_t type) {
  return type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
}

// v = (1 + f / 1024) * 2^(E - 15): exact for the integers the tests use.
uint16_t HalfBits(double v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const uint16_t exponent = static_cast<uint16_t>(e - 1 + 15);
  const uint16_t fraction = static_cast<uint16_t>((2 * m - 1) * 1024);
  return static_cast<uint16_t>(sign | (exponent << 10) | fraction);
}

double HalfValue(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);  // zero and subnormals
  if (exponent == 31) return fraction ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// bfloat16 is the upper half of a float32.
uint16_t Bfloat16Bits(double v) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

double Bfloat16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  memcpy(&f, &wide, sizeof(f));
  return f;
}

template <typename T>
void Put(T v, void* dst) {
  memcpy(dst, &v, sizeof(v));
}

template <typename T>
double Get(const void* src) {
  T v;
  memcpy(&v, src, sizeof(v));
  return static_cast<double>(v);
}

}  // namespace

std::vector<ncclDataType_t> ReducibleTypes() {
  return {ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
          ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
}

std::vector<ncclRedOp_t> BuiltinOps() { return {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}; }

size_t TypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

std::string TypeName(ncclDataType_t type) {
  static const char* const kNames[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",     "uint64",
                                       "float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  const int t = static_cast<int>(type);
  return t >= 0 && t < 12 ? kNames[t] : "datatype " + std::to_string(t);
}

std::string OpName(ncclRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  const int o = static_cast<int>(op);
  return o >= 0 && o < 5 ? kNames[o] : "op " + std::to_string(o);
}

void Encode(ncclDataType_t type, double v, void* dst) {
  switch (type) {
    case ncclInt8: Put(static_cast<int8_t>(v), dst); break;
    case ncclUint8: Put(static_cast<uint8_t>(v), dst); break;
    case ncclInt32: Put(static_cast<int32_t>(v), dst); break;
    case ncclUint32: Put(static_cast<uint32_t>(v), dst); break;
    case ncclInt64: Put(static_cast<int64_t>(v), dst); break;
    case ncclUint64: Put(static_cast<uint64_t>(v), dst); break;
    case ncclFloat16: Put(HalfBits(v), dst); break;
    case ncclFloat32: Put(static_cast<float>(v), dst); break;
    case ncclFloat64: Put(v, dst); break;
    case ncclBfloat16: Put(Bfloat16Bits(v), dst); break;
    default: Put(static_cast<uint8_t>(v), dst); break;  // fp8: the tests only move bytes
  }
}

double Decode(ncclDataType_t type, const void* src) {
  switch (type) {
    case ncclInt8: return Get<int8_t>(src);
    case ncclUint8: return Get<uint8_t>(src);
    case ncclInt32: return Get<int32_t>(src);
    case ncclUint32: return Get<uint32_t>(src);
    case ncclInt64: return Get<int64_t>(src);
    case ncclUint64: return Get<uint64_t>(src);
    case ncclFloat16: {
      uint16_t bits;
      memcpy(&bits, src, sizeof(bits));
      return HalfValue(bits);
    }
    case ncclFloat32: return Get<float>(src);
    case ncclFloat64: return Get<double>(src);
    case ncclBfloat16: {
      uint16_t bits;
      memcpy(&bits, src, sizeof(bits));
      return Bfloat16Value(bits);
    }
    default: return Get<uint8_t>(src);
  }
}

double ReductionInput(ncclDataType_t type, ncclRedOp_t op, int rank, int nranks, size_t i) {
  const bool u = IsUnsigned(type);
  switch (op) {
    case ncclProd: {
      static const double kSigned[] = {-2, -1, 1, 2};
      static const double kUnsigned[] = {1, 2, 3};
      return u ? kUnsigned[(i + rank) % 3] : kSigned[(i + rank) % 4];
    }
    case ncclAvg:
      // base + (2 * rank - (nranks - 1)): the offsets sum to 0, so the average is base.
      return static_cast<double>(i % 8 + nranks) + 2 * rank - (nranks - 1);
    default: {  // sum, max, min: [0, 32] unsigned, [-16, 16] signed
      const double v = static_cast<double>((i * 7 + static_cast<size_t>(rank) * 13) % 33);
      return u ? v : v - 16;
    }
  }
}

double ReductionResult(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t i) {
  double acc = ReductionInput(type, op, 0, nranks, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = ReductionInput(type, op, r, nranks, i);
    switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = v > acc ? v : acc; break;
      case ncclMin: acc = v < acc ? v : acc; break;
      default: acc += v; break;  // sum, avg
    }
  }
  return op == ncclAvg ? acc / nranks : acc;
}

double MoveInput(int rank, size_t i) { return static_cast<double>((static_cast<size_t>(rank) * 37 + i * 11) % 101); }

}  // namespace nccl_test
