// The reduction kernels against a scalar reference, for every supported type and op and
// every instruction set this CPU runs, at lengths that exercise the unrolled vector body,
// the single-vector loop and the scalar tail, in place and not.
#include "elementwise/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {
namespace {

template <typename T>
T Reference(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum: return static_cast<T>(a + b);
    case RedOp::kProd: return static_cast<T>(a * b);
    case RedOp::kMax: return a > b ? a : b;
    case RedOp::kMin: return a < b ? a : b;
    default: return 0;
  }
}

// Every instruction set the kernels are compiled for that this CPU runs.
std::vector<SimdIsa> Isas() {
  std::vector<SimdIsa> isas;
  for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) isas.push_back(static_cast<SimdIsa>(i));
  return isas;
}

template <typename T>
void CheckType(DataType type) {
  for (SimdIsa isa : Isas()) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
      SCOPED_TRACE(std::string(SimdIsaName(isa)) + " " + DataTypeName(type) + " " + RedOpName(op));
      Reducer r;
      ASSERT_TRUE(GetReducerForIsa(type, op, isa, &r).ok());
      ASSERT_EQ(r.elem_size, sizeof(T));
      // Vectors of 16 to 64 bytes, unrolled by 4: each length range takes another path.
      for (size_t n : {0ul, 1ul, 3ul, 31ul, 32ul, 33ul, 64ul, 65ul, 127ul, 255ul, 256ul, 257ul, 300ul, 4099ul}) {
        std::vector<T> a(n), b(n), dst(n);
        for (size_t i = 0; i < n; ++i) {
          a[i] = static_cast<T>(static_cast<int>(i % 11) - 5);
          b[i] = static_cast<T>(static_cast<int>((i * 7) % 13) - 6);
        }
        r.fn(dst.data(), a.data(), b.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], Reference(op, a[i], b[i])) << "n " << n << " i " << i;
        std::vector<T> in_place = a;
        r.fn(in_place.data(), in_place.data(), b.data(), n);
        EXPECT_EQ(in_place, dst);
      }
    }
  }
}

TEST(ReduceKernels, EveryIntegerAndFloatTypeMatchesScalarReference) {
  CheckType<int8_t>(DataType::kInt8);
  CheckType<uint8_t>(DataType::kUint8);
  CheckType<int32_t>(DataType::kInt32);
  CheckType<uint32_t>(DataType::kUint32);
  CheckType<int64_t>(DataType::kInt64);
  CheckType<uint64_t>(DataType::kUint64);
  CheckType<float>(DataType::kFloat32);
  CheckType<double>(DataType::kFloat64);
}

// Signed sums and products wrap around (two's complement), in the vector body and the tail.
TEST(ReduceKernels, SignedIntegersWrapAround) {
  for (SimdIsa isa : Isas()) {
    Reducer sum, prod;
    ASSERT_TRUE(GetReducerForIsa(DataType::kInt8, RedOp::kSum, isa, &sum).ok());
    ASSERT_TRUE(GetReducerForIsa(DataType::kInt32, RedOp::kProd, isa, &prod).ok());
    std::vector<int8_t> a8(300, 100), b8(300, 100), d8(300);
    sum.fn(d8.data(), a8.data(), b8.data(), d8.size());
    for (int8_t v : d8) ASSERT_EQ(v, -56) << SimdIsaName(isa);
    std::vector<int32_t> a32(100, std::numeric_limits<int32_t>::max()), b32(100, 2), d32(100);
    prod.fn(d32.data(), a32.data(), b32.data(), d32.size());
    for (int32_t v : d32) ASSERT_EQ(v, -2) << SimdIsaName(isa);  // 0x7fffffff * 2 = 0xfffffffe
  }
}

TEST(ReduceKernels, GetReducerUsesThePreferredInstructionSet) {
  EXPECT_LE(static_cast<int>(PreferredKernelIsa()), static_cast<int>(SupportedSimdIsa()));
  Reducer chosen, expected;
  ASSERT_TRUE(GetReducer(DataType::kFloat32, RedOp::kSum, &chosen).ok());
  ASSERT_TRUE(GetReducerForIsa(DataType::kFloat32, RedOp::kSum, PreferredKernelIsa(), &expected).ok());
  EXPECT_EQ(chosen.fn, expected.fn);
}

TEST(ReduceKernels, UnalignedBuffersWork) {
  for (SimdIsa isa : Isas()) {
    Reducer r;
    ASSERT_TRUE(GetReducerForIsa(DataType::kFloat32, RedOp::kSum, isa, &r).ok());
    std::vector<char> raw(4 * 1001 + 3);
    float* a = reinterpret_cast<float*>(raw.data() + 1);  // deliberately misaligned
    std::vector<float> b(1000, 2.0f), dst(1000);
    for (int i = 0; i < 1000; ++i) {
      float v = static_cast<float>(i);
      std::memcpy(reinterpret_cast<char*>(a) + 4 * i, &v, 4);
    }
    r.fn(dst.data(), a, b.data(), 1000);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(dst[i], i + 2.0f) << SimdIsaName(isa);
  }
}

// NaN on either side, in the unrolled body, the single-vector loop and the tail, at every
// instruction set: the result is NaN, and bit for bit what the scalar rule gives (the
// NaN operand itself; a when both are). Signed zeros: b when they compare equal.
template <typename T>
void CheckNanPropagation(DataType type) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T other_nan = -std::numeric_limits<T>::quiet_NaN();
  for (SimdIsa isa : Isas()) {
    for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
      const std::string where = std::string(SimdIsaName(isa)) + " " + DataTypeName(type) + " " + RedOpName(op);
      Reducer r;
      ASSERT_TRUE(GetReducerForIsa(type, op, isa, &r).ok());
      const size_t n = 200;  // avx512 float64: 0..127 unrolled, 128..191 single vectors, tail
      std::vector<T> a(n, T(1)), b(n, T(2)), dst(n);
      for (size_t i : {3, 40, 130, 150, 193, 199}) (i % 2 ? a : b)[i] = nan;
      for (size_t i : {5, 140, 195}) {
        a[i] = nan;
        b[i] = other_nan;
      }
      for (size_t i : {7, 141, 196}) {
        a[i] = T(0);
        b[i] = -T(0);
      }
      for (size_t i : {9, 142, 197}) a[i] = -std::numeric_limits<T>::infinity();
      r.fn(dst.data(), a.data(), b.data(), n);
      for (size_t i = 0; i < n; ++i) {
        T want;
        if (op == RedOp::kMax) {
          want = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
        } else {
          want = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];
        }
        ASSERT_EQ(std::memcmp(&dst[i], &want, sizeof(T)), 0) << where << " index " << i;
      }
      for (size_t i : {3, 40, 130, 150, 193, 199, 5, 140, 195}) {
        EXPECT_TRUE(std::isnan(dst[i])) << where << " index " << i;
      }
      EXPECT_EQ(dst[0], op == RedOp::kMax ? T(2) : T(1)) << where;
    }
  }
}

TEST(ReduceKernels, MaxAndMinPropagateNanFromEitherSide) {
  CheckNanPropagation<float>(DataType::kFloat32);
  CheckNanPropagation<double>(DataType::kFloat64);
}

TEST(ReduceKernels, UnsupportedCombinationsSayWhat) {
  Reducer r;
  Status s = GetReducer(DataType::kFloat16, RedOp::kSum, &r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("float16"), std::string::npos);
  s = GetReducer(DataType::kFloat32, RedOp::kAvg, &r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("avg"), std::string::npos);
}

}  // namespace
}  // namespace tessera
