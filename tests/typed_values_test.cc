// Tests of the tests' own datatype conversions (typed_values): the collective tests are
// only as good as these. float16 is checked exhaustively against the compiler's
// _Float16; bfloat16 and fp8 against known bit patterns and a bit-level rounding rule.
#include "tests/typed_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace tessera_test {
namespace {

uint16_t Bits16(tesseraDataType_t type, double v) {
  uint16_t bits;
  EncodeValue(type, v, &bits);
  return bits;
}

uint8_t Bits8(tesseraDataType_t type, double v) {
  uint8_t bits;
  EncodeValue(type, v, &bits);
  return bits;
}

TEST(Float16, KnownPatterns) {
  EXPECT_EQ(0x3C00, Bits16(tesseraFloat16, 1.0));
  EXPECT_EQ(0xC000, Bits16(tesseraFloat16, -2.0));
  EXPECT_EQ(0x7BFF, Bits16(tesseraFloat16, 65504.0));
  EXPECT_EQ(0x7C00, Bits16(tesseraFloat16, 65520.0));  // rounds to infinity
  EXPECT_EQ(0x0001, Bits16(tesseraFloat16, std::ldexp(1.0, -24)));
  EXPECT_EQ(0x0000, Bits16(tesseraFloat16, std::ldexp(1.0, -25)));  // tie to even: 0
  EXPECT_EQ(0x8000, Bits16(tesseraFloat16, -0.0));
  EXPECT_EQ(0x6800, Bits16(tesseraFloat16, 2049.0));  // tie between 2048 and 2050: even
  EXPECT_EQ(0x6802, Bits16(tesseraFloat16, 2051.0));  // tie between 2050 and 2052: even
  EXPECT_TRUE(std::isnan(RoundToType(tesseraFloat16, NAN)));
}

TEST(Float16, DecodeMatchesCompilerForEveryPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    _Float16 h;
    memcpy(&h, &b, 2);
    double want = static_cast<double>(h);
    double got = DecodeValue(tesseraFloat16, &b);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(want, got) << std::hex << bits;
      ASSERT_EQ(std::signbit(want), std::signbit(got)) << std::hex << bits;
    }
  }
}

TEST(Float16, EncodeMatchesCompilerOnRandomDoubles) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-28, 17);
  for (int i = 0; i < 200000; ++i) {
    double v = std::ldexp(mantissa(rng), exponent(rng));
    _Float16 h = static_cast<_Float16>(v);
    uint16_t want;
    memcpy(&want, &h, 2);
    ASSERT_EQ(want, Bits16(tesseraFloat16, v)) << v;
  }
}

// float -> bfloat16, round to nearest even, on the bits (finite values).
uint16_t Bfloat16ByBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TEST(Bfloat16, MatchesBitRoundingOnRandomFloats) {
  EXPECT_EQ(0x3F80, Bits16(tesseraBfloat16, 1.0));
  EXPECT_EQ(0x4380, Bits16(tesseraBfloat16, 256.0));
  EXPECT_EQ(256.0, RoundToType(tesseraBfloat16, 257.0));  // tie: even
  EXPECT_EQ(260.0, RoundToType(tesseraBfloat16, 259.0));  // tie: even
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-130, 120);
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(mantissa(rng), exponent(rng));
    ASSERT_EQ(Bfloat16ByBits(f), Bits16(tesseraBfloat16, f)) << f;
    uint16_t b = Bfloat16ByBits(f);
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float back;
    memcpy(&back, &u, 4);
    ASSERT_EQ(static_cast<double>(back), DecodeValue(tesseraBfloat16, &b)) << f;
  }
}

TEST(Fp8, KnownPatterns) {
  EXPECT_EQ(0x38, Bits8(tesseraFloat8e4m3, 1.0));
  EXPECT_EQ(0x7E, Bits8(tesseraFloat8e4m3, 448.0));  // largest finite
  EXPECT_EQ(0x7F, Bits8(tesseraFloat8e4m3, 1000.0));  // no infinity: NaN
  EXPECT_EQ(0x01, Bits8(tesseraFloat8e4m3, std::ldexp(1.0, -9)));
  EXPECT_EQ(0x3C, Bits8(tesseraFloat8e5m2, 1.0));
  EXPECT_EQ(0x7B, Bits8(tesseraFloat8e5m2, 57344.0));
  EXPECT_EQ(0x7C, Bits8(tesseraFloat8e5m2, 1e6));  // infinity
  for (int v = -7; v <= 7; ++v) {
    EXPECT_EQ(v, RoundToType(tesseraFloat8e4m3, v));
    EXPECT_EQ(v, RoundToType(tesseraFloat8e5m2, v));
  }
  for (uint32_t b = 0; b < 256; ++b) {  // every pattern round-trips (NaNs stay NaN)
    for (tesseraDataType_t t : {tesseraFloat8e4m3, tesseraFloat8e5m2}) {
      uint8_t bits = static_cast<uint8_t>(b);
      double v = DecodeValue(t, &bits);
      if (std::isnan(v)) continue;
      EXPECT_EQ(bits, Bits8(t, v)) << TypeName(t) << " " << b;
    }
  }
}

TEST(Ulp, OfEachFloatType) {
  EXPECT_EQ(1.0, UlpOf(tesseraFloat16, 1024.0));
  EXPECT_EQ(0.5, UlpOf(tesseraFloat16, 1023.0));
  EXPECT_EQ(2.0, UlpOf(tesseraBfloat16, 256.0));
  EXPECT_EQ(std::ldexp(1.0, -23), UlpOf(tesseraFloat32, 1.0));
  EXPECT_EQ(std::ldexp(1.0, -52), UlpOf(tesseraFloat64, -1.5));
  EXPECT_EQ(1.0, UlpOf(tesseraInt32, 12345.0));
}

// The input ranges promise exact reductions over up to kMaxExactRanks ranks in every
// type: check that every partial result, not only the final one, fits.
TEST(InputValues, EveryReductionIsExactInEveryType) {
  for (tesseraDataType_t type : AllDataTypes()) {
    if (IsFp8Type(type)) continue;  // reductions of fp8 are not supported
    for (OpKind op : AllReductionKinds()) {
      for (int n = 1; n <= kMaxExactRanks; ++n) {
        for (int j = 0; j < kPeriod; ++j) {
          std::vector<double> inputs;
          for (int r = 0; r < n; ++r) {
            double x = InputValue(op, type, j, r);
            ASSERT_EQ(x, RoundToType(type, x)) << TypeName(type) << " input";
            inputs.push_back(x);
            if (op == OpKind::kAvg) continue;  // the division is checked below
            double partial = ReduceReference(op, type, inputs, PreMulScalar(type));
            ASSERT_EQ(partial, RoundToType(type, partial))
                << TypeName(type) << " " << OpKindName(op) << " n " << n << " j " << j;
          }
          if (op == OpKind::kAvg && !IsFloatType(type)) {
            double avg = ReduceReference(op, type, inputs, 0);
            ASSERT_EQ(avg, std::trunc(avg));
          }
        }
      }
    }
  }
}

TEST(InputValues, CopyValuesDifferBetweenRanks) {
  for (tesseraDataType_t type : AllDataTypes()) {
    for (int j = 0; j < kPeriod; ++j) {
      for (int a = 0; a < kMaxExactRanks; ++a) {
        for (int b = a + 1; b < kMaxExactRanks; ++b) {
          ASSERT_NE(RoundToType(type, InputValue(OpKind::kCopy, type, j, a)),
                    RoundToType(type, InputValue(OpKind::kCopy, type, j, b)))
              << TypeName(type) << " j " << j << " ranks " << a << " " << b;
        }
      }
    }
  }
}

TEST(ReduceReference, IntegerAverageTruncatesTowardZero) {
  EXPECT_EQ(-3.0, ReduceReference(OpKind::kAvg, tesseraInt32, {-3, -4}, 0));  // -3.5
  EXPECT_EQ(3.0, ReduceReference(OpKind::kAvg, tesseraUint8, {3, 4}, 0));
  EXPECT_EQ(-3.5, ReduceReference(OpKind::kAvg, tesseraFloat32, {-3, -4}, 0));
  EXPECT_EQ(14.0, ReduceReference(OpKind::kPreMulSum, tesseraInt8, {3, 4}, 2));
}

TEST(FailureLog, KeepsTheFirstLines) {
  FailureLog log(2);
  EXPECT_TRUE(log.Add(""));
  EXPECT_TRUE(log.ok());
  log.Add("a");
  log.Add("b");
  log.Add("c");
  EXPECT_EQ("a\nb\n... and 1 more failures\n", log.str());
}

}  // namespace
}  // namespace tessera_test
