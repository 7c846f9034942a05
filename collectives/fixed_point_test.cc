// The fixed-point grid kernels (fixed_point.h) against a reference written here with
// wider arithmetic (float64 for the half types and float32, binary128 for float64):
// block keys, exact round trips, sums of several contributions rounded once, the same
// bits in every order and on every implementation, NaN, infinities, signed zeros,
// subnormals, overflow, and runs that start inside a block.
#include "collectives/fixed_point.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "elementwise/elementwise.h"

namespace tessera {
namespace {

const DataType kTypes[] = {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};

// Every implementation this CPU runs.
std::vector<SimdIsa> Implementations() {
  std::vector<SimdIsa> all;
  for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) all.push_back(static_cast<SimdIsa>(i));
  return all;
}

// ---- Values of each type as float64 (exact), and back.

double Decode(DataType type, const void* p) {
  switch (type) {
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case DataType::kBfloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bfloat16ToFloat(h);
    }
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
}

// Writes x (exact in float64 or binary128) rounded once to `type`.
void Encode(DataType type, __float128 x, void* p) {
  if (type == DataType::kFloat64) {
    const double d = static_cast<double>(x);
    std::memcpy(p, &d, 8);
    return;
  }
  // x is exact in float64 here, and float32 holds every value the half types round to
  // from it with one rounding only when x is exact in float32 (the callers ensure it).
  const float f = static_cast<float>(static_cast<double>(x));
  if (type == DataType::kFloat32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = type == DataType::kFloat16 ? FloatToHalf(f) : FloatToBfloat16(f);
  std::memcpy(p, &h, 2);
}

// A random value of `type` around 2^scale (or exactly 0 now and then).
void RandomValue(DataType type, std::mt19937_64& rng, int scale, void* p) {
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  const double v = rng() % 17 == 0 ? 0.0 : std::ldexp(mantissa(rng), scale);
  Encode(type, v, p);
}

// ---- The reference: the grid written out with binary128 arithmetic.

int Key(DataType type, double x) {
  if (!std::isfinite(x) || x == 0) return 0;
  int bias = type == DataType::kFloat16 ? 15 : type == DataType::kFloat64 ? 1023 : 127;
  const int e = std::ilogb(x) + bias;  // the biased exponent of a normal value
  return std::max(e, 0);               // subnormals have field 0
}

__float128 RoundEven(__float128 v) {
  __float128 f = v < 0 ? -v : v;
  __float128 r = static_cast<__float128>(static_cast<__int128>(f));  // f < 2^100 here
  const __float128 frac = f - r;
  if (frac > static_cast<__float128>(0.5) || (frac == static_cast<__float128>(0.5) && static_cast<__int128>(r) % 2 != 0)) r += 1;
  return v < 0 ? -r : r;
}

__float128 Pow2(int k) {
  __float128 r = 1;
  for (; k > 0; --k) r *= 2;
  for (; k < 0; ++k) r /= 2;
  return r;
}

// The grid words of x in block `key` (one or two), as exact binary128 integers.
std::vector<__float128> GridWords(DataType type, double x, int32_t key) {
  const int q1 = GridExponent(type, key);
  const __float128 hi = RoundEven(static_cast<__float128>(x) * Pow2(-q1));
  if (type != DataType::kFloat64) return {hi};
  const int q2 = std::max(q1 - (53 - kGridHeadroomBits + 1), -1074);
  return {hi, RoundEven((static_cast<__float128>(x) - hi * Pow2(q1)) * Pow2(-q2))};
}

// The finite sum of grid words, back in `type`, rounded once.
void ReferenceFromGrid(DataType type, const std::vector<__float128>& words, int32_t key, void* out) {
  const int q1 = GridExponent(type, key);
  __float128 v = words[0] * Pow2(q1);
  if (words.size() > 1) v += words[1] * Pow2(std::max(q1 - (53 - kGridHeadroomBits + 1), -1074));
  Encode(type, v, out);
}

// Sums `parts` (each count elements of type) on the grid with the kernels of `isa`,
// in the given order of parts; returns the result bytes.
std::vector<unsigned char> GridSum(SimdIsa isa, DataType type, const std::vector<std::vector<unsigned char>>& parts,
                                   size_t count, const std::vector<int>& order) {
  GridFormat f;
  EXPECT_TRUE(GridFormatOf(type, &f));
  std::vector<int32_t> keys(GridBlocks(count), 0);
  for (const auto& p : parts) MaxGridKeysWith(isa, type, p.data(), count, keys.data());
  std::vector<unsigned char> wire(count * f.wire_bytes() + 1);
  for (size_t k = 0; k < order.size(); ++k) {
    ToGridWith(isa, type, parts[order[k]].data(), count, 0, keys.data(), wire.data() + 1, k > 0);  // misaligned
  }
  std::vector<unsigned char> out(count * SizeOf(type));
  FromGridWith(isa, type, wire.data() + 1, count, 0, keys.data(), out.data());
  return out;
}

std::vector<int> InOrder(size_t n) {
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  return order;
}

// parts[r] = count values of type, block b of them around 2^(scale of b).
std::vector<std::vector<unsigned char>> RandomParts(DataType type, int nparts, size_t count, int seed,
                                                   int max_scale) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<unsigned char>> parts(nparts, std::vector<unsigned char>(count * SizeOf(type)));
  for (int r = 0; r < nparts; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const int scale = static_cast<int>((i / kGridBlock) * 7 % (2 * max_scale + 1)) - max_scale + r % 3 -
                        static_cast<int>(rng() % 24);
      RandomValue(type, rng, scale, parts[r].data() + i * SizeOf(type));
    }
  }
  return parts;
}

int MaxScale(DataType type) { return type == DataType::kFloat16 ? 6 : 60; }

TEST(FixedPoint, FormatsOfTheFloatTypes) {
  GridFormat f;
  ASSERT_TRUE(GridFormatOf(DataType::kBfloat16, &f));
  EXPECT_EQ(f.wire, DataType::kFloat32);
  EXPECT_EQ(f.wire_bytes(), 4u);
  ASSERT_TRUE(GridFormatOf(DataType::kFloat32, &f));
  EXPECT_EQ(f.wire_bytes(), 8u);
  ASSERT_TRUE(GridFormatOf(DataType::kFloat64, &f));
  EXPECT_EQ(f.wire_bytes(), 16u);
  EXPECT_FALSE(GridFormatOf(DataType::kInt32, &f));
  // 1.5 in float32 has field 127: |x| < 2^1, q = 1 + 12 - 53.
  EXPECT_EQ(GridExponent(DataType::kFloat32, 127), 1 + kGridHeadroomBits - 53);
  // Never finer than the smallest subnormal.
  EXPECT_EQ(GridExponent(DataType::kFloat16, 0), -24);
  EXPECT_EQ(GridExponent(DataType::kFloat64, 0), 2 - 1023 + kGridHeadroomBits - 53);
  EXPECT_EQ(GridExponent(DataType::kFloat32, 0), -149);
}

TEST(FixedPoint, KeysAreTheLargestFiniteExponentPerBlock) {
  for (SimdIsa isa : Implementations()) {
    const size_t count = 2 * kGridBlock + 37;
    std::vector<float> x(count, 1.0f);
    x[5] = -3.0f;                                            // field 128
    x[kGridBlock + 9] = std::numeric_limits<float>::infinity();  // ignored
    x[kGridBlock + 10] = std::numeric_limits<float>::quiet_NaN();
    x[kGridBlock + 11] = 0.5f;
    x[count - 1] = 1e30f;
    std::vector<int32_t> keys(GridBlocks(count), 0);
    MaxGridKeysWith(isa, DataType::kFloat32, x.data(), count, keys.data());
    EXPECT_EQ(keys[0], 128) << SimdIsaName(isa);
    EXPECT_EQ(keys[1], 127) << SimdIsaName(isa);
    EXPECT_EQ(keys[2], Key(DataType::kFloat32, 1e30)) << SimdIsaName(isa);
    // A larger key already there stays; subnormals and zeros have key 0.
    std::vector<float> tiny(10, 1e-40f);
    std::vector<int32_t> k2 = {200};
    MaxGridKeysWith(isa, DataType::kFloat32, tiny.data(), tiny.size(), k2.data());
    EXPECT_EQ(k2[0], 200);
    k2[0] = 0;
    MaxGridKeysWith(isa, DataType::kFloat32, tiny.data(), tiny.size(), k2.data());
    EXPECT_EQ(k2[0], 0);
  }
}

// Values of one binade per block are exact on the grid: a single contribution comes
// back bit for bit (zeros and signs included).
TEST(FixedPoint, OneContributionRoundTrips) {
  for (DataType type : kTypes) {
    const size_t count = 3 * kGridBlock + 5;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> mantissa(1.0, 2.0);
    std::vector<unsigned char> x(count * SizeOf(type));
    for (size_t i = 0; i < count; ++i) {
      const double v = i % 11 == 0 ? -0.0 : std::ldexp(mantissa(rng), static_cast<int>(i / kGridBlock) - 3);
      Encode(type, i % 2 ? -v : v, &x[i * SizeOf(type)]);
    }
    for (SimdIsa isa : Implementations()) {
      const auto out = GridSum(isa, type, {x}, count, {0});
      EXPECT_EQ(0, std::memcmp(out.data(), x.data(), x.size())) << DataTypeName(type) << " " << SimdIsaName(isa);
    }
  }
}

// Several contributions over a wide range: the kernels give the reference's bits (the
// exact sum of the grid values, rounded once), in every order, on every implementation.
TEST(FixedPoint, SumsMatchTheReferenceInEveryOrder) {
  for (DataType type : kTypes) {
    const int nparts = 6;
    const size_t count = 5 * kGridBlock + 13;
    const auto parts = RandomParts(type, nparts, count, 11, MaxScale(type));
    std::vector<int32_t> keys(GridBlocks(count), 0);
    for (const auto& p : parts) {
      for (size_t i = 0; i < count; ++i) {
        keys[i / kGridBlock] = std::max(keys[i / kGridBlock], Key(type, Decode(type, &p[i * SizeOf(type)])));
      }
    }
    std::vector<unsigned char> want(count * SizeOf(type));
    for (size_t i = 0; i < count; ++i) {
      std::vector<__float128> sum;
      for (const auto& p : parts) {
        const auto w = GridWords(type, Decode(type, &p[i * SizeOf(type)]), keys[i / kGridBlock]);
        if (sum.empty()) {
          sum = w;  // not 0 + w: a sum of -0.0 stays -0.0
        } else {
          for (size_t k = 0; k < w.size(); ++k) sum[k] += w[k];
        }
      }
      ReferenceFromGrid(type, sum, keys[i / kGridBlock], &want[i * SizeOf(type)]);
    }
    std::vector<int> order = InOrder(nparts);
    std::mt19937 shuffle(3);
    for (int trial = 0; trial < 4; ++trial) {
      for (SimdIsa isa : Implementations()) {
        const auto got = GridSum(isa, type, parts, count, order);
        size_t bad = 0;
        for (size_t i = 0; i < count && bad < 5; ++i) {
          if (std::memcmp(&got[i * SizeOf(type)], &want[i * SizeOf(type)], SizeOf(type)) != 0) {
            ++bad;
            ADD_FAILURE() << DataTypeName(type) << " " << SimdIsaName(isa) << " [" << i << "] = "
                          << Decode(type, &got[i * SizeOf(type)]) << ", want " << Decode(type, &want[i * SizeOf(type)]);
          }
        }
      }
      std::shuffle(order.begin(), order.end(), shuffle);
    }
  }
}

// The error bound of docs/semantics.md: |result - exact| <= n * 2^(q-1) + half an ulp of
// the result (binary128 holds the exact sums of these inputs).
TEST(FixedPoint, WithinTheStatedBoundOfTheExactSum) {
  for (DataType type : kTypes) {
    const int nparts = 8;
    const size_t count = 4 * kGridBlock;
    const auto parts = RandomParts(type, nparts, count, 5, MaxScale(type));
    const auto got = GridSum(PreferredGridIsa(), type, parts, count, InOrder(nparts));
    std::vector<int32_t> keys(GridBlocks(count), 0);
    for (const auto& p : parts) MaxGridKeys(type, p.data(), count, keys.data());
    for (size_t i = 0; i < count; ++i) {
      __float128 exact = 0;
      for (const auto& p : parts) exact += Decode(type, &p[i * SizeOf(type)]);
      const double g = Decode(type, &got[i * SizeOf(type)]);
      const int q = type == DataType::kFloat64 ? std::max(GridExponent(type, keys[i / kGridBlock]) - 42, -1074)
                                               : GridExponent(type, keys[i / kGridBlock]);
      const int digits = type == DataType::kFloat16 ? 11 : type == DataType::kBfloat16 ? 8 : type == DataType::kFloat32 ? 24 : 53;
      const int min_exp = type == DataType::kFloat16 ? -25 : type == DataType::kBfloat16 ? -134 : type == DataType::kFloat32 ? -150 : -1075;
      const double half_ulp = std::ldexp(1.0, std::max(g == 0 ? min_exp : std::ilogb(g) - digits, min_exp));
      const __float128 bound = nparts * Pow2(q - 1) + half_ulp;
      const __float128 err = g > exact ? g - exact : exact - g;
      ASSERT_LE(static_cast<double>(err), static_cast<double>(bound)) << DataTypeName(type) << " [" << i << "]";
    }
  }
}

// Bits of one element after summing the given values (each a one-element contribution).
template <typename T>
T SumOf(DataType type, const std::vector<T>& values) {
  std::vector<std::vector<unsigned char>> parts;
  for (T v : values) {
    std::vector<unsigned char> p(sizeof(T));
    std::memcpy(p.data(), &v, sizeof(T));
    parts.push_back(p);
  }
  const auto out = GridSum(PreferredGridIsa(), type, parts, 1, InOrder(values.size()));
  T r;
  std::memcpy(&r, out.data(), sizeof(T));
  return r;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

TEST(FixedPoint, NanInfinitiesAndSignedZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan_payload = [] {
    const uint32_t u = 0xffc12345u;  // negative, with a payload
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }();
  EXPECT_EQ(Bits(SumOf<float>(DataType::kFloat32, {1.0f, nan_payload, 2.0f})), 0x7fc00000u);
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {1.0f, inf, 2.0f}), inf);
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {-inf, 1e30f}), -inf);
  EXPECT_EQ(Bits(SumOf<float>(DataType::kFloat32, {inf, 1.0f, -inf})), 0x7fc00000u);
  EXPECT_EQ(Bits(SumOf<float>(DataType::kFloat32, {-0.0f, -0.0f})), 0x80000000u);
  EXPECT_EQ(Bits(SumOf<float>(DataType::kFloat32, {-0.0f, 0.0f})), 0u);
  EXPECT_EQ(Bits(SumOf<float>(DataType::kFloat32, {3.0f, -3.0f})), 0u);
  // A negative value far below the grid of its block (set by 1.0 beside it) rounds to
  // -0.0, and a sum of -0.0 stays -0.0.
  const std::vector<std::vector<unsigned char>> parts = {
      std::vector<unsigned char>(8), std::vector<unsigned char>(8)};
  const float a[2] = {-1e-30f, 1.0f}, b[2] = {-0.0f, 1.0f};
  std::memcpy(const_cast<unsigned char*>(parts[0].data()), a, 8);
  std::memcpy(const_cast<unsigned char*>(parts[1].data()), b, 8);
  const auto out = GridSum(PreferredGridIsa(), DataType::kFloat32, parts, 2, {0, 1});
  float r[2];
  std::memcpy(r, out.data(), 8);
  EXPECT_EQ(Bits(r[0]), 0x80000000u);
  EXPECT_EQ(r[1], 2.0f);
  const double dinf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Bits(SumOf<double>(DataType::kFloat64, {1.0, std::nan(""), dinf})), 0x7ff8000000000000u);
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {dinf, -1.0}), dinf);
  EXPECT_EQ(Bits(SumOf<double>(DataType::kFloat64, {-0.0, -0.0})), 0x8000000000000000u);
  EXPECT_EQ(Bits(SumOf<double>(DataType::kFloat64, {-0.0, 0.0})), 0u);
  // The half types: canonical quiet NaNs 0x7e00 and 0x7fc0.
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    std::vector<std::vector<unsigned char>> parts(3, std::vector<unsigned char>(2));
    const uint16_t nan = type == DataType::kFloat16 ? 0xfd01 : 0xff81, one = type == DataType::kFloat16 ? 0x3c00 : 0x3f80;
    std::memcpy(parts[0].data(), &one, 2);
    std::memcpy(parts[1].data(), &nan, 2);
    std::memcpy(parts[2].data(), &one, 2);
    const auto out = GridSum(PreferredGridIsa(), type, parts, 1, {0, 1, 2});
    uint16_t r;
    std::memcpy(&r, out.data(), 2);
    EXPECT_EQ(r, type == DataType::kFloat16 ? 0x7e00 : 0x7fc0) << DataTypeName(type);
  }
}

TEST(FixedPoint, SubnormalsAreExactWhenTheBlockIsSmall) {
  const float min_sub = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {min_sub, min_sub, 3 * min_sub}), 5 * min_sub);
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {std::numeric_limits<float>::min(), -min_sub}),
            std::numeric_limits<float>::min() - min_sub);
  const double dmin = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {dmin, 2 * dmin, -7 * dmin}), -4 * dmin);
  // A float64 sum that lands among the subnormals from normal inputs, rounded once.
  const double a = std::ldexp(1.0, -1022), b = -std::ldexp(1.0 - std::ldexp(1.0, -20), -1022);
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {a, b}), a + b);
}

TEST(FixedPoint, OverflowGivesInfinityOnlyWhenTheExactSumRoundsBeyondTheLargest) {
  const float fmax = std::numeric_limits<float>::max();
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {fmax, fmax}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, {fmax, fmax, -fmax}), fmax);
  const double dmax = std::numeric_limits<double>::max();
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {dmax, dmax}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {dmax, dmax, -dmax}), dmax);
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, {dmax, -std::ldexp(1.0, 960)}), dmax - std::ldexp(1.0, 960));
}

// A run that starts inside a block, on misaligned buffers, equals the whole vector's.
TEST(FixedPoint, RunsStartingInsideABlock) {
  for (DataType type : kTypes) {
    GridFormat f;
    ASSERT_TRUE(GridFormatOf(type, &f));
    const size_t count = 3 * kGridBlock + 100, es = SizeOf(type);
    const auto parts = RandomParts(type, 2, count, 9, MaxScale(type));
    std::vector<int32_t> keys(GridBlocks(count), 0);
    for (const auto& p : parts) MaxGridKeys(type, p.data(), count, keys.data());
    for (SimdIsa isa : Implementations()) {
      std::vector<unsigned char> whole_wire(count * f.wire_bytes()), whole(count * es);
      ToGridWith(isa, type, parts[0].data(), count, 0, keys.data(), whole_wire.data(), false);
      ToGridWith(isa, type, parts[1].data(), count, 0, keys.data(), whole_wire.data(), true);
      FromGridWith(isa, type, whole_wire.data(), count, 0, keys.data(), whole.data());
      for (size_t first : {size_t{1}, kGridBlock - 3, kGridBlock + 517}) {
        const size_t n = count - first;
        std::vector<unsigned char> wire(n * f.wire_bytes() + 3), out(n * es + 5);
        ToGridWith(isa, type, parts[0].data() + first * es, n, first, keys.data(), wire.data() + 3, false);
        ToGridWith(isa, type, parts[1].data() + first * es, n, first, keys.data(), wire.data() + 3, true);
        FromGridWith(isa, type, wire.data() + 3, n, first, keys.data(), out.data() + 5);
        EXPECT_EQ(0, std::memcmp(out.data() + 5, whole.data() + first * es, n * es))
            << DataTypeName(type) << " " << SimdIsaName(isa) << " first " << first;
      }
    }
  }
}

// Infinities, NaN, signed zeros and a value that rounds to -0.0 on its block's grid, in
// vector bodies and in the tail of `parts` (of count elements).
void SprinkleSpecials(DataType type, size_t count, std::vector<std::vector<unsigned char>>* parts) {
  const double inf = std::numeric_limits<double>::infinity();
  auto put = [&](size_t part, size_t i, double v) { Encode(type, v, (*parts)[part].data() + i * SizeOf(type)); };
  for (size_t i : {size_t{3}, size_t{kGridBlock + 40}, count - 2}) {
    put(0, i, inf);  // +inf with -inf: NaN
    put(1, i, -inf);
    put(parts->size() - 1, i + 1, std::nan(""));
    put(0, i + 1, inf);
    for (size_t r = 0; r < parts->size(); ++r) put(r, i - 1, r == 0 ? -1e-30 : -0.0);
  }
}

// Small integers and zeros (every value on its block's grid: two float32 contributions
// then add in float32), with a value far below the largest in every seventh block, and
// in block 4 one just below where float32 values stop being multiples of the grid's
// step (for float32 the step is 2^-39 beside a largest value of 3; 2^-17 + 2^-40 rounds
// to 2^-17 there), beside zeros.
std::vector<std::vector<unsigned char>> OnGridParts(DataType type, int nparts, size_t count, int seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<unsigned char>> parts(nparts, std::vector<unsigned char>(count * SizeOf(type)));
  for (auto& p : parts) {
    for (size_t i = 0; i < count; ++i) Encode(type, static_cast<double>(static_cast<int>(rng() % 7) - 3), &p[i * SizeOf(type)]);
    for (size_t i = 5; i < count; i += 7 * kGridBlock) Encode(type, 0x1p-30, &p[i * SizeOf(type)]);
    Encode(type, &p == &parts[0] ? 0x1p-17 + 0x1p-40 : 0.0, &p[(4 * kGridBlock + 9) * SizeOf(type)]);
  }
  return parts;
}

// GridSum in one pass gives the bits of the three passes, for two contributions (float32's
// shortcut where a block lies on its grid) and five.
TEST(FixedPoint, GridSumEqualsTheThreePasses) {
  for (DataType type : kTypes) {
    for (int nparts : {2, 5}) {
      const size_t count = 9 * kGridBlock + 77;
      auto wide = RandomParts(type, nparts, count, 13, MaxScale(type));
      auto on_grid = OnGridParts(type, nparts, count, 17);
      SprinkleSpecials(type, count, &wide);
      SprinkleSpecials(type, count, &on_grid);
      for (const auto* parts : {&wide, &on_grid}) {
        for (SimdIsa isa : Implementations()) {
          const auto want = GridSum(isa, type, *parts, count, InOrder(parts->size()));
          std::vector<const void*> inputs;
          for (const auto& p : *parts) inputs.push_back(p.data());
          std::vector<unsigned char> got(count * SizeOf(type));
          GridSumWith(isa, type, inputs.data(), inputs.size(), count, got.data());
          EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size()))
              << DataTypeName(type) << " " << SimdIsaName(isa) << " " << nparts << " parts"
              << (parts == &on_grid ? " on the grid" : "");
        }
      }
    }
  }
}

TEST(FixedPoint, CanonicalZerosAndNans) {
  for (SimdIsa isa : Implementations()) {
    std::vector<float> f = {-0.0f, 0.0f, 1.0f, -2.5f, std::numeric_limits<float>::infinity(), 1e-45f, -1e-45f};
    const uint32_t nans[] = {0xffc12345u, 0x7f800001u, 0x7fc00000u};
    for (uint32_t n : nans) {
      float x;
      std::memcpy(&x, &n, 4);
      f.push_back(x);
    }
    for (int k = 0; k < 3; ++k) f.insert(f.end(), f.begin(), f.begin() + 10);  // vector and tail paths
    std::vector<float> out(f.size());
    CanonicalizeZerosAndNansWith(isa, DataType::kFloat32, f.data(), f.size(), out.data());
    for (size_t i = 0; i < f.size(); ++i) {
      const uint32_t want = f[i] != f[i] ? 0x7fc00000u : f[i] == 0 ? 0u : Bits(f[i]);
      EXPECT_EQ(Bits(out[i]), want) << SimdIsaName(isa) << " [" << i << "]";
    }
    const uint16_t h[] = {0x8000, 0x0000, 0x3c00, 0xfd01, 0x7c00, 0x7c01, 0x8001};
    const uint16_t want_h[] = {0, 0, 0x3c00, 0x7e00, 0x7c00, 0x7e00, 0x8001};
    uint16_t out_h[7];
    CanonicalizeZerosAndNansWith(isa, DataType::kFloat16, h, 7, out_h);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(out_h[i], want_h[i]) << SimdIsaName(isa) << " float16 [" << i << "]";
    const double d[] = {-0.0, std::nan(""), -std::numeric_limits<double>::infinity(), 3.0};
    double out_d[4];
    CanonicalizeZerosAndNansWith(isa, DataType::kFloat64, d, 4, out_d);
    EXPECT_EQ(Bits(out_d[0]), 0u);
    EXPECT_EQ(Bits(out_d[1]), 0x7ff8000000000000u);
    EXPECT_EQ(out_d[2], d[2]);
    EXPECT_EQ(out_d[3], 3.0);
  }
}

// kMaxGridContributions values of the largest grid magnitude, all of one sign, still
// add exactly.
TEST(FixedPoint, HeadroomHoldsTheStatedMaximum) {
  std::vector<float> values(kMaxGridContributions, std::nextafter(2.0f, 0.0f));  // just below 2^1
  EXPECT_EQ(SumOf<float>(DataType::kFloat32, values), static_cast<float>(kMaxGridContributions * static_cast<double>(values[0])));
  std::vector<double> dvalues(kMaxGridContributions, std::nextafter(2.0, 0.0));
  EXPECT_EQ(SumOf<double>(DataType::kFloat64, dvalues), kMaxGridContributions * dvalues[0]);
}

}  // namespace
}  // namespace tessera
