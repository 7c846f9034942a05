// The scalar float16 and bfloat16 conversions (elementwise.h): known encodings, exact
// round trips of all 65536 patterns, and round-to-nearest-even at every midpoint between
// neighbours.
#include "elementwise/elementwise.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tessera {
namespace {

bool IsHalfNan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }
bool IsBfloat16Nan(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }

TEST(Float16Test, KnownHalfEncodings) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(3.0f), 0x4200);
  EXPECT_EQ(FloatToHalf(2048.0f), 0x6800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);            // largest finite
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);            // below the midpoint to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);            // the midpoint: ties to even = inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);               // overflow
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // half of it: ties to even (0)
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: ties to even (2)
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_TRUE(IsHalfNan(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST(Float16Test, KnownBfloat16Encodings) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBfloat16(-3.0f), 0xC040);
  EXPECT_EQ(FloatToBfloat16(256.0f), 0x4380);
  EXPECT_EQ(FloatToBfloat16(257.0f), 0x4380);  // midpoint of 256 and 258: ties to even
  EXPECT_EQ(FloatToBfloat16(259.0f), 0x4382);  // midpoint of 258 and 260: ties to even
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_TRUE(IsBfloat16Nan(FloatToBfloat16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Float16Test, EverySmallIntegerIsExact) {
  for (int i = -2048; i <= 2048; ++i) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(static_cast<float>(i))), static_cast<float>(i)) << i;
  }
  for (int i = -256; i <= 256; ++i) {
    EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(static_cast<float>(i))), static_cast<float>(i)) << i;
  }
}

TEST(Float16Test, EveryPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    if (IsHalfNan(h)) {
      EXPECT_TRUE(IsHalfNan(FloatToHalf(HalfToFloat(h)))) << std::hex << bits;
    } else {
      EXPECT_EQ(FloatToHalf(HalfToFloat(h)), h) << std::hex << bits;
    }
    if (IsBfloat16Nan(h)) {
      EXPECT_TRUE(IsBfloat16Nan(FloatToBfloat16(Bfloat16ToFloat(h)))) << std::hex << bits;
    } else {
      EXPECT_EQ(FloatToBfloat16(Bfloat16ToFloat(h)), h) << std::hex << bits;
    }
  }
}

// Between two neighbouring finite values of the same sign, a float just below the
// midpoint rounds down, just above rounds up, and the midpoint itself to the even one.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void CheckMidpoints(uint16_t first, uint16_t last) {
  for (uint32_t low = first; low < last; ++low) {
    uint16_t high = static_cast<uint16_t>(low + 1);
    float a = ToFloat(static_cast<uint16_t>(low));
    float b = ToFloat(high);
    float mid = a + (b - a) / 2;  // exact: 16-bit values need few of a float's bits
    uint16_t even = (low % 2 == 0) ? static_cast<uint16_t>(low) : high;
    ASSERT_EQ(FromFloat(mid), even) << std::hex << low;
    ASSERT_EQ(FromFloat(std::nextafter(mid, a)), low) << std::hex << low;
    ASSERT_EQ(FromFloat(std::nextafter(mid, b)), high) << std::hex << low;
  }
}

TEST(Float16Test, HalfRoundsToNearestEven) {
  CheckMidpoints<HalfToFloat, FloatToHalf>(0x0000, 0x7BFF);  // positive finite
  CheckMidpoints<HalfToFloat, FloatToHalf>(0x8000, 0xFBFF);  // negative finite
}

TEST(Float16Test, Bfloat16RoundsToNearestEven) {
  CheckMidpoints<Bfloat16ToFloat, FloatToBfloat16>(0x0000, 0x7F7F);
  CheckMidpoints<Bfloat16ToFloat, FloatToBfloat16>(0x8000, 0xFF7F);
}

}  // namespace
}  // namespace tessera
