// IEEE 754 binary16 ("half") and bfloat16 (the top half of a binary32) conversions, as
// raw 16-bit patterns. The benchmarks use them to fill and check 2-byte floating
// buffers, and the MPI baseline to reduce them (inline: they run once per element).
//
// Float -> 16 bits rounds to nearest, ties to even; overflow gives infinity; NaN stays
// a (quiet) NaN. 16 bits -> float is exact. Integers up to 2048 (half) and 256
// (bfloat16) in magnitude convert exactly both ways.
#ifndef TESSERA_BENCH_FLOAT16_H_
#define TESSERA_BENCH_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace tessera_bench {
namespace float16_detail {

inline uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Drops the low `shift` (1..31) bits of `value`, rounding to nearest, ties to even.
inline uint32_t ShiftRightRoundingToEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t dropped = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (kept & 1))) ++kept;
  return kept;
}

}  // namespace float16_detail

inline uint16_t FloatToHalf(float value) {
  using namespace float16_detail;
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
    // Subnormal (or zero) result, in units of 2^-24. Float subnormals are far below.
    int shift = 14 - half_exponent;
    if (exponent == 0 || shift > 24) return static_cast<uint16_t>(sign);
    // Rounding up may reach the smallest normal, whose encoding follows on naturally.
    return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(mantissa | 0x800000u, shift));
  }
  // Normal: a carry out of the mantissa bumps the exponent, up to infinity: both right.
  uint32_t unrounded = (static_cast<uint32_t>(half_exponent) << 23) | mantissa;
  return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(unrounded, 13));
}

inline float HalfToFloat(uint16_t bits) {
  using namespace float16_detail;
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in a float
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline uint16_t FloatToBfloat16(float value) {
  using namespace float16_detail;
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN, kept quiet
  }
  // A carry may reach infinity, which is right (NaNs, the only inputs whose top 16 bits
  // could overflow, were handled above).
  return static_cast<uint16_t>(ShiftRightRoundingToEven(bits, 16));
}

inline float Bfloat16ToFloat(uint16_t bits) {
  return float16_detail::BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_FLOAT16_H_
