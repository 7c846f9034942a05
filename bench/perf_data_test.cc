// Checks the claim of perf_data.h: reducing the ranks' values in the arithmetic of the
// type itself (16-bit floats rounded after every step, integers wrapping), in forward
// and in reverse rank order, gives exactly ReducedPattern, for every type, op and a
// range of rank counts. Also checks the buffer tiling and mismatch counting.
#include "bench/perf_data.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "elementwise/elementwise.h"

namespace tessera_bench {

// The float16/bfloat16 conversions are the library's (elementwise/elementwise.h).
using tessera::Bfloat16ToFloat;
using tessera::FloatToBfloat16;
using tessera::FloatToHalf;
using tessera::HalfToFloat;

namespace {

// Arithmetic of a type with a native C++ counterpart. Integers wrap (through unsigned).
template <typename T>
struct NativeArithmetic {
  using Value = T;
  static T FromInt(int64_t v) { return static_cast<T>(v); }
  static T Combine(ReduceOp op, T a, T b) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return Wrap(a, b, true);
      case ReduceOp::kProd: return Wrap(a, b, false);
      case ReduceOp::kMax: return a > b ? a : b;
      case ReduceOp::kMin: return a < b ? a : b;
    }
    return a;
  }
  static T Divide(T a, int n) { return static_cast<T>(a / n); }
  static T Multiply(T a, double factor) { return static_cast<T>(a * factor); }
  static void Store(T v, unsigned char* out) { std::memcpy(out, &v, sizeof v); }

 private:
  static T Wrap(T a, T b, bool add) {
    if constexpr (std::is_integral<T>::value) {
      using U = typename std::make_unsigned<T>::type;
      U x = static_cast<U>(a), y = static_cast<U>(b);
      return static_cast<T>(add ? static_cast<U>(x + y) : static_cast<U>(x * y));
    } else {
      return add ? a + b : a * b;
    }
  }
};

// A 16-bit float: computed in float, rounded back to 16 bits after every operation.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Float16Arithmetic {
  using Value = float;
  static float Round(float v) { return ToFloat(FromFloat(v)); }
  static float FromInt(int64_t v) { return Round(static_cast<float>(v)); }
  static float Combine(ReduceOp op, float a, float b) {
    return Round(NativeArithmetic<float>::Combine(op, a, b));
  }
  static float Divide(float a, int n) { return Round(a / n); }
  static float Multiply(float a, double factor) { return Round(a * static_cast<float>(factor)); }
  static void Store(float v, unsigned char* out) {
    uint16_t bits = FromFloat(v);
    std::memcpy(out, &bits, sizeof bits);
  }
};

enum class AvgMethod { kDivide, kMultiplyByReciprocal };

// One period of results of reducing every rank's SendPattern the way a library could.
template <typename Arithmetic>
std::vector<unsigned char> Reduce(DataType type, ReduceOp op, int nranks, bool reverse,
                                  AvgMethod avg) {
  using Value = typename Arithmetic::Value;
  std::vector<unsigned char> out(kPatternPeriod * ElementSize(type));
  std::vector<Value> values(static_cast<size_t>(nranks));
  for (size_t j = 0; j < kPatternPeriod; ++j) {
    for (int rank = 0; rank < nranks; ++rank) {
      values[reverse ? nranks - 1 - rank : rank] =
          Arithmetic::FromInt(SendValue(type, op, rank, nranks, j));
    }
    Value acc = values[0];
    for (int i = 1; i < nranks; ++i) acc = Arithmetic::Combine(op, acc, values[i]);
    if (op == ReduceOp::kAvg) {
      acc = avg == AvgMethod::kDivide ? Arithmetic::Divide(acc, nranks)
                                      : Arithmetic::Multiply(acc, 1.0 / nranks);
    }
    Arithmetic::Store(acc, &out[j * ElementSize(type)]);
  }
  return out;
}

std::vector<unsigned char> ReduceAs(DataType t, ReduceOp op, int n, bool reverse, AvgMethod avg) {
  using HalfArithmetic = Float16Arithmetic<HalfToFloat, FloatToHalf>;
  using Bfloat16Arithmetic = Float16Arithmetic<Bfloat16ToFloat, FloatToBfloat16>;
  switch (t) {
    case DataType::kInt8: return Reduce<NativeArithmetic<int8_t>>(t, op, n, reverse, avg);
    case DataType::kUint8: return Reduce<NativeArithmetic<uint8_t>>(t, op, n, reverse, avg);
    case DataType::kInt32: return Reduce<NativeArithmetic<int32_t>>(t, op, n, reverse, avg);
    case DataType::kUint32: return Reduce<NativeArithmetic<uint32_t>>(t, op, n, reverse, avg);
    case DataType::kInt64: return Reduce<NativeArithmetic<int64_t>>(t, op, n, reverse, avg);
    case DataType::kUint64: return Reduce<NativeArithmetic<uint64_t>>(t, op, n, reverse, avg);
    case DataType::kFloat32: return Reduce<NativeArithmetic<float>>(t, op, n, reverse, avg);
    case DataType::kFloat64: return Reduce<NativeArithmetic<double>>(t, op, n, reverse, avg);
    case DataType::kFloat16: return Reduce<HalfArithmetic>(t, op, n, reverse, avg);
    case DataType::kBfloat16: return Reduce<Bfloat16Arithmetic>(t, op, n, reverse, avg);
  }
  return {};
}

bool IsPowerOfTwo(int n) { return (n & (n - 1)) == 0; }

TEST(PerfDataTest, ReductionIsExactInEveryTypeOpOrderAndRankCount) {
  for (int nranks : {1, 2, 3, 4, 5, 8, 13, 43, 64, 130}) {
    for (DataType type : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        SCOPED_TRACE(std::string(DataTypeName(type)) + " " + ReduceOpName(op) + " nranks " +
                     std::to_string(nranks));
        ElementPattern expected = ReducedPattern(type, op, nranks);
        for (bool reverse : {false, true}) {
          std::vector<unsigned char> got = ReduceAs(type, op, nranks, reverse, AvgMethod::kDivide);
          EXPECT_EQ(expected.CountMismatches(got.data(), kPatternPeriod), 0u)
              << "reverse " << reverse;
        }
        if (op == ReduceOp::kAvg && IsFloatingPoint(type) && IsPowerOfTwo(nranks)) {
          std::vector<unsigned char> got =
              ReduceAs(type, op, nranks, false, AvgMethod::kMultiplyByReciprocal);
          EXPECT_EQ(expected.CountMismatches(got.data(), kPatternPeriod), 0u) << "reciprocal";
        }
      }
    }
  }
}

TEST(PerfDataTest, ValuesAreSmallAndUnsignedTypesGetNoNegatives) {
  for (int nranks : {1, 2, 4, 7}) {
    for (DataType type : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (int rank = 0; rank < nranks; ++rank) {
          for (size_t j = 0; j < kPatternPeriod; ++j) {
            int64_t v = SendValue(type, op, rank, nranks, j);
            ASSERT_LE(v, 8);
            ASSERT_GE(v, IsSigned(type) ? -4 : 0);
          }
        }
      }
    }
  }
}

TEST(PerfDataTest, RanksSendDifferentValues) {
  // A library that returned its own input, or one rank's, must fail the check.
  for (ReduceOp op : AllReduceOps()) {
    ElementPattern expected = ReducedPattern(DataType::kFloat32, op, 4);
    for (int rank = 0; rank < 4; ++rank) {
      std::vector<float> own(kPatternPeriod);
      SendPattern(DataType::kFloat32, op, rank, 4).Fill(own.data(), own.size());
      EXPECT_GT(expected.CountMismatches(own.data(), own.size()), 0u) << ReduceOpName(op);
    }
  }
}

TEST(PerfDataTest, FillTilesThePeriodAndMismatchesAreCountedPerElement) {
  ElementPattern pattern = SendPattern(DataType::kInt32, ReduceOp::kSum, 1, 3);
  const size_t count = 2 * kPatternPeriod + 7;
  std::vector<int32_t> buffer(count + 1, 12345);
  pattern.Fill(buffer.data(), count);
  EXPECT_EQ(buffer[count], 12345);  // nothing written past count
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(buffer[i], SendValue(DataType::kInt32, ReduceOp::kSum, 1, 3, i)) << i;
  }
  EXPECT_EQ(pattern.CountMismatches(buffer.data(), count), 0u);
  buffer[0] += 1;
  buffer[kPatternPeriod + 3] += 1;
  buffer[count - 1] += 1;
  EXPECT_EQ(pattern.CountMismatches(buffer.data(), count), 3u);
  EXPECT_EQ(pattern.CountMismatches(buffer.data(), count - 1), 2u);
}

TEST(PerfDataTest, EncodeValueWritesTheTypesBytes) {
  unsigned char bytes[8] = {};
  EncodeValue(DataType::kInt8, -3, bytes);
  EXPECT_EQ(bytes[0], 0xFD);
  EncodeValue(DataType::kFloat16, -2, bytes);
  uint16_t half;
  std::memcpy(&half, bytes, 2);
  EXPECT_EQ(half, 0xC000);
  EncodeValue(DataType::kBfloat16, 1, bytes);
  uint16_t bf16;
  std::memcpy(&bf16, bytes, 2);
  EXPECT_EQ(bf16, 0x3F80);
  EncodeValue(DataType::kFloat64, 3, bytes);
  double wide;
  std::memcpy(&wide, bytes, 8);
  EXPECT_EQ(wide, 3.0);
}

}  // namespace
}  // namespace tessera_bench
