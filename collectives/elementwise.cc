#include "collectives/elementwise.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace tessera {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
void Scale(const void* scalar, const void* src, void* dst, size_t count) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(s * in[i]);
}

template <typename T>
void Divide(void* data, size_t count, int divisor) {
  // Integers divide in 64 bits (so a rank count beyond the type's range is no issue).
  using Wide = std::conditional_t<std::is_floating_point<T>::value, T,
                                  std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>>;
  T* d = static_cast<T*>(data);
  const Wide n = static_cast<Wide>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<Wide>(d[i]) / n);
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return FromBits(sign | 0x7f800000 | (man << 13));  // inf / NaN
  if (exp != 0) return FromBits(sign | ((exp + 112) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

uint16_t FloatToHalf(float f) {
  const uint32_t u = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to infinity
  if (a < 6.103515625e-05f) {
    // Subnormal (or zero): units of 2^-24, rounded to nearest even by rint.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even.
  uint32_t abs_bits = Bits(a);
  const uint32_t lsb = (abs_bits >> 13) & 1;
  abs_bits += 0xfff + lsb;
  const uint32_t exp = (abs_bits >> 23) - 112;
  return static_cast<uint16_t>(sign | (exp << 10) | ((abs_bits >> 13) & 0x3ff));
}

float Bfloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float f) {
  uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // stay NaN
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (overflow reaches infinity)
  return static_cast<uint16_t>(u >> 16);
}

void WidenHalf(DataType type, const void* in, float* out, size_t count) {
  const uint16_t* h = static_cast<const uint16_t*>(in);
  if (type == DataType::kFloat16) {
    for (size_t i = 0; i < count; ++i) out[i] = HalfToFloat(h[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = Bfloat16ToFloat(h[i]);
  }
}

void NarrowHalf(DataType type, const float* in, void* out, size_t count) {
  uint16_t* h = static_cast<uint16_t*>(out);
  if (type == DataType::kFloat16) {
    for (size_t i = 0; i < count; ++i) h[i] = FloatToHalf(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) h[i] = FloatToBfloat16(in[i]);
  }
}

void ScaleArray(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  switch (type) {
    case DataType::kInt8: return Scale<int8_t>(scalar, src, dst, count);
    case DataType::kUint8: return Scale<uint8_t>(scalar, src, dst, count);
    case DataType::kInt32: return Scale<int32_t>(scalar, src, dst, count);
    case DataType::kUint32: return Scale<uint32_t>(scalar, src, dst, count);
    case DataType::kInt64: return Scale<int64_t>(scalar, src, dst, count);
    case DataType::kUint64: return Scale<uint64_t>(scalar, src, dst, count);
    case DataType::kFloat32: return Scale<float>(scalar, src, dst, count);
    case DataType::kFloat64: return Scale<double>(scalar, src, dst, count);
    default: return;  // half types are scaled in float32; fp8 has no reductions
  }
}

void DivideArray(DataType type, void* data, size_t count, int divisor) {
  switch (type) {
    case DataType::kInt8: return Divide<int8_t>(data, count, divisor);
    case DataType::kUint8: return Divide<uint8_t>(data, count, divisor);
    case DataType::kInt32: return Divide<int32_t>(data, count, divisor);
    case DataType::kUint32: return Divide<uint32_t>(data, count, divisor);
    case DataType::kInt64: return Divide<int64_t>(data, count, divisor);
    case DataType::kUint64: return Divide<uint64_t>(data, count, divisor);
    case DataType::kFloat32: return Divide<float>(data, count, divisor);
    case DataType::kFloat64: return Divide<double>(data, count, divisor);
    default: return;
  }
}

}  // namespace tessera
