// Google Benchmark of the element-wise kernels beside memcpy: every reduction (type x op),
// the half-precision conversions and reducers, PreMulSum's scaling, avg's division, and a
// fused widen-and-reduce, deterministic mode's grid conversions (fixed_point.h), on
// buffers of 4 KiB, 256 KiB, 8 MiB and 64 MiB.
//
// What the figures mean (docs/kernels.md):
// - A kernel's rate is the bytes it must move per second: every input byte read once plus
//   every output byte written once (dst = a + b over n bytes moves 3n; a float16 ->
//   float32 widening of c values moves 2c + 4c).
// - memcpy's rate counts the same way (2n for n bytes). It copies the kernel's output size
//   between the kernel's own buffers, interleaved with the kernel in every iteration, so
//   both see the same caches and the same neighbours on a shared machine.
// - pct_of_memcpy = kernel rate / memcpy rate: how close the kernel runs to the memory
//   traffic memcpy achieves. Size labels are the kernel's output buffer (float32 for the
//   half conversions' wide side).
//
//   bazel run -c opt //collectives:kernels_bench -- --benchmark_repetitions=3 --markdown
// prints Google Benchmark's table, then (with --markdown) one markdown table per group;
// with repetitions, each cell is the repetition with the median ratio.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/types.h"
#include "collectives/fixed_point.h"
#include "elementwise/elementwise.h"
#include "elementwise/reduce_kernels.h"

#include <immintrin.h>
#include <unistd.h>

namespace tessera {
namespace {

constexpr size_t kSizes[] = {4 << 10, 256 << 10, 8 << 20, 64 << 20};
constexpr size_t kMaxBytes = 64 << 20;

std::string SizeName(size_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

// Three buffers of kMaxBytes, allocated and faulted in once, 64-byte aligned.
struct Buffers {
  char* a;
  char* b;
  char* dst;
};

const Buffers& Pool() {
  static const Buffers pool = [] {
    Buffers p;
    for (char** buf : {&p.a, &p.b, &p.dst}) {
      *buf = static_cast<char*>(std::aligned_alloc(64, kMaxBytes));
      std::memset(*buf, 0, kMaxBytes);
    }
    return p;
  }();
  return pool;
}

// Values that keep every op in the normal range (no denormals, no overflow to inf).
template <typename T>
void FillInputs(size_t count) {
  T* a = reinterpret_cast<T*>(Pool().a);
  T* b = reinterpret_cast<T*>(Pool().b);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<T>(std::is_floating_point<T>::value ? 1.0 + (i % 97) / 128.0 : static_cast<double>(i % 7));
    b[i] = static_cast<T>(std::is_floating_point<T>::value ? 1.5 - (i % 89) / 256.0 : static_cast<double>(i % 5 + 1));
  }
}

// Normal float32 values in a and b, scaled by 2^(block % 40 - 20) per block of kGridBlock,
// one in ten zero: gradient-like, where a few blocks hold a value far below the largest.
void FillNormalInputs(size_t count) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  float* a = reinterpret_cast<float*>(Pool().a);
  float* b = reinterpret_cast<float*>(Pool().b);
  for (size_t i = 0; i < count; ++i) {
    const float scale = std::ldexp(1.0f, static_cast<int>(i / kGridBlock % 40) - 20);
    a[i] = rng() % 10 == 0 ? 0.0f : normal(rng) * scale;
    b[i] = rng() % 10 == 0 ? 0.0f : normal(rng) * scale;
  }
}

void FillHalfInputs(DataType type, size_t count) {
  uint16_t* a = reinterpret_cast<uint16_t*>(Pool().a);
  for (size_t i = 0; i < count; ++i) {
    const float v = 1.0f + static_cast<float>(i % 97) / 128.0f;
    a[i] = type == DataType::kFloat16 ? FloatToHalf(v) : FloatToBfloat16(v);
  }
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Runs `kernel` and memcpy of out_bytes (pool a -> pool dst) alternately, timing each;
// the benchmark's time is the kernel's. `moved` is the kernel's bytes moved per call.
// Small buffers repeat the kernel (at most max_reps times) to time ~1 MiB of output.
void MeasureBesideMemcpy(benchmark::State& state, size_t out_bytes, size_t moved, const std::function<void()>& kernel,
                         size_t max_reps = 256) {
  using Clock = std::chrono::steady_clock;
  const size_t reps = std::min(max_reps, std::max<size_t>(1, (1 << 20) / out_bytes));
  double kernel_s = 0, memcpy_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (size_t r = 0; r < reps; ++r) kernel();
    const auto t1 = Clock::now();
    for (size_t r = 0; r < reps; ++r) {
      std::memcpy(Pool().dst, Pool().a, out_bytes);
      benchmark::ClobberMemory();
    }
    const auto t2 = Clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    kernel_s += Seconds(t1 - t0);
    memcpy_s += Seconds(t2 - t1);
  }
  const double calls = static_cast<double>(state.iterations()) * static_cast<double>(reps);
  const double kernel_rate = calls * static_cast<double>(moved) / kernel_s;
  const double memcpy_rate = calls * 2.0 * static_cast<double>(out_bytes) / memcpy_s;
  state.SetBytesProcessed(static_cast<int64_t>(calls * static_cast<double>(moved)));
  state.counters["kernel_GBps"] = kernel_rate / 1e9;
  state.counters["memcpy_GBps"] = memcpy_rate / 1e9;
  state.counters["output_GBps"] = calls * static_cast<double>(out_bytes) / kernel_s / 1e9;
  state.counters["pct_of_memcpy"] = 100.0 * kernel_rate / memcpy_rate;
}

// ---- Registration. Each benchmark is named group/kernel/size; --markdown groups by
// the first part.

struct TypeInfo {
  DataType type;
  void (*fill)(size_t count);
};

const TypeInfo kReduceTypes[] = {
    {DataType::kInt8, &FillInputs<int8_t>},     {DataType::kUint8, &FillInputs<uint8_t>},
    {DataType::kInt32, &FillInputs<int32_t>},   {DataType::kUint32, &FillInputs<uint32_t>},
    {DataType::kInt64, &FillInputs<int64_t>},   {DataType::kUint64, &FillInputs<uint64_t>},
    {DataType::kFloat32, &FillInputs<float>},   {DataType::kFloat64, &FillInputs<double>},
};
constexpr RedOp kReduceOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

void Register(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& state) { fn(state); })
      ->UseManualTime()
      ->MinTime(0.2)
      ->Unit(benchmark::kMicrosecond);
}

// dst = a op b with the kernel GetReducer chooses.
void RegisterReductions() {
  for (const TypeInfo& t : kReduceTypes) {
    for (RedOp op : kReduceOps) {
      for (size_t bytes : kSizes) {
        Register(std::string("reduce/") + DataTypeName(t.type) + " " + RedOpName(op) + "/" + SizeName(bytes),
                 [t, op, bytes](benchmark::State& state) {
                   Reducer r;
                   if (!GetReducer(t.type, op, &r).ok()) return state.SkipWithError("no reducer");
                   t.fill(bytes / r.elem_size);
                   MeasureBesideMemcpy(state, bytes, 3 * bytes,
                                       [&] { r.fn(Pool().dst, Pool().a, Pool().b, bytes / r.elem_size); });
                 });
      }
    }
  }
}

// The same reductions on each instruction set this CPU runs, for a few representative
// (type, op) pairs: what the AVX2 and AVX-512 compilations buy.
void RegisterReductionIsas() {
  const std::pair<DataType, RedOp> kCases[] = {
      {DataType::kFloat32, RedOp::kSum}, {DataType::kFloat32, RedOp::kMax},
      {DataType::kFloat64, RedOp::kSum}, {DataType::kInt8, RedOp::kSum}, {DataType::kInt64, RedOp::kProd}};
  for (const auto& c : kCases) {
    for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) {
      const SimdIsa isa = static_cast<SimdIsa>(i);
      for (size_t bytes : kSizes) {
        const std::string name =
            std::string(DataTypeName(c.first)) + " " + RedOpName(c.second) + " " + SimdIsaName(isa);
        Register("reduce_isa/" + name + "/" + SizeName(bytes),
                 [c, isa, bytes](benchmark::State& state) {
                   Reducer r;
                   if (!GetReducerForIsa(c.first, c.second, isa, &r).ok()) return state.SkipWithError("no reducer");
                   for (const TypeInfo& t : kReduceTypes) {
                     if (t.type == c.first) t.fill(bytes / r.elem_size);
                   }
                   MeasureBesideMemcpy(state, bytes, 3 * bytes,
                                       [&] { r.fn(Pool().dst, Pool().a, Pool().b, bytes / r.elem_size); });
                 });
      }
    }
  }
}

// The scalar functions one element at a time, for comparison with the vector
// implementations.
void WidenScalarLoop(DataType type, const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = type == DataType::kFloat16 ? HalfToFloat(in[i]) : Bfloat16ToFloat(in[i]);
}

void NarrowScalarLoop(DataType type, const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = type == DataType::kFloat16 ? FloatToHalf(in[i]) : FloatToBfloat16(in[i]);
}

// float16/bfloat16 <-> float32. Sizes are the float32 side's bytes.
void RegisterConversions() {
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    std::vector<std::pair<std::string, int>> impls = {{"scalar-loop", -1}};
    for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) {
      impls.push_back({SimdIsaName(static_cast<SimdIsa>(i)), i});
    }
    for (const auto& impl : impls) {
      for (size_t bytes : kSizes) {
        const size_t count = bytes / 4;
        Register(std::string("convert/widen ") + DataTypeName(type) + " " + impl.first + "/" + SizeName(bytes),
                 [type, impl, bytes, count](benchmark::State& state) {
                   FillHalfInputs(type, count);
                   const auto* in = reinterpret_cast<const uint16_t*>(Pool().a);
                   float* out = reinterpret_cast<float*>(Pool().dst);
                   MeasureBesideMemcpy(state, bytes, 6 * count, [&] {
                     if (impl.second < 0) {
                       WidenScalarLoop(type, in, out, count);
                     } else {
                       WidenHalfWith(static_cast<SimdIsa>(impl.second), type, in, out, count);
                     }
                   });
                 });
        Register(std::string("convert/narrow ") + DataTypeName(type) + " " + impl.first + "/" + SizeName(bytes),
                 [type, impl, bytes, count](benchmark::State& state) {
                   FillInputs<float>(count);
                   const auto* in = reinterpret_cast<const float*>(Pool().a);
                   auto* out = reinterpret_cast<uint16_t*>(Pool().dst);
                   // The output is half the size: memcpy copies the same 2 bytes per value.
                   MeasureBesideMemcpy(state, bytes / 2, 6 * count, [&] {
                     if (impl.second < 0) {
                       NarrowScalarLoop(type, in, out, count);
                     } else {
                       NarrowHalfWith(static_cast<SimdIsa>(impl.second), type, in, out, count);
                     }
                   });
                 });
      }
    }
  }
}

// The half-precision reducers (TESSERA_HALF_WIRE=half): dst = round(float(a) op
// float(b)) on float16/bfloat16 arrays, as GetHalfReducer returns them, every type and
// op. Sizes are the output's bytes; a, b and dst are all half arrays (3n moved).
void FillHalfPair(DataType type, size_t count) {
  uint16_t* a = reinterpret_cast<uint16_t*>(Pool().a);
  uint16_t* b = reinterpret_cast<uint16_t*>(Pool().b);
  for (size_t i = 0; i < count; ++i) {
    const float x = 1.0f + static_cast<float>(i % 97) / 128.0f;
    const float y = 1.5f - static_cast<float>(i % 89) / 256.0f;
    a[i] = type == DataType::kFloat16 ? FloatToHalf(x) : FloatToBfloat16(x);
    b[i] = type == DataType::kFloat16 ? FloatToHalf(y) : FloatToBfloat16(y);
  }
}

void RegisterHalfReducer(const std::string& name, DataType type, RedOp op, SimdIsa isa) {
  for (size_t bytes : kSizes) {
    Register(name + "/" + SizeName(bytes), [type, op, isa, bytes](benchmark::State& state) {
      Reducer r;
      if (!GetHalfReducerWith(isa, type, op, &r).ok()) return state.SkipWithError("no half reducer");
      FillHalfPair(type, bytes / 2);
      MeasureBesideMemcpy(state, bytes, 3 * bytes, [&] { r.fn(Pool().dst, Pool().a, Pool().b, bytes / 2); });
    });
  }
}

// Every type and op as GetHalfReducer returns them, then sum and max (the shapes without
// and with the NaN test) on each implementation this CPU runs.
void RegisterHalfReducers() {
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    for (RedOp op : kReduceOps) {
      RegisterHalfReducer(std::string("half_reduce/") + DataTypeName(type) + " " + RedOpName(op), type, op,
                          PreferredElementwiseIsa());
    }
  }
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    for (RedOp op : {RedOp::kSum, RedOp::kMax}) {
      for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) {
        const SimdIsa isa = static_cast<SimdIsa>(i);
        RegisterHalfReducer(std::string("half_reduce_isa/") + DataTypeName(type) + " " + RedOpName(op) + " " +
                                SimdIsaName(isa),
                            type, op, isa);
      }
    }
  }
}

// PreMulSum's dst = s * src and avg's in-place division, every type.
void RegisterScaleAndDivide() {
  for (const TypeInfo& t : kReduceTypes) {
    const size_t es = SizeOf(t.type);
    for (size_t bytes : kSizes) {
      Register(std::string("scale_divide/scale ") + DataTypeName(t.type) + "/" + SizeName(bytes),
               [t, es, bytes](benchmark::State& state) {
                 t.fill(bytes / es);
                 alignas(8) unsigned char scalar[8];
                 std::memcpy(scalar, Pool().b, es);
                 MeasureBesideMemcpy(state, bytes, 2 * bytes,
                                     [&] { ScaleArray(t.type, scalar, Pool().a, Pool().dst, bytes / es); });
               });
      Register(std::string("scale_divide/divide ") + DataTypeName(t.type) + "/" + SizeName(bytes),
               [t, es, bytes](benchmark::State& state) {
                 t.fill(bytes / es);
                 // In place on dst, which each interleaved memcpy refreshes from a. At most
                 // 64 divisions by 3 in between keep floats normal (3^64 < 2^126).
                 std::memcpy(Pool().dst, Pool().a, bytes);
                 MeasureBesideMemcpy(
                     state, bytes, 2 * bytes, [&] { DivideArray(t.type, Pool().dst, bytes / es, 3); }, 64);
               });
    }
  }
}

// ---- Deterministic mode's passes (fixed_point.h), on each instruction set: the block
// keys (reads the input), to the grid (input -> grid values) and back (grid values ->
// output), and the two-input sum of all three in one pass (what two ranks' exchange runs;
// it reports the traffic of two inputs and one output). Sizes are the input's bytes; the
// grid values of float32 take twice as many.
void RegisterGrid() {
  for (DataType type : {DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    GridFormat f;
    GridFormatOf(type, &f);
    const size_t es = SizeOf(type), wb = f.wire_bytes();
    for (int i = 0; i <= static_cast<int>(SupportedSimdIsa()); ++i) {
      const SimdIsa isa = static_cast<SimdIsa>(i);
      for (size_t bytes : kSizes) {
        const size_t count = bytes / es;
        if (count * wb > kMaxBytes) continue;
        const std::string name = std::string(DataTypeName(type)) + " " + SimdIsaName(isa);
        auto setup = [type, count] {
          if (type == DataType::kFloat32) FillInputs<float>(count);
          if (type == DataType::kFloat64) FillInputs<double>(count);
          if (type == DataType::kBfloat16) FillHalfInputs(type, count);
          static std::vector<int32_t> keys;
          keys.assign(GridBlocks(count), 0);
          MaxGridKeys(type, Pool().a, count, keys.data());
          return keys.data();
        };
        Register("grid/keys " + name + "/" + SizeName(bytes), [=](benchmark::State& state) {
          std::vector<int32_t> keys(GridBlocks(count));
          setup();
          MeasureBesideMemcpy(state, bytes, bytes, [&] { MaxGridKeysWith(isa, type, Pool().a, count, keys.data()); });
        });
        Register("grid/to " + name + "/" + SizeName(bytes), [=](benchmark::State& state) {
          const int32_t* keys = setup();
          MeasureBesideMemcpy(state, count * wb, bytes + count * wb,
                              [&] { ToGridWith(isa, type, Pool().a, count, 0, keys, Pool().b, false); });
        });
        Register("grid/from " + name + "/" + SizeName(bytes), [=](benchmark::State& state) {
          const int32_t* keys = setup();
          ToGridWith(isa, type, Pool().a, count, 0, keys, Pool().b, false);
          MeasureBesideMemcpy(state, bytes, bytes + count * wb,
                              [&] { FromGridWith(isa, type, Pool().b, count, 0, keys, Pool().dst); });
        });
        Register("grid/pair sum " + name + "/" + SizeName(bytes), [=](benchmark::State& state) {
          setup();
          const void* inputs[2] = {Pool().a, Pool().a};
          MeasureBesideMemcpy(state, bytes, 3 * bytes, [&] { GridSumWith(isa, type, inputs, 2, count, Pool().dst); });
        });
        if (type != DataType::kFloat32) continue;
        // Gradient-like inputs: normal values, each block's own scale, one in ten zero.
        Register("grid/pair sum normal " + name + "/" + SizeName(bytes), [=](benchmark::State& state) {
          FillNormalInputs(count);
          const void* inputs[2] = {Pool().a, Pool().b};
          MeasureBesideMemcpy(state, bytes, 3 * bytes, [&] { GridSumWith(isa, type, inputs, 2, count, Pool().dst); });
        });
      }
    }
  }
}

// ---- The fused experiment: dst(float32) = widen(a: float16) + b(float32) in one pass,
// against WidenHalf into a scratch buffer and then the float32 sum kernel. Both report
// the traffic the job needs (2c + 4c + 4c for c values), so their rates compare directly.

__attribute__((target("avx2,f16c"))) void FusedWidenSum(const uint16_t* a, const float* b, float* dst, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + 8)));
    _mm256_storeu_ps(dst + i, _mm256_add_ps(x0, _mm256_loadu_ps(b + i)));
    _mm256_storeu_ps(dst + i + 8, _mm256_add_ps(x1, _mm256_loadu_ps(b + i + 8)));
  }
  for (; i < count; ++i) dst[i] = HalfToFloat(a[i]) + b[i];
}

// dst(float16) = narrow(a + b), the last step fused with the final rounding.
__attribute__((target("avx2,f16c"))) void FusedSumNarrow(const float* a, const float* b, uint16_t* dst, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256 s0 = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 s1 = _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(s0, _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), _mm256_cvtps_ph(s1, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < count; ++i) dst[i] = FloatToHalf(a[i] + b[i]);
}

void RegisterFused() {
  if (SupportedSimdIsa() < SimdIsa::kAvx2) return;
  static std::vector<float> scratch(kMaxBytes / 4);
  for (size_t bytes : kSizes) {
    const size_t count = bytes / 4;
    Register("fused/widen+sum float16 separate/" + SizeName(bytes), [bytes, count](benchmark::State& state) {
      FillInputs<float>(count);  // b
      FillHalfInputs(DataType::kFloat16, count);  // a
      Reducer sum;
      GetReducer(DataType::kFloat32, RedOp::kSum, &sum);
      MeasureBesideMemcpy(state, bytes, 10 * count, [&] {
        WidenHalf(DataType::kFloat16, Pool().a, scratch.data(), count);
        sum.fn(Pool().dst, scratch.data(), Pool().b, count);
      });
    });
    Register("fused/widen+sum float16 fused/" + SizeName(bytes), [bytes, count](benchmark::State& state) {
      FillInputs<float>(count);
      FillHalfInputs(DataType::kFloat16, count);
      MeasureBesideMemcpy(state, bytes, 10 * count, [&] {
        FusedWidenSum(reinterpret_cast<const uint16_t*>(Pool().a), reinterpret_cast<const float*>(Pool().b),
                      reinterpret_cast<float*>(Pool().dst), count);
      });
    });
    Register("fused/sum+narrow float16 separate/" + SizeName(bytes), [bytes, count](benchmark::State& state) {
      FillInputs<float>(count);
      Reducer sum;
      GetReducer(DataType::kFloat32, RedOp::kSum, &sum);
      MeasureBesideMemcpy(state, bytes / 2, 10 * count, [&] {
        sum.fn(scratch.data(), Pool().a, Pool().b, count);
        NarrowHalf(DataType::kFloat16, scratch.data(), Pool().dst, count);
      });
    });
    Register("fused/sum+narrow float16 fused/" + SizeName(bytes), [bytes, count](benchmark::State& state) {
      FillInputs<float>(count);
      MeasureBesideMemcpy(state, bytes / 2, 10 * count, [&] {
        FusedSumNarrow(reinterpret_cast<const float*>(Pool().a), reinterpret_cast<const float*>(Pool().b),
                       reinterpret_cast<uint16_t*>(Pool().dst), count);
      });
    });
  }
}

// ---- --markdown: one table per group, a row per kernel, a column per size.

class MarkdownCollector : public benchmark::ConsoleReporter {
 public:
  MarkdownCollector() : ConsoleReporter(isatty(1) ? OO_ColorTabular : OO_Tabular) {}

  // Keeps every repetition's figures; the table shows, for each cell, the repetition with
  // the median ratio (its own kernel and memcpy rates, so the cell is consistent).
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      // "group/row/size/min_time:.../manual_time"
      const std::string name = run.benchmark_name();
      const size_t first = name.find('/');
      const size_t second = first == std::string::npos ? first : name.find('/', first + 1);
      const size_t third = second == std::string::npos ? second : name.find('/', second + 1);
      if (third == std::string::npos) continue;
      Cell cell;
      cell.kernel = run.counters.at("kernel_GBps");
      cell.memcpy = run.counters.at("memcpy_GBps");
      cell.pct = run.counters.at("pct_of_memcpy");
      const std::string group = name.substr(0, first);
      const std::string row = name.substr(first + 1, second - first - 1);
      const std::string size = name.substr(second + 1, third - second - 1);
      if (std::find(groups_.begin(), groups_.end(), group) == groups_.end()) groups_.push_back(group);
      if (rows_[group].count(row) == 0) order_[group].push_back(row);
      rows_[group][row][size].push_back(cell);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void PrintMarkdown() const {
    std::vector<std::string> sizes;
    for (size_t bytes : kSizes) sizes.push_back(SizeName(bytes));
    for (const std::string& group : groups_) {
      std::printf("\n### %s\n\nkernel GB/s / memcpy GB/s (kernel as %% of memcpy)\n\n| kernel |", group.c_str());
      for (const auto& s : sizes) std::printf(" %s |", s.c_str());
      std::printf("\n|---|");
      for (size_t i = 0; i < sizes.size(); ++i) std::printf("---|");
      std::printf("\n");
      for (const std::string& row : order_.at(group)) {
        std::printf("| %s |", row.c_str());
        const auto& cells = rows_.at(group).at(row);
        for (const auto& s : sizes) {
          auto it = cells.find(s);
          if (it == cells.end()) {
            std::printf(" |");
          } else {
            std::vector<Cell> reps = it->second;
            std::sort(reps.begin(), reps.end(), [](const Cell& x, const Cell& y) { return x.pct < y.pct; });
            const Cell& median = reps[reps.size() / 2];
            std::printf(" %.1f / %.1f (%.0f%%) |", median.kernel, median.memcpy, median.pct);
          }
        }
        std::printf("\n");
      }
    }
  }

 private:
  struct Cell {
    double kernel = 0, memcpy = 0, pct = 0;
  };
  std::vector<std::string> groups_;
  std::map<std::string, std::vector<std::string>> order_;
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<Cell>>>> rows_;
};

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  bool markdown = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--markdown") {
      markdown = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  std::printf("kernels: CPU supports %s; reduce uses %s, elementwise %s\n",
              tessera::SimdIsaName(tessera::SupportedSimdIsa()),
              tessera::SimdIsaName(tessera::PreferredKernelIsa()),
              tessera::SimdIsaName(tessera::PreferredElementwiseIsa()));
  tessera::RegisterReductions();
  tessera::RegisterReductionIsas();
  tessera::RegisterConversions();
  tessera::RegisterHalfReducers();
  tessera::RegisterScaleAndDivide();
  tessera::RegisterFused();
  tessera::RegisterGrid();
  tessera::MarkdownCollector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (markdown) reporter.PrintMarkdown();
  benchmark::Shutdown();
  return 0;
}
