// The reduction kernels against a scalar reference, for every supported type and op,
// at lengths that exercise the vector body and the scalar tail, in place and not.
#include "collectives/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
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

template <typename T>
void CheckType(DataType type) {
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
    Reducer r;
    ASSERT_TRUE(GetReducer(type, op, &r).ok());
    ASSERT_EQ(r.elem_size, sizeof(T));
    for (size_t n : {0ul, 1ul, 3ul, 31ul, 32ul, 33ul, 127ul, 1000ul, 4099ul}) {
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

TEST(ReduceKernels, UnalignedBuffersWork) {
  Reducer r;
  ASSERT_TRUE(GetReducer(DataType::kFloat32, RedOp::kSum, &r).ok());
  std::vector<char> raw(4 * 1001 + 3);
  float* a = reinterpret_cast<float*>(raw.data() + 1);  // deliberately misaligned
  std::vector<float> b(1000, 2.0f), dst(1000);
  for (int i = 0; i < 1000; ++i) {
    float v = static_cast<float>(i);
    std::memcpy(reinterpret_cast<char*>(a) + 4 * i, &v, 4);
  }
  r.fn(dst.data(), a, b.data(), 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(dst[i], i + 2.0f);
}

TEST(ReduceKernels, MaxAndMinPropagateNanFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
    Reducer r;
    ASSERT_TRUE(GetReducer(DataType::kFloat32, op, &r).ok());
    std::vector<float> a(100, 1.0f), b(100, 2.0f), dst(100);
    a[3] = nan;   // vector body, left
    b[40] = nan;  // vector body, right
    a[97] = nan;  // scalar tail, left
    b[99] = nan;  // scalar tail, right
    r.fn(dst.data(), a.data(), b.data(), 100);
    for (int i : {3, 40, 97, 99}) EXPECT_TRUE(std::isnan(dst[i])) << "index " << i;
    EXPECT_EQ(dst[0], op == RedOp::kMax ? 2.0f : 1.0f);
  }
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
