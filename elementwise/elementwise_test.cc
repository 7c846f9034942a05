// The element-wise helpers: half conversions against references computed in float64
// (every float16 and bfloat16 bit pattern, every rounding tie, sweeps of float32), the
// vector implementations against the scalar functions on odd lengths and misaligned
// buffers, the half reducers against a scalar reference (every bit pattern, NaN, ties,
// overflow, in place), and the scaling and division against plain scalar loops.
#include "elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

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

// Every implementation this CPU runs.
std::vector<SimdIsa> Implementations() {
  std::vector<SimdIsa> all;
  for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) all.push_back(static_cast<SimdIsa>(i));
  return all;
}

// ---- References, in float64.

// The value of a float16 (NaN handled by the caller).
double Float16Value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1f) return sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

// Rounds |x| (finite) to a multiple of 2^quantum_exp, ties to even, in float64 (exact: the
// scaling is by powers of two and the quotient has fewer than 53 bits).
double RoundToQuantum(double x, int quantum_exp) {
  return std::ldexp(std::nearbyint(std::ldexp(x, -quantum_exp)), quantum_exp);
}

// The float16 nearest to f, ties to even, overflow to infinity; NaN as vcvtps2ph gives it.
uint16_t ReferenceFloatToHalf(float f) {
  const uint16_t sign = (Bits(f) >> 16) & 0x8000;
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00 | ((Bits(f) >> 13) & 0x3ff));
  const double x = std::fabs(static_cast<double>(f));
  if (std::isinf(x)) return sign | 0x7c00;
  const int e = x == 0 ? -14 : std::max(std::ilogb(x), -14);  // float16 exponent (subnormals: -14)
  const double r = RoundToQuantum(x, e - 10);
  if (r >= 65536.0) return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<int>(std::ldexp(r, 24)));
  const int re = std::ilogb(r);  // may be e + 1 after rounding up
  const int man = static_cast<int>(std::ldexp(r, 10 - re)) - 1024;
  return static_cast<uint16_t>(sign | ((re + 15) << 10) | man);
}

// The bfloat16 nearest to f, ties to even, overflow to infinity; a NaN stays NaN (quiet).
uint16_t ReferenceFloatToBfloat16(float f) {
  const uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const double x = std::fabs(static_cast<double>(f));
  const uint16_t sign = (u >> 16) & 0x8000;
  if (std::isinf(x)) return sign | 0x7f80;
  const int e = x == 0 ? -126 : std::max(std::ilogb(x), -126);
  const double r = RoundToQuantum(x, e - 7);
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  return static_cast<uint16_t>(sign | (Bits(static_cast<float>(r)) >> 16));  // r is exact in bfloat16
}

// float32 values worth converting: every float16 value, every midpoint between neighbours
// (the ties) and one float32 ulp either side, the overflow boundary, and a deterministic
// sweep over all bit patterns.
std::vector<float> Float16TestValues() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double value = Float16Value(static_cast<uint16_t>(h));
    const double next = Float16Value(static_cast<uint16_t>(h + 1));
    const float lo = static_cast<float>(value);
    const float mid = static_cast<float>((value + next) / 2);  // exact: 12 significant bits
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (float x : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    v.push_back(x);
    v.push_back(-x);
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65521) v.push_back(FromBits(static_cast<uint32_t>(u)));
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(static_cast<uint32_t>(rng())));
  return v;
}

// ---- float16

TEST(Float16, WidenEveryBitPatternMatchesReference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      // Quiet, payload kept, as vcvtph2ps.
      ASSERT_EQ(Bits(f), ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13)) << "h " << h;
    } else {
      ASSERT_EQ(Bits(f), Bits(static_cast<float>(Float16Value(static_cast<uint16_t>(h))))) << "h " << h;
    }
  }
}

TEST(Float16, EveryBitPatternRoundTrips) {
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (SimdIsa isa : Implementations()) {
    std::vector<float> wide(65536);
    WidenHalfWith(isa, DataType::kFloat16, all.data(), wide.data(), all.size());
    NarrowHalfWith(isa, DataType::kFloat16, wide.data(), back.data(), wide.size());
    for (uint32_t h = 0; h < 65536; ++h) {
      ASSERT_EQ(Bits(wide[h]), Bits(HalfToFloat(all[h]))) << SimdIsaName(isa) << " h " << h;
      const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
      // A NaN stays NaN with its payload; it comes back quiet.
      ASSERT_EQ(back[h], nan ? (h | 0x200) : h) << SimdIsaName(isa) << " h " << h;
      ASSERT_EQ(FloatToHalf(HalfToFloat(all[h])), back[h]) << "scalar, h " << h;
    }
  }
}

TEST(Float16, NarrowMatchesFloat64ReferenceOnTiesSubnormalsOverflowAndSweep) {
  const std::vector<float> values = Float16TestValues();
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(FloatToHalf(values[i]), ReferenceFloatToHalf(values[i]))
        << "float bits 0x" << std::hex << Bits(values[i]) << " (" << values[i] << ")";
  }
  for (SimdIsa isa : Implementations()) {
    std::vector<uint16_t> out(values.size());
    NarrowHalfWith(isa, DataType::kFloat16, values.data(), out.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(out[i], ReferenceFloatToHalf(values[i]))
          << SimdIsaName(isa) << ", float bits 0x" << std::hex << Bits(values[i]);
    }
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                // halfway to 65536: ties to even = inf
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);   // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);   // tie between 0 and 2^-24: even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);   // tie between 1 and 2 ulps: even
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: rounds up to even
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

// ---- bfloat16

TEST(Bfloat16, EveryBitPatternWidensExactlyAndRoundTrips) {
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
  for (SimdIsa isa : Implementations()) {
    std::vector<float> wide(65536);
    WidenHalfWith(isa, DataType::kBfloat16, all.data(), wide.data(), all.size());
    NarrowHalfWith(isa, DataType::kBfloat16, wide.data(), back.data(), wide.size());
    for (uint32_t b = 0; b < 65536; ++b) {
      ASSERT_EQ(Bits(wide[b]), b << 16) << SimdIsaName(isa) << " b " << b;
      ASSERT_EQ(Bits(Bfloat16ToFloat(all[b])), b << 16);
      const bool nan = ((b >> 7) & 0xff) == 0xff && (b & 0x7f) != 0;
      ASSERT_EQ(back[b], nan ? (b | 0x40) : b) << SimdIsaName(isa) << " b " << b;
    }
  }
}

TEST(Bfloat16, NarrowMatchesFloat64Reference) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    const uint32_t lo = b << 16, mid = lo | 0x8000;  // mid: the tie with the next bfloat16
    for (uint32_t u : {lo, mid, mid - 1, mid + 1, lo | 0x7fff}) {
      values.push_back(FromBits(u));
      values.push_back(FromBits(u | 0x80000000u));
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65521) values.push_back(FromBits(static_cast<uint32_t>(u)));
  std::mt19937 rng(777);
  for (int i = 0; i < 200000; ++i) values.push_back(FromBits(static_cast<uint32_t>(rng())));
  for (float f : values) {
    ASSERT_EQ(FloatToBfloat16(f), ReferenceFloatToBfloat16(f)) << "float bits 0x" << std::hex << Bits(f);
  }
  for (SimdIsa isa : Implementations()) {
    std::vector<uint16_t> out(values.size());
    NarrowHalfWith(isa, DataType::kBfloat16, values.data(), out.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(out[i], ReferenceFloatToBfloat16(values[i]))
          << SimdIsaName(isa) << ", float bits 0x" << std::hex << Bits(values[i]);
    }
  }
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up: overflow to inf
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
}

// ---- Vector paths against the scalar functions: odd lengths, misaligned buffers, and
// nothing written past the end.

constexpr size_t kLengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 1001};
constexpr unsigned char kGuard = 0xa5;

TEST(HalfArrays, VectorPathsMatchScalarOnOddLengthsAndMisalignedBuffers) {
  std::mt19937 rng(99);
  for (SimdIsa isa : Implementations()) {
    for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
      for (size_t n : kLengths) {
        for (size_t offset : {0, 1, 2, 3}) {
          const std::string where = std::string(SimdIsaName(isa)) + " " + DataTypeName(type) +
                                    " n " + std::to_string(n) + " offset " + std::to_string(offset);
          // Widen from and into misaligned buffers.
          std::vector<unsigned char> in(2 * n + 8), out(4 * n + 8, kGuard);
          for (auto& c : in) c = static_cast<unsigned char>(rng());
          WidenHalfWith(isa, type, in.data() + offset, reinterpret_cast<float*>(out.data() + offset), n);
          for (size_t i = 0; i < n; ++i) {
            uint16_t h;
            float got;
            std::memcpy(&h, in.data() + offset + 2 * i, 2);
            std::memcpy(&got, out.data() + offset + 4 * i, 4);
            const float want = type == DataType::kFloat16 ? HalfToFloat(h) : Bfloat16ToFloat(h);
            ASSERT_EQ(Bits(got), Bits(want)) << where << " widen i " << i;
          }
          for (size_t i = offset + 4 * n; i < out.size(); ++i) {
            ASSERT_EQ(out[i], kGuard) << where << " widen wrote past the end";
          }

          // Narrow from and into misaligned buffers.
          std::vector<unsigned char> fin(4 * n + 8), hout(2 * n + 8, kGuard);
          for (size_t i = 0; i < n; ++i) {
            // Mostly values in the half range, some arbitrary bit patterns.
            const float mantissa = static_cast<float>(rng() % 100000) - 50000.0f;
            const int exponent = static_cast<int>(rng() % 40) - 30;
            const float f = (rng() % 4 == 0) ? FromBits(static_cast<uint32_t>(rng())) : std::ldexp(mantissa, exponent);
            std::memcpy(fin.data() + offset + 4 * i, &f, 4);
          }
          NarrowHalfWith(isa, type, reinterpret_cast<const float*>(fin.data() + offset), hout.data() + offset, n);
          for (size_t i = 0; i < n; ++i) {
            float f;
            uint16_t got;
            std::memcpy(&f, fin.data() + offset + 4 * i, 4);
            std::memcpy(&got, hout.data() + offset + 2 * i, 2);
            const uint16_t want = type == DataType::kFloat16 ? FloatToHalf(f) : FloatToBfloat16(f);
            ASSERT_EQ(got, want) << where << " narrow i " << i;
          }
          for (size_t i = offset + 2 * n; i < hout.size(); ++i) {
            ASSERT_EQ(hout[i], kGuard) << where << " narrow wrote past the end";
          }
        }
      }
    }
  }
}

// ---- Half reducers against a scalar reference: widen both values, combine in float32
// with the reducers' rules, narrow with the scalar functions tested above.

float WidenOne(DataType type, uint16_t h) { return type == DataType::kFloat16 ? HalfToFloat(h) : Bfloat16ToFloat(h); }

uint16_t NarrowOne(DataType type, float f) {
  return type == DataType::kFloat16 ? FloatToHalf(f) : FloatToBfloat16(f);
}

uint16_t ReferenceHalfOp(DataType type, RedOp op, uint16_t x, uint16_t y) {
  const float a = WidenOne(type, x), b = WidenOne(type, y);
  switch (op) {
    case RedOp::kSum: return NarrowOne(type, a + b);
    case RedOp::kProd: return NarrowOne(type, a * b);
    case RedOp::kMax: return NarrowOne(type, (a > b || a != a) ? a : b);  // the NaN operand, a first
    default: return NarrowOne(type, (a < b || a != a) ? a : b);
  }
}

bool IsHalfNan(DataType type, uint16_t h) {
  return type == DataType::kFloat16 ? (h & 0x7fff) > 0x7c00 : (h & 0x7fff) > 0x7f80;
}

// Which NaN a sum or product of two NaNs returns is the hardware's choice; max and min
// (and everything else) must match bit for bit.
void ExpectSameHalf(DataType type, RedOp op, uint16_t got, uint16_t want, const std::string& where) {
  if ((op == RedOp::kSum || op == RedOp::kProd) && IsHalfNan(type, want)) {
    ASSERT_TRUE(IsHalfNan(type, got)) << where << ": want a NaN, got 0x" << std::hex << got;
  } else {
    ASSERT_EQ(got, want) << where << std::hex << ": got 0x" << got << ", want 0x" << want;
  }
}

constexpr RedOp kHalfOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

// Every bit pattern of `a` against three partners: random patterns (NaN, infinity and
// subnormals included, so some groups take the NaN path), random patterns without NaN
// (so max and min stay on the vector path), and `a` itself shifted by one (neighbours:
// many rounding ties and, for sums of large values, overflow to infinity).
TEST(HalfReducers, EveryBitPatternMatchesScalarReference) {
  std::mt19937 rng(2024);
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    std::vector<uint16_t> a(65536), random(65536), no_nan(65536), next(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      a[i] = static_cast<uint16_t>(i);
      random[i] = static_cast<uint16_t>(rng());
      do {
        no_nan[i] = static_cast<uint16_t>(rng());
      } while (IsHalfNan(type, no_nan[i]));
      next[i] = static_cast<uint16_t>(i + 1);
    }
    for (SimdIsa isa : Implementations()) {
      for (RedOp op : kHalfOps) {
        Reducer r;
        ASSERT_TRUE(GetHalfReducerWith(isa, type, op, &r).ok());
        ASSERT_EQ(r.elem_size, 2u);
        for (const std::vector<uint16_t>* b : {&random, &no_nan, &next}) {
          std::vector<uint16_t> dst(65536);
          r.fn(dst.data(), a.data(), b->data(), a.size());
          for (uint32_t i = 0; i < 65536; ++i) {
            ExpectSameHalf(type, op, dst[i], ReferenceHalfOp(type, op, a[i], (*b)[i]),
                           std::string(SimdIsaName(isa)) + " " + DataTypeName(type) + " " + RedOpName(op) +
                               " a 0x" + std::to_string(a[i]) + " b " + std::to_string((*b)[i]));
          }
        }
      }
    }
  }
}

// Hand-picked cases: ties to even, overflow, subnormals, signed zeros and NaN placement,
// each at every position of a 32-value group.
TEST(HalfReducers, TiesOverflowSubnormalsZerosAndNan) {
  struct Case {
    DataType type;
    RedOp op;
    uint16_t x, y, want;
  };
  const Case cases[] = {
      {DataType::kBfloat16, RedOp::kSum, 0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie, stays even
      {DataType::kBfloat16, RedOp::kSum, 0x3f81, 0x3b80, 0x3f82},  // (1 + 2^-7) + 2^-8: tie, up to even
      {DataType::kBfloat16, RedOp::kSum, 0x7f7f, 0x7f7f, 0x7f80},  // max + max: infinity
      {DataType::kBfloat16, RedOp::kProd, 0x0001, 0x3f00, 0x0000},  // smallest subnormal / 2: tie to 0
      {DataType::kBfloat16, RedOp::kSum, 0x0001, 0x0001, 0x0002},  // subnormals add exactly
      {DataType::kBfloat16, RedOp::kMax, 0x0000, 0x8000, 0x8000},  // +0 vs -0: b
      {DataType::kBfloat16, RedOp::kMin, 0x8000, 0x0000, 0x0000},  // -0 vs +0: b
      {DataType::kBfloat16, RedOp::kMax, 0x7f81, 0x3f80, 0x7fc1},  // NaN in a: a, quiet
      {DataType::kBfloat16, RedOp::kMin, 0x3f80, 0xff81, 0xffc1},  // NaN in b: b, quiet
      {DataType::kBfloat16, RedOp::kSum, 0x7f80, 0xff80, 0xffc0},  // inf - inf: the default NaN
      {DataType::kFloat16, RedOp::kSum, 0x3c00, 0x1000, 0x3c00},   // 1 + 2^-11: tie, stays even
      {DataType::kFloat16, RedOp::kSum, 0x7bff, 0x7bff, 0x7c00},   // 65504 + 65504: infinity
      {DataType::kFloat16, RedOp::kSum, 0x0001, 0x0001, 0x0002},   // subnormals
      {DataType::kFloat16, RedOp::kMax, 0x0000, 0x8000, 0x8000},   // +0 vs -0: b
      {DataType::kFloat16, RedOp::kMax, 0x7c01, 0x3c00, 0x7e01},   // NaN in a: a, quiet
      {DataType::kFloat16, RedOp::kMin, 0x3c00, 0xfc01, 0xfe01},   // NaN in b: b, quiet
      {DataType::kFloat16, RedOp::kMax, 0x7c01, 0x7c02, 0x7e01},   // both NaN: a
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ReferenceHalfOp(c.type, c.op, c.x, c.y), c.want) << "reference " << DataTypeName(c.type) << " "
                                                                << RedOpName(c.op) << " " << c.x << " " << c.y;
    for (SimdIsa isa : Implementations()) {
      Reducer r;
      ASSERT_TRUE(GetHalfReducerWith(isa, c.type, c.op, &r).ok());
      for (size_t at = 0; at < 32; ++at) {
        std::vector<uint16_t> a(64, 0x3f80), b(64, 0x3f80), dst(64);
        if (c.type == DataType::kFloat16) a.assign(64, 0x3c00), b.assign(64, 0x3c00);
        a[at] = c.x;
        b[at] = c.y;
        r.fn(dst.data(), a.data(), b.data(), a.size());
        const std::string where = std::string(SimdIsaName(isa)) + " " + DataTypeName(c.type) + " " +
                                  RedOpName(c.op) + " at " + std::to_string(at);
        ExpectSameHalf(c.type, c.op, dst[at], c.want, where);
        ExpectSameHalf(c.type, c.op, dst[at + 32], ReferenceHalfOp(c.type, c.op, a[at + 32], b[at + 32]), where);
      }
    }
  }
}

// Odd lengths, misaligned buffers, in place (dst == a, dst == b), nothing written past the
// end.
TEST(HalfReducers, OddLengthsMisalignedAndInPlace) {
  std::mt19937 rng(7);
  for (SimdIsa isa : Implementations()) {
    for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
      for (RedOp op : kHalfOps) {
        Reducer r;
        ASSERT_TRUE(GetHalfReducerWith(isa, type, op, &r).ok());
        for (size_t n : kLengths) {
          for (size_t offset : {0, 1, 2, 3}) {
            const std::string where = std::string(SimdIsaName(isa)) + " " + DataTypeName(type) + " " +
                                      RedOpName(op) + " n " + std::to_string(n) + " offset " + std::to_string(offset);
            std::vector<uint16_t> x(n), y(n);
            for (size_t i = 0; i < n; ++i) {
              x[i] = static_cast<uint16_t>(rng());
              y[i] = static_cast<uint16_t>(rng());
            }
            std::vector<unsigned char> a(2 * n + 8), b(2 * n + 8), dst(2 * n + 8, kGuard);
            if (n > 0) {
              std::memcpy(a.data() + offset, x.data(), 2 * n);
              std::memcpy(b.data() + offset, y.data(), 2 * n);
            }
            r.fn(dst.data() + offset, a.data() + offset, b.data() + offset, n);
            std::vector<unsigned char> in_a = a, in_b = b;
            r.fn(in_a.data() + offset, in_a.data() + offset, b.data() + offset, n);
            r.fn(in_b.data() + offset, a.data() + offset, in_b.data() + offset, n);
            for (size_t i = 0; i < n; ++i) {
              const uint16_t want = ReferenceHalfOp(type, op, x[i], y[i]);
              uint16_t got, got_a, got_b;
              std::memcpy(&got, dst.data() + offset + 2 * i, 2);
              std::memcpy(&got_a, in_a.data() + offset + 2 * i, 2);
              std::memcpy(&got_b, in_b.data() + offset + 2 * i, 2);
              ExpectSameHalf(type, op, got, want, where + " i " + std::to_string(i));
              ExpectSameHalf(type, op, got_a, want, where + " in place (a) i " + std::to_string(i));
              ExpectSameHalf(type, op, got_b, want, where + " in place (b) i " + std::to_string(i));
            }
            for (size_t i = offset + 2 * n; i < dst.size(); ++i) ASSERT_EQ(dst[i], kGuard) << where << " past the end";
          }
        }
      }
    }
  }
}

TEST(HalfReducers, RefusesOtherTypesAndAvg) {
  Reducer r;
  EXPECT_FALSE(GetHalfReducer(DataType::kFloat32, RedOp::kSum, &r).ok());
  EXPECT_FALSE(GetHalfReducer(DataType::kFloat16, RedOp::kAvg, &r).ok());
  EXPECT_TRUE(GetHalfReducer(DataType::kBfloat16, RedOp::kMin, &r).ok());
}

// ---- Scale and divide against plain scalar loops, every type.

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point<T>::value) {
    switch (rng() % 8) {
      case 0: return std::numeric_limits<T>::infinity();
      case 1: return -std::numeric_limits<T>::max();
      case 2: return std::numeric_limits<T>::denorm_min();
      case 3: return static_cast<T>(-0.0);
      default: return static_cast<T>(static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000) / 997.0);
    }
  } else {
    switch (rng() % 6) {
      case 0: return std::numeric_limits<T>::min();
      case 1: return std::numeric_limits<T>::max();
      case 2: return static_cast<T>(-1);
      default: return static_cast<T>(rng());
    }
  }
}

// Scalar multiply with wrap-around for integers (in unsigned arithmetic, so no overflow
// is undefined), the IEEE product for floats.
template <typename T>
T ScalarProduct(T s, T x) {
  if constexpr (std::is_floating_point<T>::value) {
    return s * x;
  } else {
    typedef std::make_unsigned_t<T> U;
    return static_cast<T>(static_cast<U>(static_cast<U>(s) * static_cast<U>(x)));
  }
}

// The division avg used before the kernels were vectorised: integers in 64 bits.
template <typename T>
T ScalarQuotient(T x, int divisor) {
  using Wide = std::conditional_t<std::is_floating_point<T>::value, T,
                                  std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>>;
  return static_cast<T>(static_cast<Wide>(x) / static_cast<Wide>(divisor));
}

template <typename T>
bool SameValue(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;  // floats: bit for bit, so -0 != +0
}

template <typename T>
void CheckScaleAndDivide(DataType type) {
  std::mt19937_64 rng(static_cast<uint64_t>(type) + 1);
  for (SimdIsa isa : Implementations()) {
    for (size_t n : kLengths) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
        const std::string where = std::string(SimdIsaName(isa)) + " " + DataTypeName(type) +
                                  " n " + std::to_string(n) + " offset " + std::to_string(offset);
        std::vector<unsigned char> src(sizeof(T) * n + 8), dst(sizeof(T) * n + 8, kGuard);
        std::vector<T> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = RandomValue<T>(rng);
        if (n > 0) std::memcpy(src.data() + offset, x.data(), sizeof(T) * n);

        const T s = RandomValue<T>(rng);
        ScaleArrayWith(isa, type, &s, src.data() + offset, dst.data() + offset, n);
        for (size_t i = 0; i < n; ++i) {
          T got;
          std::memcpy(&got, dst.data() + offset + sizeof(T) * i, sizeof(T));
          ASSERT_TRUE(SameValue(got, ScalarProduct(s, x[i])))
              << where << " scale i " << i << ": " << +s << " * " << +x[i] << " gave " << +got;
        }
        for (size_t i = offset + sizeof(T) * n; i < dst.size(); ++i) ASSERT_EQ(dst[i], kGuard) << where;

        for (int divisor : {1, 2, 3, 4, 7, 8, 100, 1 << 20, 1000003, std::numeric_limits<int>::max()}) {
          std::vector<unsigned char> data = src;
          DivideArrayWith(isa, type, data.data() + offset, n, divisor);
          for (size_t i = 0; i < n; ++i) {
            T got;
            std::memcpy(&got, data.data() + offset + sizeof(T) * i, sizeof(T));
            ASSERT_TRUE(SameValue(got, ScalarQuotient(x[i], divisor)))
                << where << " divide by " << divisor << " i " << i << ": " << +x[i] << " gave " << +got;
          }
          for (size_t i = offset + sizeof(T) * n; i < data.size(); ++i) ASSERT_EQ(data[i], src[i]) << where;
        }
      }
    }
  }
}

TEST(ScaleAndDivide, EveryTypeMatchesScalarLoops) {
  CheckScaleAndDivide<int8_t>(DataType::kInt8);
  CheckScaleAndDivide<uint8_t>(DataType::kUint8);
  CheckScaleAndDivide<int32_t>(DataType::kInt32);
  CheckScaleAndDivide<uint32_t>(DataType::kUint32);
  CheckScaleAndDivide<int64_t>(DataType::kInt64);
  CheckScaleAndDivide<uint64_t>(DataType::kUint64);
  CheckScaleAndDivide<float>(DataType::kFloat32);
  CheckScaleAndDivide<double>(DataType::kFloat64);
}

// The 64-bit division by multiplication, on many dividends near its hard cases.
TEST(ScaleAndDivide, SixtyFourBitDivisionIsExact) {
  std::mt19937_64 rng(4242);
  std::vector<uint64_t> u;
  std::vector<int64_t> s;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t r = rng();
    u.push_back(r);
    u.push_back(r >> (rng() % 64));
    s.push_back(static_cast<int64_t>(r));
    s.push_back(static_cast<int64_t>(r) >> (rng() % 64));
  }
  const uint64_t kTop = uint64_t{1} << 63;
  for (uint64_t edge : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, ~uint64_t{0} - 1, kTop, kTop - 1}) {
    u.push_back(edge);
    s.push_back(static_cast<int64_t>(edge));
  }
  for (int divisor : {1, 2, 3, 5, 6, 7, 9, 10, 12, 25, 64, 641, 65537, 1 << 30, std::numeric_limits<int>::max()}) {
    std::vector<uint64_t> uq = u;
    std::vector<int64_t> sq = s;
    DivideArray(DataType::kUint64, uq.data(), uq.size(), divisor);
    DivideArray(DataType::kInt64, sq.data(), sq.size(), divisor);
    for (size_t i = 0; i < u.size(); ++i) {
      ASSERT_EQ(uq[i], u[i] / static_cast<uint64_t>(divisor)) << u[i] << " / " << divisor;
    }
    for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(sq[i], s[i] / divisor) << s[i] << " / " << divisor;
  }
}

// The half types are scaled and divided in float32 and rounded once, in place or not,
// on every implementation, across the blocks the conversion goes through.
TEST(ScaleAndDivide, HalfTypesComputeInFloat32AndRoundOnce) {
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    const size_t n = 2500;
    std::vector<uint16_t> src(n);
    for (size_t i = 0; i < n; ++i) src[i] = NarrowOne(type, static_cast<float>(i % 97) * 0.37f - 11.0f);
    const uint16_t scalar = NarrowOne(type, 0.3f);
    for (SimdIsa isa : Implementations()) {
      std::vector<uint16_t> scaled(n), divided = src;
      ScaleArrayWith(isa, type, &scalar, src.data(), scaled.data(), n);
      DivideArrayWith(isa, type, divided.data(), n, 3);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(scaled[i], NarrowOne(type, WidenOne(type, scalar) * WidenOne(type, src[i])))
            << SimdIsaName(isa) << " " << DataTypeName(type) << " scale at " << i;
        ASSERT_EQ(divided[i], NarrowOne(type, WidenOne(type, src[i]) / 3.0f))
            << SimdIsaName(isa) << " " << DataTypeName(type) << " divide at " << i;
      }
    }
  }
}

TEST(ScaleAndDivide, ZeroDivisorLeavesIntegersAlone) {
  std::vector<int32_t> v = {5, -7, 9};
  DivideArray(DataType::kInt32, v.data(), v.size(), 0);
  EXPECT_EQ(v, (std::vector<int32_t>{5, -7, 9}));
}

}  // namespace
}  // namespace tessera
