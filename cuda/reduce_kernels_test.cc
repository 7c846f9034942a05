// The device kernels: argument checks and the no-driver answer (run here), and on a GPU
// (skipped here with "skipped: no GPU") every datatype x operator, aligned and unaligned,
// against the host kernels (elementwise/reduce_kernels.h, elementwise/elementwise.h).
#include "cuda/reduce_kernels.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "elementwise/elementwise.h"
#include "elementwise/reduce_kernels.h"
#include "cuda/gpu_test.h"
#include "gtest/gtest.h"

namespace tessera {
namespace cuda {
namespace {

const DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
                           DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
                           DataType::kFloat64, DataType::kBfloat16};
const RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

// ---- Without a GPU ----------------------------------------------------------------------

TEST(ReduceKernelArguments, AreCheckedBeforeAnyCudaCall) {
  alignas(16) float x[8] = {};
  EXPECT_EQ(LaunchReduce(DataType::kFloat32, RedOp::kAvg, x, x, x, 8, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(LaunchReduce(DataType::kFloat32, static_cast<RedOp>(9), x, x, x, 8, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(LaunchReduce(DataType::kFloat8e4m3, RedOp::kSum, x, x, x, 8, nullptr).code(), Code::kInvalidArgument);
  const Status misaligned =
      LaunchReduce(DataType::kFloat32, RedOp::kSum, x, reinterpret_cast<char*>(x) + 1, x, 4, nullptr);
  EXPECT_EQ(misaligned.code(), Code::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("not aligned"), std::string::npos) << misaligned.message();
  for (DataType t : kTypes) EXPECT_TRUE(LaunchReduce(t, RedOp::kSum, x, x, x, 0, nullptr).ok()) << DataTypeName(t);
  EXPECT_EQ(LaunchWidenHalf(DataType::kFloat32, x, x, 4, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(LaunchNarrowHalf(DataType::kInt8, x, x, 4, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(LaunchScale(DataType::kFloat32, nullptr, false, x, x, 4, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(LaunchDivide(DataType::kInt32, x, 4, -2, nullptr).code(), Code::kInvalidArgument);
}

TEST(NoDriver, LaunchersAnswerCudaErrorWithoutCrashing) {
  TESSERA_SKIP_WITH_GPU();
  alignas(16) float x[8] = {};
  const Status s = LaunchReduce(DataType::kFloat32, RedOp::kSum, x, x, x, 8, nullptr);
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_EQ(s.message().rfind("LaunchReduce: no usable CUDA", 0), 0u) << s.message();
  EXPECT_EQ(LaunchWidenHalf(DataType::kFloat16, x, x, 4, nullptr).code(), Code::kCudaError);
  EXPECT_EQ(LaunchNarrowHalf(DataType::kBfloat16, x, x, 4, nullptr).code(), Code::kCudaError);
  const float two = 2;
  EXPECT_EQ(LaunchScale(DataType::kFloat32, &two, false, x, x, 4, nullptr).code(), Code::kCudaError);
  EXPECT_EQ(LaunchDivide(DataType::kFloat32, x, 4, 2, nullptr).code(), Code::kCudaError);
  const Status load = LoadKernels();
  EXPECT_EQ(load.code(), Code::kCudaError);
  EXPECT_EQ(load.message().rfind("LoadKernels: no usable CUDA", 0), 0u) << load.message();
}

// ---- On a GPU ------------------------------------------------------------------------------

// Random bytes; floating types get ordinary values with NaN, infinities and signed zeros
// sprinkled in.
std::vector<char> RandomData(DataType type, size_t count, std::mt19937* rng) {
  const size_t es = SizeOf(type);
  std::vector<char> data(count * es);
  for (char& c : data) c = static_cast<char>((*rng)());
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  for (size_t i = 0; i < count; ++i) {
    const float v = (*rng)() % 8 == 0 ? specials[(*rng)() % 5] : static_cast<float>(static_cast<int>((*rng)() % 2001) - 1000) / 7;
    char* at = data.data() + i * es;
    if (type == DataType::kFloat32) std::memcpy(at, &v, 4);
    if (type == DataType::kFloat64) {
      const double d = v;
      std::memcpy(at, &d, 8);
    }
    if (type == DataType::kFloat16 || type == DataType::kBfloat16) {
      const uint16_t h = type == DataType::kFloat16 ? FloatToHalf(v) : FloatToBfloat16(v);
      std::memcpy(at, &h, 2);
    }
  }
  return data;
}

bool IsNan(DataType type, const char* p) {
  if (type == DataType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  if (type == DataType::kFloat64) {
    double d;
    std::memcpy(&d, p, 8);
    return std::isnan(d);
  }
  if (IsHalf(type)) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return std::isnan(type == DataType::kFloat16 ? HalfToFloat(h) : Bfloat16ToFloat(h));
  }
  return false;
}

// Equal bits, or both NaN (payloads may differ).
void ExpectSameElements(DataType type, const std::vector<char>& want, const std::vector<char>& got, const std::string& what) {
  const size_t es = SizeOf(type);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size() / es; ++i) {
    const char* w = want.data() + i * es;
    const char* g = got.data() + i * es;
    if (IsNan(type, w) && IsNan(type, g)) continue;
    ASSERT_EQ(std::memcmp(w, g, es), 0) << what << ": element " << i;
  }
}

// The host's answer: its kernel, or for the half types widen, reduce in float32, narrow.
std::vector<char> HostReduce(DataType type, RedOp op, const std::vector<char>& a, const std::vector<char>& b) {
  std::vector<char> out(a.size());
  const size_t count = a.size() / SizeOf(type);
  Reducer r;
  if (!IsHalf(type)) {
    EXPECT_TRUE(GetReducer(type, op, &r).ok());
    r.fn(out.data(), a.data(), b.data(), count);
    return out;
  }
  std::vector<float> fa(count), fb(count);
  WidenHalf(type, a.data(), fa.data(), count);
  WidenHalf(type, b.data(), fb.data(), count);
  EXPECT_TRUE(GetReducer(DataType::kFloat32, op, &r).ok());
  r.fn(fa.data(), fa.data(), fb.data(), count);
  NarrowHalf(type, fa.data(), out.data(), count);
  return out;
}

struct DeviceBytes {
  explicit DeviceBytes(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes + 64), cudaSuccess); }
  ~DeviceBytes() { cudaFree(p); }
  char* at(size_t offset) const { return static_cast<char*>(p) + offset; }
  void* p = nullptr;
};

// Every kernel loads (lazy loading's first launch would otherwise load it; see LoadKernels).
TEST(Gpu, EveryKernelLoads) {
  TESSERA_SKIP_WITHOUT_GPU();
  const Status s = LoadKernels();
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(Gpu, ReduceMatchesTheHostKernelsForEveryTypeAndOp) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (DataType type : kTypes) {
    const size_t es = SizeOf(type);
    for (RedOp op : kOps) {
      for (size_t count : {1, 3, 17, 1000, 4099}) {
        // Offsets in elements of a, b and dst: aligned, equally unaligned (head + packs +
        // tail) and differently unaligned (one element at a time).
        for (const auto& off : std::vector<std::array<size_t, 3>>{{0, 0, 0}, {1, 1, 1}, {0, 1, 2}}) {
          const std::string what = std::string(DataTypeName(type)) + " " + RedOpName(op) + " count " +
                                   std::to_string(count) + " offsets " + std::to_string(off[0]) + "," +
                                   std::to_string(off[1]) + "," + std::to_string(off[2]);
          const std::vector<char> a = RandomData(type, count, &rng), b = RandomData(type, count, &rng);
          DeviceBytes da(a.size()), db(b.size()), dd(a.size());
          ASSERT_EQ(cudaMemcpy(da.at(off[0] * es), a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(db.at(off[1] * es), b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
          const Status s = LaunchReduce(type, op, dd.at(off[2] * es), da.at(off[0] * es), db.at(off[1] * es), count, nullptr);
          ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
          std::vector<char> got(a.size());
          ASSERT_EQ(cudaMemcpy(got.data(), dd.at(off[2] * es), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          ExpectSameElements(type, HostReduce(type, op, a, b), got, what);
          // In place: dst == a.
          ASSERT_TRUE(LaunchReduce(type, op, da.at(off[0] * es), da.at(off[0] * es), db.at(off[1] * es), count, nullptr).ok());
          ASSERT_EQ(cudaMemcpy(got.data(), da.at(off[0] * es), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          ExpectSameElements(type, HostReduce(type, op, a, b), got, what + " in place");
        }
      }
    }
  }
}

TEST(Gpu, HalfConversionsScaleAndDivideMatchTheHost) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const size_t count = 3001;
  for (DataType type : kTypes) {
    const std::string name = DataTypeName(type);
    const std::vector<char> src = RandomData(type, count, &rng);
    const size_t es = SizeOf(type);
    DeviceBytes d_src(src.size()), d_out(count * 8), d_scalar(8);
    ASSERT_EQ(cudaMemcpy(d_src.p, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
    // Scaling by a scalar of the type, read from host memory and from device memory.
    const std::vector<char> scalar = RandomData(type, 1, &rng);
    ASSERT_EQ(cudaMemcpy(d_scalar.p, scalar.data(), es, cudaMemcpyHostToDevice), cudaSuccess);
    const size_t out_es = IsHalf(type) ? 4 : es;
    std::vector<char> want(count * out_es);
    if (IsHalf(type)) {
      std::vector<float> wide(count);
      WidenHalf(type, src.data(), wide.data(), count);
      float s;
      WidenHalf(type, scalar.data(), &s, 1);
      ScaleArray(DataType::kFloat32, &s, wide.data(), want.data(), count);
    } else {
      ScaleArray(type, scalar.data(), src.data(), want.data(), count);
    }
    for (bool on_device : {false, true}) {
      const void* sp = on_device ? d_scalar.p : static_cast<const void*>(scalar.data());
      ASSERT_TRUE(LaunchScale(type, sp, on_device, d_src.p, d_out.p, count, nullptr).ok()) << name;
      std::vector<char> got(want.size());
      ASSERT_EQ(cudaMemcpy(got.data(), d_out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ExpectSameElements(IsHalf(type) ? DataType::kFloat32 : type, want, got, name + " scale");
    }
    // Division by 3 (and by 0 for integers: unchanged).
    for (int divisor : {3, 0}) {
      if (divisor == 0 && (type == DataType::kFloat32 || type == DataType::kFloat64 || IsHalf(type))) continue;
      std::vector<char> expect = src;
      if (IsHalf(type)) {
        std::vector<float> wide(count);
        WidenHalf(type, src.data(), wide.data(), count);
        DivideArray(DataType::kFloat32, wide.data(), count, divisor);
        NarrowHalf(type, wide.data(), expect.data(), count);
      } else {
        DivideArray(type, expect.data(), count, divisor);
      }
      ASSERT_EQ(cudaMemcpy(d_out.p, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE(LaunchDivide(type, d_out.p, count, divisor, nullptr).ok()) << name;
      std::vector<char> got(src.size());
      ASSERT_EQ(cudaMemcpy(got.data(), d_out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ExpectSameElements(type, expect, got, name + " divide by " + std::to_string(divisor));
    }
    if (!IsHalf(type)) continue;
    // Widening is exact; narrowing rounds to nearest even like the host.
    std::vector<float> wide(count);
    WidenHalf(type, src.data(), wide.data(), count);
    ASSERT_TRUE(LaunchWidenHalf(type, d_src.p, static_cast<float*>(d_out.p), count, nullptr).ok());
    std::vector<char> got(count * 4);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<char> want_wide(count * 4);
    std::memcpy(want_wide.data(), wide.data(), want_wide.size());
    ExpectSameElements(DataType::kFloat32, want_wide, got, name + " widen");
    for (float& f : wide) f *= 1.001f;  // values between half steps
    std::vector<char> narrow(count * 2);
    NarrowHalf(type, wide.data(), narrow.data(), count);
    ASSERT_EQ(cudaMemcpy(d_out.p, wide.data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE(LaunchNarrowHalf(type, static_cast<const float*>(d_out.p), d_src.p, count, nullptr).ok());
    std::vector<char> got_narrow(count * 2);
    ASSERT_EQ(cudaMemcpy(got_narrow.data(), d_src.p, got_narrow.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ExpectSameElements(type, narrow, got_narrow, name + " narrow");
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace cuda
}  // namespace tessera
