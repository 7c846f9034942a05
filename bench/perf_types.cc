// Names, sizes and 16-bit float conversions of the benchmark's element types.
#include "bench/perf_types.h"

#include <cmath>
#include <cstring>

namespace tessera_bench {
namespace {

const char* const kDataTypeNames[kNumDataTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
const char* const kReduceOpNames[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Drops the low `shift` bits of `value`, rounding to nearest with ties to even.
uint32_t ShiftRightRoundingToEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t dropped = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (kept & 1))) ++kept;
  return kept;
}

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

uint16_t FloatToHalf(float value) {
  uint32_t bits = FloatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xFFu;
  uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFF) {  // infinity, or NaN kept quiet and non-zero
    return static_cast<uint16_t>(sign | 0x7C00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0));
  }
  // The binary16 biased exponent this value would have as a normal number.
  int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow
  if (half_exponent <= 0) {
    // Subnormal (or zero) result: units of 2^-24. A float subnormal is far below that.
    int shift = 14 - half_exponent;
    if (exponent == 0 || shift > 24) return static_cast<uint16_t>(sign);
    // May round up into the smallest normal, whose encoding follows on naturally.
    return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(mantissa | 0x800000u, shift));
  }
  // Normal: a carry out of the mantissa bumps the exponent, up to infinity: both right.
  uint32_t unrounded = (static_cast<uint32_t>(half_exponent) << 23) | mantissa;
  return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(unrounded, 13));
}

float HalfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in a float
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t FloatToBfloat16(float value) {
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN, kept quiet
  }
  // Rounding the low 16 bits away; a carry may reach infinity, which is right (NaNs,
  // the only inputs whose top 16 bits are all ones, were handled above).
  return static_cast<uint16_t>(ShiftRightRoundingToEven(bits, 16));
}

float Bfloat16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

}  // namespace tessera_bench
