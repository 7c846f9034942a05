// Fixed-point grids (fixed_point.h): block keys, conversion to the grid and back.
//
// The work happens in runs of elements that share one block, so that each run has one
// grid exponent and its scale factors are constants of the loop. Every loop body is
// written once on GCC vector extensions and compiled three times, as Portable (16-byte
// vectors, SSE2), Avx2 (32-byte) and Avx512 (64-byte); the scalar tails repeat the same
// operations in the same order, so every element gets the same bits whichever path
// computes it.
//
// The arithmetic, and why it is exact:
//  - Scaling by 2^k is done as two multiplications by 2^(k/2) and 2^(k - k/2), both
//    normal numbers, so no constant is ever subnormal or infinite. Going to the grid the
//    product is exact, or so small that it rounds to zero anyway; coming back the first
//    product is exact and the second rounds once.
//  - round(y), ties to even, is (y + 1.5 * 2^(P-1)) - 1.5 * 2^(P-1) for |y| < 2^(P-2)
//    (every grid value is below 2^(P-H)), with y's sign put back so that -0.3 gives -0.0.
//  - float64's second word: with y = x * 2^-q1 (exact, or too small to matter), y - hi
//    is exact (|y - hi| <= 1/2 and both are multiples of y's ulp), and its rounding on
//    the finer grid q2 = q1 - (P - H + 1) stays below 2^(P-H). Back, the two
//    exact products are added once (for q1 > 0 the sum is formed at scale 1 and then
//    multiplied by 2^q1, so that a product cannot overflow before the addition).
#include "collectives/fixed_point.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "elementwise/elementwise.h"

// Helpers pass vectors by reference or return them from always-inlined functions: no
// vector crosses a call ABI.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera {
namespace {

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")))

// The vector types of kBytes bytes: 16 for the baseline (SSE2's registers, so that
// comparisons and selects stay vector code), 32 for AVX2.
template <size_t kBytes>
struct Vec {
  typedef double D __attribute__((vector_size(kBytes)));
  typedef uint64_t U64 __attribute__((vector_size(kBytes)));
  typedef float F __attribute__((vector_size(kBytes)));
  typedef uint32_t U32 __attribute__((vector_size(kBytes)));
  typedef int32_t I32 __attribute__((vector_size(kBytes)));
  typedef float DF __attribute__((vector_size(kBytes / 2)));  // as many floats as D has doubles
  static constexpr size_t kDoubles = kBytes / 8;
  static constexpr size_t kFloats = kBytes / 4;
};

// What the grid of each type is made of.
struct TypeGrid {
  int bias;       // of the type's exponent field
  int precision;  // P: significand bits of the wire type
  int min_q;      // the type's smallest subnormal is 2^min_q
};

TypeGrid GridOf(DataType type) {
  switch (type) {
    case DataType::kFloat16: return {15, 24, -24};
    case DataType::kBfloat16: return {127, 24, -133};
    case DataType::kFloat32: return {127, 53, -149};
    default: return {1023, 53, -1074};  // float64
  }
}

// q of float64's second word.
int SecondWordExponent(int q1) { return std::max(q1 - (53 - kGridHeadroomBits + 1), -1074); }

// 2^k as two normal factors.
template <typename T>
struct Pow2Pair {
  T first, second;
  explicit Pow2Pair(int k)
      : first(static_cast<T>(std::ldexp(1.0, k / 2))), second(static_cast<T>(std::ldexp(1.0, k - k / 2))) {}
};

// ---- Vector and scalar building blocks.

template <typename To, typename From>
TESSERA_ALWAYS_INLINE To BitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// round(y) to an integer, ties to even, keeping y's sign (also for a zero result), lane
// by lane: V a vector of T, VU the vector of unsigned U of the same shape.
// AVX and AVX-512 round in one instruction (imm 8: to nearest even, no precision
// exception), which gives the same bits as the SSE2 sequence: IEEE roundToIntegral
// keeps the sign, and infinities and NaNs pass through. Inline assembly, because an
// intrinsic cannot be inlined into these target-neutral bodies; 32- and 64-byte vectors
// only occur in the Avx2 and Avx512 compilations.
template <typename V, typename VU, typename T, typename U>
TESSERA_ALWAYS_INLINE V RoundToInteger(const V& y) {
  V r;
  if constexpr (sizeof(V) == 64 && sizeof(T) == 8) {
    asm("vrndscalepd $8, %1, %0" : "=v"(r) : "v"(y));
  } else if constexpr (sizeof(V) == 64) {
    asm("vrndscaleps $8, %1, %0" : "=v"(r) : "v"(y));
  } else if constexpr (sizeof(V) == 32 && sizeof(T) == 8) {
    asm("vroundpd $8, %1, %0" : "=x"(r) : "x"(y));
  } else if constexpr (sizeof(V) == 32) {
    asm("vroundps $8, %1, %0" : "=x"(r) : "x"(y));
  } else {
    constexpr T kMagic = sizeof(T) == 8 ? static_cast<T>(0x1.8p52) : static_cast<T>(0x1.8p23);
    constexpr U kSign = U{1} << (8 * sizeof(U) - 1);
    r = (y + kMagic) - kMagic;
    r = BitCast<V>(BitCast<VU>(r) | (BitCast<VU>(y) & kSign));
  }
  return r;
}

// The same for one value.
TESSERA_ALWAYS_INLINE double RoundScalar(double y) {
  const double r = (y + 0x1.8p52) - 0x1.8p52;
  return BitCast<double>(BitCast<uint64_t>(r) | (BitCast<uint64_t>(y) & (uint64_t{1} << 63)));
}

TESSERA_ALWAYS_INLINE float RoundScalar(float y) {
  const float r = (y + 0x1.8p23f) - 0x1.8p23f;
  return BitCast<float>(BitCast<uint32_t>(r) | (BitCast<uint32_t>(y) & (uint32_t{1} << 31)));
}

template <typename T>
TESSERA_ALWAYS_INLINE T Load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
TESSERA_ALWAYS_INLINE void Store(void* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

// ---- Block keys: the largest exponent field among finite values (I: the raw element
// as a signed integer, which SSE2 and AVX2 compare directly).

// The block key: the largest exponent field among finite values of in[0, n) (an
// infinity's or NaN's all-ones field counts as zero): an AND, a compare, a select and a
// max per vector.
template <typename I, int kShift, I kMask, size_t kBytes>
TESSERA_ALWAYS_INLINE uint32_t BlockKeyBody(const char* in, size_t n) {
  typedef I V __attribute__((vector_size(kBytes)));
  constexpr size_t kLanes = kBytes / sizeof(I);
  V best = V{};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V e = Load<V>(in + i * sizeof(I)) & kMask;
    e = e == kMask ? V{} : e;
    best = e > best ? e : best;
  }
  I largest = 0;
  for (size_t k = 0; k < kLanes; ++k) largest = std::max<I>(largest, best[k]);
  for (; i < n; ++i) {
    const I e = static_cast<I>(Load<I>(in + i * sizeof(I)) & kMask);
    if (e != kMask) largest = std::max(largest, e);
  }
  return static_cast<uint32_t>(largest >> kShift);
}

// ---- To the grid.

// The float32 values at `in` widened to float64. GCC 12 widens 8 floats to a 64-byte
// vector in two halves and a merge; AVX-512 does it in one instruction.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE typename Vec<kBytes>::D WidenFloat32(const char* in) {
  typedef Vec<kBytes> V;
  typename V::D d;
  if constexpr (kBytes == 64) {
    asm("vcvtps2pd %1, %0" : "=v"(d) : "v"(Load<typename V::DF>(in)));
  } else {
    d = __builtin_convertvector(Load<typename V::DF>(in), typename V::D);
  }
  return d;
}

// round(x * 2^-q) of float32 values at `in`, up = 2^-q (exact: a power of two).
template <size_t kBytes>
TESSERA_ALWAYS_INLINE typename Vec<kBytes>::D Float32OnGrid(const char* in, double up) {
  typedef Vec<kBytes> V;
  return RoundToInteger<typename V::D, typename V::U64, double, uint64_t>(WidenFloat32<kBytes>(in) * up);
}

// float32 -> one float64 word: round(x * 2^-q).
template <bool kAdd, size_t kBytes>
TESSERA_ALWAYS_INLINE void Float32ToGridBody(const char* in, size_t n, double up, double* wire) {
  typedef Vec<kBytes> V;
  size_t i = 0;
  for (; i + V::kDoubles <= n; i += V::kDoubles) {
    typename V::D y = Float32OnGrid<kBytes>(in + 4 * i, up);
    if (kAdd) y = Load<typename V::D>(wire + i) + y;
    Store(wire + i, y);
  }
  for (; i < n; ++i) {
    const double y = RoundScalar(static_cast<double>(Load<float>(in + 4 * i)) * up);
    Store(wire + i, kAdd ? Load<double>(wire + i) + y : y);
  }
}

// float16 / bfloat16, already widened to float32 -> one float32 word.
template <bool kAdd, size_t kBytes>
TESSERA_ALWAYS_INLINE void WideHalfToGridBody(const float* x, size_t n, const Pow2Pair<float>& up, float* wire) {
  typedef Vec<kBytes> V;
  size_t i = 0;
  for (; i + V::kFloats <= n; i += V::kFloats) {
    typename V::F y = RoundToInteger<typename V::F, typename V::U32, float, uint32_t>(
        (Load<typename V::F>(x + i) * up.first) * up.second);
    if (kAdd) y = Load<typename V::F>(wire + i) + y;
    Store(wire + i, y);
  }
  for (; i < n; ++i) {
    const float y = RoundScalar((Load<float>(x + i) * up.first) * up.second);
    Store(wire + i, kAdd ? Load<float>(wire + i) + y : y);
  }
}

// (a0, b0, a1, b1, ...) from (a0, a1, ...) and (b0, b1, ...), and back.
template <typename D>
TESSERA_ALWAYS_INLINE void Interleave(const D& a, const D& b, D* w0, D* w1) {
  if constexpr (sizeof(D) == 16) {
    *w0 = __builtin_shufflevector(a, b, 0, 2);
    *w1 = __builtin_shufflevector(a, b, 1, 3);
  } else if constexpr (sizeof(D) == 32) {
    *w0 = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    *w1 = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  } else {
    *w0 = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    *w1 = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
  }
}

template <typename D>
TESSERA_ALWAYS_INLINE void Deinterleave(const D& w0, const D& w1, D* a, D* b) {
  if constexpr (sizeof(D) == 16) {
    *a = __builtin_shufflevector(w0, w1, 0, 2);
    *b = __builtin_shufflevector(w0, w1, 1, 3);
  } else if constexpr (sizeof(D) == 32) {
    *a = __builtin_shufflevector(w0, w1, 0, 2, 4, 6);
    *b = __builtin_shufflevector(w0, w1, 1, 3, 5, 7);
  } else {
    *a = __builtin_shufflevector(w0, w1, 0, 2, 4, 6, 8, 10, 12, 14);
    *b = __builtin_shufflevector(w0, w1, 1, 3, 5, 7, 9, 11, 13, 15);
  }
}

// The scale factors of a float64 run.
struct Float64Scales {
  Pow2Pair<double> up1;  // 2^-q1
  double to_second;      // 2^(q1 - q2), 1 to 2^(P - H + 1)
  explicit Float64Scales(int q1) : up1(-q1), to_second(std::ldexp(1.0, q1 - SecondWordExponent(q1))) {}
};

// float64 -> two float64 words per element: hi = round(y), y = x * 2^-q1, and lo, the
// remainder y - hi (exact) on the finer grid. lo is 0 for infinity and NaN (hi carries
// them).
template <typename D, typename U>
TESSERA_ALWAYS_INLINE void Float64Words(const D& x, const Float64Scales& s, D* hi, D* lo) {
  const D y = (x * s.up1.first) * s.up1.second;
  *hi = RoundToInteger<D, U, double, uint64_t>(y);
  *lo = RoundToInteger<D, U, double, uint64_t>((y - *hi) * s.to_second);
  *lo = (x - x) == D{} ? *lo : D{};
}

template <bool kAdd, size_t kBytes>
TESSERA_ALWAYS_INLINE void Float64ToGridBody(const char* in, size_t n, const Float64Scales& s, double* wire) {
  typedef Vec<kBytes> V;
  typedef typename V::D D;
  constexpr size_t kLanes = V::kDoubles;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    D hi, lo, w0, w1;
    Float64Words<D, typename V::U64>(Load<D>(in + 8 * i), s, &hi, &lo);
    Interleave(hi, lo, &w0, &w1);
    if (kAdd) {
      w0 = Load<D>(wire + 2 * i) + w0;
      w1 = Load<D>(wire + 2 * i + kLanes) + w1;
    }
    Store(wire + 2 * i, w0);
    Store(wire + 2 * i + kLanes, w1);
  }
  for (; i < n; ++i) {
    const double x = Load<double>(in + 8 * i);
    const double y = (x * s.up1.first) * s.up1.second;
    double hi = RoundScalar(y);
    double lo = (x - x) == 0 ? RoundScalar((y - hi) * s.to_second) : 0.0;
    if (kAdd) {
      hi = Load<double>(wire + 2 * i) + hi;
      lo = Load<double>(wire + 2 * i + 1) + lo;
    }
    Store(wire + 2 * i, hi);
    Store(wire + 2 * i + 1, lo);
  }
}

// float32: the grid sum of in[0][i] ... in[k - 1][i] for i < n (one block: up = 2^-q,
// down = 2^q), rounded once to out, in one pass: what Float32ToGrid and GridToFloat32
// compute, without storing the grid values.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE void Float32GridSumBody(const char* const* in, size_t k, size_t n, double up, double down,
                                              char* out) {
  typedef Vec<kBytes> V;
  typedef typename V::D D;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  size_t i = 0;
  for (; i + V::kDoubles <= n; i += V::kDoubles) {
    D sum = Float32OnGrid<kBytes>(in[0] + 4 * i, up);
    for (size_t j = 1; j < k; ++j) sum = sum + Float32OnGrid<kBytes>(in[j] + 4 * i, up);
    typename V::DF f = __builtin_convertvector(sum * down, typename V::DF);
    f = f != f ? typename V::DF{} + nan : f;
    Store(out + 4 * i, f);
  }
  for (; i < n; ++i) {
    double sum = RoundScalar(static_cast<double>(Load<float>(in[0] + 4 * i)) * up);
    for (size_t j = 1; j < k; ++j) sum = sum + RoundScalar(static_cast<double>(Load<float>(in[j] + 4 * i)) * up);
    float f = static_cast<float>(sum * down);
    Store(out + 4 * i, f != f ? nan : f);
  }
}

// ---- Two float32 contributions.
//
// A float32 value is a multiple of 2^q (lies on its block's grid as it is) when it is
// zero or at least 2^(q+23) in magnitude, where its last bit is worth at least 2^q;
// infinities and NaN travel as themselves anyway. When every value of both inputs of a
// block lies on the grid, the exact sum of each pair is a + b, and float32's addition
// rounds it once, to nearest even, as the grid's way back does: one addition per
// element. (More than two contributions have no such shortcut: a float32 partial sum
// would round.)

// The largest finite magnitude and the smallest nonzero one among in[0, n), as bits
// (kAbs when all are zero); the first >> 23 is the block key.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE void Float32RangeBody(const char* in, size_t n, int32_t* largest, int32_t* smallest) {
  typedef typename Vec<kBytes>::I32 V;
  constexpr size_t kLanes = kBytes / 4;
  constexpr int32_t kAbs = 0x7fffffff, kInf = 0x7f800000;
  V big = V{}, small = V{} + kAbs;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V m = Load<V>(in + 4 * i) & kAbs;
    const V finite = m < kInf ? m : V{};  // one comparison per select: GCC 12 scalarises
    const V nonzero = m == 0 ? V{} + kAbs : m;  // a select on two of them
    big = finite > big ? finite : big;
    small = nonzero < small ? nonzero : small;
  }
  int32_t hi = 0, lo = kAbs;
  for (size_t k = 0; k < kLanes; ++k) {
    hi = std::max(hi, big[k]);
    lo = std::min(lo, small[k]);
  }
  for (; i < n; ++i) {
    const int32_t m = Load<int32_t>(in + 4 * i) & kAbs;
    if (m < kInf) hi = std::max(hi, m);
    if (m != 0) lo = std::min(lo, m);
  }
  *largest = hi;
  *smallest = lo;
}

// out = a + b, NaN canonical.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE void Float32AddBody(const char* a, const char* b, size_t n, char* out) {
  typedef typename Vec<kBytes>::F F;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  size_t i = 0;
  for (; i + Vec<kBytes>::kFloats <= n; i += Vec<kBytes>::kFloats) {
    F f = Load<F>(a + 4 * i) + Load<F>(b + 4 * i);
    f = f != f ? F{} + nan : f;
    Store(out + 4 * i, f);
  }
  for (; i < n; ++i) {
    const float f = Load<float>(a + 4 * i) + Load<float>(b + 4 * i);
    Store(out + 4 * i, f != f ? nan : f);
  }
}

// ---- Back from the grid.

// One float64 word -> float32: (sum * 2^q) is exact in float64, the conversion rounds once.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE void GridToFloat32Body(const double* wire, size_t n, double down, char* out) {
  typedef Vec<kBytes> V;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  size_t i = 0;
  for (; i + V::kDoubles <= n; i += V::kDoubles) {
    typename V::DF f = __builtin_convertvector(Load<typename V::D>(wire + i) * down, typename V::DF);
    f = f != f ? typename V::DF{} + nan : f;
    Store(out + 4 * i, f);
  }
  for (; i < n; ++i) {
    float f = static_cast<float>(Load<double>(wire + i) * down);
    if (f != f) f = nan;
    Store(out + 4 * i, f);
  }
}

// One float32 word -> float32 holding the exact sum * 2^q (NaN canonical), to be narrowed.
template <size_t kBytes>
TESSERA_ALWAYS_INLINE void GridToWideHalfBody(const float* wire, size_t n, const Pow2Pair<float>& down, float* out) {
  typedef Vec<kBytes> V;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  size_t i = 0;
  for (; i + V::kFloats <= n; i += V::kFloats) {
    typename V::F y = (Load<typename V::F>(wire + i) * down.first) * down.second;
    y = y != y ? typename V::F{} + nan : y;
    Store(out + i, y);
  }
  for (; i < n; ++i) {
    const float y = (Load<float>(wire + i) * down.first) * down.second;
    Store(out + i, y != y ? nan : y);
  }
}

// Two float64 words -> float64, rounded once; lo == 0 keeps hi's zero sign.
template <typename D>
TESSERA_ALWAYS_INLINE D Float64FromWords(const D& hi, const D& lo, int q1, const Pow2Pair<double>& down1,
                                         const Pow2Pair<double>& down2, double lo_to_hi) {
  const D high = (hi * down1.first) * down1.second;
  if (q1 > 0) return lo == 0 ? high : ((hi + lo * lo_to_hi) * down1.first) * down1.second;
  return lo == 0 ? high : high + (lo * down2.first) * down2.second;
}

template <size_t kBytes>
TESSERA_ALWAYS_INLINE void GridToFloat64Body(const double* wire, size_t n, int q1, char* out) {
  typedef typename Vec<kBytes>::D D;
  constexpr size_t kLanes = Vec<kBytes>::kDoubles;
  const int q2 = SecondWordExponent(q1);
  const Pow2Pair<double> down1(q1), down2(q2);
  const double lo_to_hi = std::ldexp(1.0, q2 - q1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    D hi, lo;
    Deinterleave(Load<D>(wire + 2 * i), Load<D>(wire + 2 * i + kLanes), &hi, &lo);
    D y = Float64FromWords(hi, lo, q1, down1, down2, lo_to_hi);
    y = y != y ? D{} + nan : y;
    Store(out + 8 * i, y);
  }
  for (; i < n; ++i) {
    double y = Float64FromWords(Load<double>(wire + 2 * i), Load<double>(wire + 2 * i + 1), q1, down1, down2, lo_to_hi);
    if (y != y) y = nan;
    Store(out + 8 * i, y);
  }
}

// ---- Canonical zeros and NaNs (I: the element as a signed integer; the magnitude
// bits compare as signed values).
template <typename I, I kAbs, I kInf, I kNan, size_t kBytes>
TESSERA_ALWAYS_INLINE void CanonicalBody(const char* in, size_t n, char* out) {
  typedef I V __attribute__((vector_size(kBytes)));
  constexpr size_t kLanes = kBytes / sizeof(I);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V u = Load<V>(in + i * sizeof(I));
    const V a = u & kAbs;
    u = a == V{} ? V{} : u;
    u = a > kInf ? V{} + kNan : u;
    Store(out + i * sizeof(I), u);
  }
  for (; i < n; ++i) {
    I u = Load<I>(in + i * sizeof(I));
    const I a = static_cast<I>(u & kAbs);
    if (a == 0) u = 0;
    if (a > kInf) u = kNan;
    Store(out + i * sizeof(I), u);
  }
}

// ---- The two compilations.

#define TESSERA_GRID_KERNELS(ATTR, BYTES)                                                                   \
  template <typename I, int kShift, I kMask>                                                                \
  ATTR static uint32_t BlockKey(const char* in, size_t n) {                                                 \
    return BlockKeyBody<I, kShift, kMask, BYTES>(in, n);                                                    \
  }                                                                                                         \
  template <bool kAdd>                                                                                      \
  ATTR static void Float32ToGrid(const char* in, size_t n, double up, double* wire) {                       \
    Float32ToGridBody<kAdd, BYTES>(in, n, up, wire);                                                        \
  }                                                                                                         \
  template <bool kAdd>                                                                                      \
  ATTR static void WideHalfToGrid(const float* x, size_t n, const Pow2Pair<float>& up, float* wire) {       \
    WideHalfToGridBody<kAdd, BYTES>(x, n, up, wire);                                                        \
  }                                                                                                         \
  template <bool kAdd>                                                                                      \
  ATTR static void Float64ToGrid(const char* in, size_t n, const Float64Scales& s, double* wire) {          \
    Float64ToGridBody<kAdd, BYTES>(in, n, s, wire);                                                         \
  }                                                                                                         \
  ATTR static void GridToFloat32(const double* wire, size_t n, double down, char* out) {                    \
    GridToFloat32Body<BYTES>(wire, n, down, out);                                                           \
  }                                                                                                         \
  ATTR static void Float32GridSum(const char* const* in, size_t k, size_t n, double up, double down,       \
                                  char* out) {                                                              \
    Float32GridSumBody<BYTES>(in, k, n, up, down, out);                                                     \
  }                                                                                                         \
  ATTR static void Float32Range(const char* in, size_t n, int32_t* largest, int32_t* smallest) {            \
    Float32RangeBody<BYTES>(in, n, largest, smallest);                                                      \
  }                                                                                                         \
  ATTR static void Float32Add(const char* a, const char* b, size_t n, char* out) {                          \
    Float32AddBody<BYTES>(a, b, n, out);                                                                    \
  }                                                                                                         \
  ATTR static void GridToWideHalf(const float* wire, size_t n, const Pow2Pair<float>& down, float* out) {   \
    GridToWideHalfBody<BYTES>(wire, n, down, out);                                                          \
  }                                                                                                         \
  ATTR static void GridToFloat64(const double* wire, size_t n, int q1, char* out) {                         \
    GridToFloat64Body<BYTES>(wire, n, q1, out);                                                             \
  }                                                                                                         \
  template <typename I, I kAbs, I kInf, I kNan>                                                             \
  ATTR static void Canonical(const char* in, size_t n, char* out) {                                         \
    CanonicalBody<I, kAbs, kInf, kNan, BYTES>(in, n, out);                                                  \
  }

struct Portable {
  TESSERA_GRID_KERNELS(, 16)
};

struct Avx2 {
  TESSERA_GRID_KERNELS(TESSERA_TARGET_AVX2, 32)
};

struct Avx512 {
  TESSERA_GRID_KERNELS(TESSERA_TARGET_AVX512, 64)
};

#undef TESSERA_GRID_KERNELS

// Calls fn(kernels) with the kernels of `isa`, or of the widest level below it that the
// CPU runs.
template <typename Fn>
void WithKernels(SimdIsa isa, const Fn& fn) {
  const int level = std::min(static_cast<int>(isa), static_cast<int>(SupportedSimdIsa()));
  if (level >= static_cast<int>(SimdIsa::kAvx512)) return fn(Avx512{});
  if (level == static_cast<int>(SimdIsa::kAvx2)) return fn(Avx2{});
  fn(Portable{});
}

// Calls fn(i, n, block) for each run [i, i + n) of in's elements that lies in one block
// (element i of the run is element first + i of the vector).
template <typename Fn>
void ForEachRun(size_t count, size_t first, const Fn& fn) {
  for (size_t i = 0; i < count;) {
    const size_t global = first + i, block = global / kGridBlock;
    const size_t n = std::min(count - i, (block + 1) * kGridBlock - global);
    fn(i, n, block);
    i += n;
  }
}

template <typename K>
uint32_t BlockKeyIn(DataType type, const char* in, size_t n) {
  switch (type) {
    case DataType::kFloat16: return K::template BlockKey<int16_t, 10, 0x7c00>(in, n);
    case DataType::kBfloat16: return K::template BlockKey<int16_t, 7, 0x7f80>(in, n);
    case DataType::kFloat32: return K::template BlockKey<int32_t, 23, 0x7f800000>(in, n);
    default: return K::template BlockKey<int64_t, 52, 0x7ff0000000000000>(in, n);
  }
}

template <typename K>
void CanonicalIn(DataType type, const char* in, size_t n, char* out) {
  switch (type) {
    case DataType::kFloat16: return K::template Canonical<int16_t, 0x7fff, 0x7c00, 0x7e00>(in, n, out);
    case DataType::kBfloat16: return K::template Canonical<int16_t, 0x7fff, 0x7f80, 0x7fc0>(in, n, out);
    case DataType::kFloat32: return K::template Canonical<int32_t, 0x7fffffff, 0x7f800000, 0x7fc00000>(in, n, out);
    default:
      return K::template Canonical<int64_t, 0x7fffffffffffffff, 0x7ff0000000000000, 0x7ff8000000000000>(in, n, out);
  }
}

template <typename K, bool kAdd>
void ToGridIn(DataType type, const char* in, size_t count, size_t first, const int32_t* keys, char* wire) {
  const size_t es = SizeOf(type);
  ForEachRun(count, first, [&](size_t i, size_t n, size_t block) {
    const int q = GridExponent(type, keys[block]);
    if (type == DataType::kFloat32) {
      K::template Float32ToGrid<kAdd>(in + i * 4, n, std::ldexp(1.0, -q), reinterpret_cast<double*>(wire) + i);
    } else if (type == DataType::kFloat64) {
      K::template Float64ToGrid<kAdd>(in + i * 8, n, Float64Scales(q), reinterpret_cast<double*>(wire) + 2 * i);
    } else {
      float x[kGridBlock];
      WidenHalf(type, in + i * es, x, n);
      K::template WideHalfToGrid<kAdd>(x, n, Pow2Pair<float>(-q), reinterpret_cast<float*>(wire) + i);
    }
  });
}

template <typename K>
void FromGridIn(DataType type, const char* wire, size_t count, size_t first, const int32_t* keys, char* out) {
  const size_t es = SizeOf(type);
  ForEachRun(count, first, [&](size_t i, size_t n, size_t block) {
    const int q = GridExponent(type, keys[block]);
    if (type == DataType::kFloat32) {
      K::GridToFloat32(reinterpret_cast<const double*>(wire) + i, n, std::ldexp(1.0, q), out + i * 4);
    } else if (type == DataType::kFloat64) {
      K::GridToFloat64(reinterpret_cast<const double*>(wire) + 2 * i, n, q, out + i * 8);
    } else {
      float y[kGridBlock];
      K::GridToWideHalf(reinterpret_cast<const float*>(wire) + i, n, Pow2Pair<float>(q), y);
      NarrowHalf(type, y, out + i * es, n);
    }
  });
}

// Sums one block of two float32 inputs (m values) into out; false, having done nothing,
// unless every value lies on the block's grid.
template <typename K>
bool Float32PairOnGrid(const char* a, const char* b, size_t m, char* out) {
  int32_t big_a, small_a, big_b, small_b;
  K::Float32Range(a, m, &big_a, &small_a);
  K::Float32Range(b, m, &big_b, &small_b);
  const int q = GridExponent(DataType::kFloat32, std::max(big_a, big_b) >> 23);
  const int32_t on_grid = (q + 23 + 127) << 23;  // the bits of 2^(q+23), a normal float (q >= -149)
  if (std::min(small_a, small_b) < on_grid) return false;
  K::Float32Add(a, b, m, out);
  return true;
}

// GridSum of float32, block by block with the fused kernel.
void Float32GridSumWith(SimdIsa isa, const void* const* inputs, size_t n, size_t count, void* out) {
  WithKernels(isa, [&](auto kernels) {
    typedef decltype(kernels) K;
    const char* few[8];
    std::vector<const char*> many(n > 8 ? n : 0);
    const char** at = n > 8 ? many.data() : few;
    for (size_t first = 0; first < count; first += kGridBlock) {
      const size_t m = std::min(kGridBlock, count - first);
      char* to = static_cast<char*>(out) + first * 4;
      if (n == 2 && Float32PairOnGrid<K>(static_cast<const char*>(inputs[0]) + first * 4,
                                         static_cast<const char*>(inputs[1]) + first * 4, m, to)) {
        continue;
      }
      uint32_t key = 0;
      for (size_t j = 0; j < n; ++j) {
        at[j] = static_cast<const char*>(inputs[j]) + first * 4;
        key = std::max(key, BlockKeyIn<K>(DataType::kFloat32, at[j], m));
      }
      const int q = GridExponent(DataType::kFloat32, static_cast<int32_t>(key));
      K::Float32GridSum(at, n, m, std::ldexp(1.0, -q), std::ldexp(1.0, q), to);
    }
  });
}

// GridPairReducer's function for `kType`.
template <DataType kType>
void GridPairSum(void* out, const void* a, const void* b, size_t blocks) {
  const void* inputs[2] = {a, b};
  GridSum(kType, inputs, 2, blocks * kGridBlock, out);
}

}  // namespace

bool GridFormatOf(DataType type, GridFormat* out) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: *out = {DataType::kFloat32, 1}; return true;
    case DataType::kFloat32: *out = {DataType::kFloat64, 1}; return true;
    case DataType::kFloat64: *out = {DataType::kFloat64, 2}; return true;
    default: return false;
  }
}

int GridExponent(DataType type, int32_t key) {
  const TypeGrid g = GridOf(type);
  const int e = std::max<int>(key, 1) - g.bias + 1;  // every |x| of the block is below 2^e
  return std::max(e + kGridHeadroomBits - g.precision, g.min_q);
}

SimdIsa PreferredGridIsa() { return SupportedSimdIsa(); }

void MaxGridKeysWith(SimdIsa isa, DataType type, const void* in_v, size_t count, int32_t* keys) {
  const char* in = static_cast<const char*>(in_v);
  const size_t es = SizeOf(type);
  WithKernels(isa, [&](auto kernels) {
    ForEachRun(count, 0, [&](size_t i, size_t n, size_t block) {
      const uint32_t key = BlockKeyIn<decltype(kernels)>(type, in + i * es, n);
      keys[block] = std::max<int32_t>(keys[block], static_cast<int32_t>(key));
    });
  });
}

void ToGridWith(SimdIsa isa, DataType type, const void* in, size_t count, size_t first, const int32_t* keys,
                void* wire, bool add) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(wire);
  WithKernels(isa, [&](auto kernels) {
    typedef decltype(kernels) K;
    add ? ToGridIn<K, true>(type, src, count, first, keys, dst) : ToGridIn<K, false>(type, src, count, first, keys, dst);
  });
}

void FromGridWith(SimdIsa isa, DataType type, const void* wire, size_t count, size_t first, const int32_t* keys,
                  void* out) {
  const char* src = static_cast<const char*>(wire);
  char* dst = static_cast<char*>(out);
  WithKernels(isa, [&](auto kernels) { FromGridIn<decltype(kernels)>(type, src, count, first, keys, dst); });
}

void CanonicalizeZerosAndNansWith(SimdIsa isa, DataType type, const void* in, size_t count, void* out) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  WithKernels(isa, [&](auto kernels) { CanonicalIn<decltype(kernels)>(type, src, count, dst); });
}

void CanonicalizeZerosAndNans(DataType type, const void* in, size_t count, void* out) {
  CanonicalizeZerosAndNansWith(PreferredGridIsa(), type, in, count, out);
}


void GridSumWith(SimdIsa isa, DataType type, const void* const* inputs, size_t n, size_t count, void* out) {
  if (type == DataType::kFloat32) return Float32GridSumWith(isa, inputs, n, count, out);
  const size_t es = SizeOf(type);
  GridFormat format;
  GridFormatOf(type, &format);
  alignas(64) char wire[kGridBlock * 16];  // a block's grid values: at most two float64 words each
  for (size_t first = 0; first < count; first += kGridBlock) {
    const size_t m = std::min(kGridBlock, count - first);
    int32_t key = 0;
    for (size_t j = 0; j < n; ++j) MaxGridKeysWith(isa, type, static_cast<const char*>(inputs[j]) + first * es, m, &key);
    for (size_t j = 0; j < n; ++j) {
      ToGridWith(isa, type, static_cast<const char*>(inputs[j]) + first * es, m, 0, &key, wire, j > 0);
    }
    FromGridWith(isa, type, wire, m, 0, &key, static_cast<char*>(out) + first * es);
  }
}

void GridSum(DataType type, const void* const* inputs, size_t n, size_t count, void* out) {
  GridSumWith(PreferredGridIsa(), type, inputs, n, count, out);
}


bool GridPairReducer(DataType type, Reducer* out) {
  switch (type) {
    case DataType::kFloat16: out->fn = GridPairSum<DataType::kFloat16>; break;
    case DataType::kBfloat16: out->fn = GridPairSum<DataType::kBfloat16>; break;
    case DataType::kFloat32: out->fn = GridPairSum<DataType::kFloat32>; break;
    case DataType::kFloat64: out->fn = GridPairSum<DataType::kFloat64>; break;
    default: return false;
  }
  out->elem_size = kGridBlock * SizeOf(type);
  out->typed = false;
  return true;
}

void MaxGridKeys(DataType type, const void* in, size_t count, int32_t* keys) {
  MaxGridKeysWith(PreferredGridIsa(), type, in, count, keys);
}

void ToGrid(DataType type, const void* in, size_t count, size_t first, const int32_t* keys, void* wire, bool add) {
  ToGridWith(PreferredGridIsa(), type, in, count, first, keys, wire, add);
}

void FromGrid(DataType type, const void* wire, size_t count, size_t first, const int32_t* keys, void* out) {
  FromGridWith(PreferredGridIsa(), type, wire, count, first, keys, out);
}

}  // namespace tessera
