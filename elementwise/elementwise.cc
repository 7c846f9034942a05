// Element-wise helpers around the reductions: float16/bfloat16 <-> float32, the half
// reducers (TESSERA_HALF_WIRE=half), PreMulSum's scaling and avg's division.
//
// Every array function has three implementations that give identical bits:
// - portable: branch-free C++ on GCC vector extensions (16-byte vectors, SSE2), for any
//   x86-64;
// - avx2: compiled for AVX2 through per-function target attributes (no -march for the
//   build): float16 through F16C's conversions (vcvtph2ps, vcvtps2ph with round to nearest
//   even), bfloat16 through AVX2 integer intrinsics, scaling and division through the
//   portable code on 32-byte vectors;
// - avx512: the conversions and the half reducers on 64-byte vectors (AVX-512 F and BW);
//   scaling and division are the AVX2 code.
// The half reducers run in one pass (widen, combine, round; nothing stored in between);
// their max and min compare the 16-bit values as integers.
// PreferredElementwiseIsa picks one among the levels simd_isa.h detects (docs/kernels.md
// has the measurements). A tail shorter than a vector goes through vector code on a zero-padded
// copy, or for the half reducers through the scalar code. The scalar functions
// (HalfToFloat...) compute the same bits one value at a time; elementwise_test checks all
// of them against each other and against references computed in float64.
#include "elementwise/elementwise.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "elementwise/element_ops.h"
#include "elementwise/reduce_kernels.h"

// Helpers here return vectors by value. Each is always inlined, so no vector crosses a
// call ABI and GCC's warning about the AVX vector ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 intrinsics (avx512fintrin.h) start from an "undefined" vector and warn
// that it may be used uninitialized (GCC bug 105593); it never is.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tessera {
namespace {

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))

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

// ---- The conversions, written once for a scalar (U = uint32_t, F = float) or a vector
// of lanes (U, F vectors of the same lane count). Comparisons of vectors give lane masks,
// of scalars bools; Select hides the difference.

template <typename M, typename X>
TESSERA_ALWAYS_INLINE X Select(const M& mask, const X& yes, const X& no) {
  return mask ? yes : no;
}

// Value conversion lane by lane (int -> float, 32 -> 16 bits...).
template <typename To, typename From>
TESSERA_ALWAYS_INLINE To Convert(const From& x) {
  if constexpr (std::is_arithmetic<From>::value) {
    return static_cast<To>(x);
  } else {
    return __builtin_convertvector(x, To);
  }
}

template <typename F, typename U>
TESSERA_ALWAYS_INLINE F AsFloat(const U& u) {
  F f;
  std::memcpy(&f, &u, sizeof(F));
  return f;
}

template <typename U, typename F>
TESSERA_ALWAYS_INLINE U AsBits(const F& f) {
  U u;
  std::memcpy(&u, &f, sizeof(U));
  return u;
}

// float16 bits (zero-extended to 32) -> float32 bits, as vcvtph2ps computes them:
// normals rebias the exponent, subnormals are scaled exactly (man * 2^-24 is a normal
// float), infinity stays infinity, a NaN keeps its payload and becomes quiet.
template <typename U, typename I, typename F>
TESSERA_ALWAYS_INLINE U HalfBitsToFloatBits(const U& h) {
  const U em = h & 0x7fffu;                                   // exponent and mantissa
  const U normal = (em << 13) + 0x38000000u;                  // exponent + (127 - 15)
  const U special = (em << 13) | 0x7f800000u;                 // infinity or NaN
  const U quiet = Select(em > 0x7c00u, U{} + 0x400000u, U{});  // NaN: set the quiet bit
  const F sub = Convert<F>(Convert<I>(em)) * 0x1p-24f;  // zero or subnormal
  U r = Select(em >= 0x7c00u, special | quiet, normal);
  r = Select(em < 0x400u, AsBits<U>(sub), r);
  return r | ((h & 0x8000u) << 16);
}

// float32 bits -> float16 bits (in the low 16), as vcvtps2ph with round-to-nearest-even
// computes them: ties to even, |x| >= 65520 becomes infinity, subnormal results rounded
// correctly, a NaN stays NaN (quiet, payload truncated). The subnormal case adds 0.5f:
// the float addition rounds |x| to a multiple of 2^-24 (to nearest even, the default
// rounding mode), which is then the float16 subnormal's mantissa.
template <typename U, typename F>
TESSERA_ALWAYS_INLINE U FloatBitsToHalfBits(const U& u) {
  const U sign = (u >> 16) & 0x8000u;
  const U a = u & 0x7fffffffu;
  const U normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;  // rebias, round
  const U sub = AsBits<U>(AsFloat<F>(a) + 0.5f) - 0x3f000000u;
  const U nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  U r = Select(a < 0x38800000u, sub, normal);             // below 2^-14: subnormal
  r = Select(a >= 0x477ff000u, U{} + 0x7c00u, r);         // rounds to >= 65536: infinity
  r = Select(a > 0x7f800000u, nan, r);                    // NaN
  return r | sign;
}

template <typename U>
TESSERA_ALWAYS_INLINE U FloatBitsToBfloat16Bits(const U& u) {
  const U rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest even; overflow -> inf
  const U nan = (u >> 16) | 0x40u;                           // stays NaN (quiet)
  return Select((u & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

// ---- Array loops on vectors of kBytes bytes of float32 (kBytes / 4 lanes).

// Runs `step(in, out)` on every full group of `lanes` elements, then on a zero-padded copy
// of the tail, so every element goes through the same code. in_size and out_size are the
// element sizes.
template <size_t kLanes, size_t kInSize, size_t kOutSize, typename Step>
TESSERA_ALWAYS_INLINE void ForEachGroup(const void* in_v, void* out_v, size_t count, const Step& step) {
  const char* in = static_cast<const char*>(in_v);
  char* out = static_cast<char*>(out_v);
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) step(in + i * kInSize, out + i * kOutSize);
  if (i < count) {
    char in_tail[kLanes * kInSize] = {};
    char out_tail[kLanes * kOutSize];
    std::memcpy(in_tail, in + i * kInSize, (count - i) * kInSize);
    step(in_tail, out_tail);
    std::memcpy(out + i * kOutSize, out_tail, (count - i) * kOutSize);
  }
}

template <size_t kBytes>
struct Lanes {
  static constexpr size_t kCount = kBytes / 4;
  typedef uint32_t U __attribute__((vector_size(kBytes)));
  typedef int32_t I __attribute__((vector_size(kBytes)));
  typedef float F __attribute__((vector_size(kBytes)));
  typedef uint16_t H __attribute__((vector_size(kBytes / 2)));
};

template <size_t kBytes>
TESSERA_ALWAYS_INLINE void WidenFloat16Body(const void* in, float* out, size_t count) {
  typedef Lanes<kBytes> L;
  ForEachGroup<L::kCount, 2, 4>(in, out, count, [](const char* src, char* dst) __attribute__((always_inline)) {
    typename L::H h;
    std::memcpy(&h, src, sizeof(h));
    const typename L::U r = HalfBitsToFloatBits<typename L::U, typename L::I, typename L::F>(
        __builtin_convertvector(h, typename L::U));
    std::memcpy(dst, &r, sizeof(r));
  });
}

template <size_t kBytes>
TESSERA_ALWAYS_INLINE void NarrowFloat16Body(const float* in, void* out, size_t count) {
  typedef Lanes<kBytes> L;
  ForEachGroup<L::kCount, 4, 2>(in, out, count, [](const char* src, char* dst) __attribute__((always_inline)) {
    typename L::U u;
    std::memcpy(&u, src, sizeof(u));
    const typename L::H h =
        __builtin_convertvector(FloatBitsToHalfBits<typename L::U, typename L::F>(u), typename L::H);
    std::memcpy(dst, &h, sizeof(h));
  });
}

template <size_t kBytes>
TESSERA_ALWAYS_INLINE void WidenBfloat16Body(const void* in, float* out, size_t count) {
  typedef Lanes<kBytes> L;
  ForEachGroup<L::kCount, 2, 4>(in, out, count, [](const char* src, char* dst) __attribute__((always_inline)) {
    typename L::H h;
    std::memcpy(&h, src, sizeof(h));
    const typename L::U r = __builtin_convertvector(h, typename L::U) << 16;
    std::memcpy(dst, &r, sizeof(r));
  });
}

template <size_t kBytes>
TESSERA_ALWAYS_INLINE void NarrowBfloat16Body(const float* in, void* out, size_t count) {
  typedef Lanes<kBytes> L;
  ForEachGroup<L::kCount, 4, 2>(in, out, count, [](const char* src, char* dst) __attribute__((always_inline)) {
    typename L::U u;
    std::memcpy(&u, src, sizeof(u));
    const typename L::H h = __builtin_convertvector(FloatBitsToBfloat16Bits(u), typename L::H);
    std::memcpy(dst, &h, sizeof(h));
  });
}

// dst = s * src. Integers multiply with wrap-around, as the scalar C++ does after
// promotion and truncation.
template <typename T0, size_t kBytes>
TESSERA_ALWAYS_INLINE void ScaleBody(const void* scalar, const void* src, void* dst, size_t count) {
  typedef typename element::Wrapping<T0>::type T;
  typedef T V __attribute__((vector_size(kBytes)));
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  V sv;  // every lane s (not V{} + s, which turns -0.0 into +0.0)
  for (size_t k = 0; k < kBytes / sizeof(T); ++k) sv[k] = s;
  const auto step = [sv](const char* in, char* out) __attribute__((always_inline)) {
    V v;
    std::memcpy(&v, in, sizeof(V));
    v = v * sv;
    std::memcpy(out, &v, sizeof(V));
  };
  ForEachGroup<kBytes / sizeof(T), sizeof(T), sizeof(T)>(src, dst, count, step);
}

// data /= divisor for floating types: a true IEEE division, lane by lane.
template <typename T, size_t kBytes>
TESSERA_ALWAYS_INLINE void DivideFloatBody(void* data, size_t count, int divisor) {
  typedef T V __attribute__((vector_size(kBytes)));
  V n;
  for (size_t k = 0; k < kBytes / sizeof(T); ++k) n[k] = static_cast<T>(divisor);
  ForEachGroup<kBytes / sizeof(T), sizeof(T), sizeof(T)>(data, data, count,
                                                         [n](const char* in, char* out) __attribute__((always_inline)) {
    V v;
    std::memcpy(&v, in, sizeof(V));
    v = v / n;
    std::memcpy(out, &v, sizeof(V));
  });
}

// data /= divisor for 8- and 32-bit integers, truncating, through a floating-point
// division that gives exactly the integer quotient: 8-bit values in float32, 32-bit ones
// in float64 (W, with p = 24 or 53 bits of precision). Why it is exact: for |x| < 2^p and
// n >= 1, q = x / n has |q| < 2^p / n, so the rounding error is below half an ulp of q,
// < 1/n; a q that is not an integer lies at least 1/n from any integer, so rounding never
// reaches one, and truncation yields the integer quotient. (A divisor above 2^24 is not
// exact in float32, but then 8-bit quotients are 0 either way.)
template <typename T, size_t kLanes>
TESSERA_ALWAYS_INLINE void DivideSmallIntBody(void* data, size_t count, int divisor) {
  typedef std::conditional_t<sizeof(T) == 1, float, double> W;
  typedef std::conditional_t<sizeof(T) == 1, int16_t, T> I16;  // 8-bit values fit int16...
  typedef std::conditional_t<sizeof(T) == 1, int32_t, T> I;    // ...and int32
  typedef T V __attribute__((vector_size(kLanes * sizeof(T))));
  typedef I16 VI16 __attribute__((vector_size(kLanes * sizeof(I16))));
  typedef I VI __attribute__((vector_size(kLanes * sizeof(I))));
  typedef W VW __attribute__((vector_size(kLanes * sizeof(W))));
  const VW n = VW{} + static_cast<W>(divisor);  // divisor >= 1: no signed zero to lose
  const auto step = [n](const char* in, char* out) __attribute__((always_inline)) {
    V v;
    std::memcpy(&v, in, sizeof(V));
    // Widening in steps of two: GCC handles 8 -> 16 -> 32 bits with vector instructions,
    // 8 -> 32 in one step lane by lane.
    const VW q = __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(v, VI16), VI), VW) / n;
    v = __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(q, VI), VI16), V);
    std::memcpy(out, &v, sizeof(V));
  };
  ForEachGroup<kLanes, sizeof(T), sizeof(T)>(data, data, count, step);
}

// Unsigned 64-bit division by an invariant d >= 1 with a multiply (Granlund & Montgomery
// 1994, figure 4.1): exact for every 64-bit dividend, several times faster than div.
struct Divider64 {
  uint64_t multiplier;
  int shift1, shift2;

  explicit Divider64(uint64_t d) {
    int l = 0;  // ceil(log2(d))
    while (l < 64 && (uint64_t{1} << l) < d) ++l;
    const unsigned __int128 two_l = static_cast<unsigned __int128>(1) << l;
    multiplier = static_cast<uint64_t>(((two_l - d) << 64) / d + 1);
    shift1 = std::min(l, 1);
    shift2 = std::max(l - 1, 0);
  }

  uint64_t Divide(uint64_t x) const {
    const uint64_t t = static_cast<uint64_t>((static_cast<unsigned __int128>(multiplier) * x) >> 64);
    return (t + ((x - t) >> shift1)) >> shift2;
  }
};

template <typename T>
void DivideInt64(void* data, size_t count, int divisor) {
  const Divider64 d(static_cast<uint64_t>(divisor));
  char* p = static_cast<char*>(data);  // maybe misaligned: memcpy in and out
  for (size_t i = 0; i < count; ++i, p += 8) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    // Signed: truncation toward zero divides the magnitude (2^63 for the minimum is fine)
    // and restores the sign; neg is all ones for a negative value, else zero.
    const uint64_t neg = std::is_signed<T>::value ? static_cast<uint64_t>(static_cast<int64_t>(x) >> 63) : 0;
    const uint64_t q = (d.Divide((x ^ neg) - neg) ^ neg) - neg;
    std::memcpy(p, &q, 8);
  }
}

// The reference semantics, for divisors the fast paths do not take (< 1). A zero divisor
// leaves integers unchanged rather than trapping.
template <typename T>
void DivideScalar(void* data, size_t count, int divisor) {
  using Wide = std::conditional_t<std::is_floating_point<T>::value, T,
                                  std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>>;
  if (!std::is_floating_point<T>::value && divisor == 0) return;
  char* p = static_cast<char*>(data);  // maybe misaligned: memcpy in and out
  const Wide n = static_cast<Wide>(divisor);
  for (size_t i = 0; i < count; ++i, p += sizeof(T)) {
    T x;
    std::memcpy(&x, p, sizeof(T));
    x = static_cast<T>(static_cast<Wide>(x) / n);
    std::memcpy(p, &x, sizeof(T));
  }
}

// ---- The two implementations: the same bodies compiled twice.

struct Portable {
  static constexpr size_t kBytes = 16;
  static void WidenFloat16(const void* in, float* out, size_t count) { WidenFloat16Body<kBytes>(in, out, count); }
  static void NarrowFloat16(const float* in, void* out, size_t count) { NarrowFloat16Body<kBytes>(in, out, count); }
  static void WidenBfloat16(const void* in, float* out, size_t count) { WidenBfloat16Body<kBytes>(in, out, count); }
  static void NarrowBfloat16(const float* in, void* out, size_t count) { NarrowBfloat16Body<kBytes>(in, out, count); }
  template <typename T>
  static void Scale(const void* scalar, const void* src, void* dst, size_t count) {
    ScaleBody<T, kBytes>(scalar, src, dst, count);
  }
  template <typename T>
  static void DivideFloat(void* data, size_t count, int divisor) { DivideFloatBody<T, kBytes>(data, count, divisor); }
  template <typename T>
  static void DivideSmallInt(void* data, size_t count, int divisor) {
    DivideSmallIntBody<T, (sizeof(T) == 1 ? kBytes / 2 : kBytes / 4)>(data, count, divisor);
  }
};

struct Avx2 {
  static constexpr size_t kBytes = 32;
  TESSERA_TARGET_AVX2 static void WidenFloat16(const void* in, float* out, size_t count);
  TESSERA_TARGET_AVX2 static void NarrowFloat16(const float* in, void* out, size_t count);
  TESSERA_TARGET_AVX2 static void WidenBfloat16(const void* in, float* out, size_t count);
  TESSERA_TARGET_AVX2 static void NarrowBfloat16(const float* in, void* out, size_t count);
  template <typename T>
  TESSERA_TARGET_AVX2 static void Scale(const void* scalar, const void* src, void* dst, size_t count) {
    ScaleBody<T, kBytes>(scalar, src, dst, count);
  }
  template <typename T>
  TESSERA_TARGET_AVX2 static void DivideFloat(void* data, size_t count, int divisor) {
    DivideFloatBody<T, kBytes>(data, count, divisor);
  }
  template <typename T>
  TESSERA_TARGET_AVX2 static void DivideSmallInt(void* data, size_t count, int divisor) {
    DivideSmallIntBody<T, (sizeof(T) == 1 ? kBytes / 2 : kBytes / 4)>(data, count, divisor);
  }
};

// F16C: 8 values per instruction, 32 per iteration; the imm8 of vcvtps2ph selects round
// to nearest even whatever MXCSR says. The tail is converted from a zero-padded copy.
// (Written out rather than through ForEachGroup: intrinsics must sit in the function
// that carries the target attribute.)
TESSERA_TARGET_AVX2 void Avx2::WidenFloat16(const void* in_v, float* out, size_t count) {
  const __m128i* in = static_cast<const __m128i*>(in_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, in += 4) {
    const __m256 r0 = _mm256_cvtph_ps(_mm_loadu_si128(in));
    const __m256 r1 = _mm256_cvtph_ps(_mm_loadu_si128(in + 1));
    const __m256 r2 = _mm256_cvtph_ps(_mm_loadu_si128(in + 2));
    const __m256 r3 = _mm256_cvtph_ps(_mm_loadu_si128(in + 3));
    _mm256_storeu_ps(out + i, r0);
    _mm256_storeu_ps(out + i + 8, r1);
    _mm256_storeu_ps(out + i + 16, r2);
    _mm256_storeu_ps(out + i + 24, r3);
  }
  for (; i < count; i += 8, ++in) {
    const size_t n = std::min<size_t>(8, count - i);
    __m128i h = _mm_setzero_si128();
    std::memcpy(&h, in, n * 2);
    float r[8];
    _mm256_storeu_ps(r, _mm256_cvtph_ps(h));
    std::memcpy(out + i, r, n * 4);
  }
}

TESSERA_TARGET_AVX2 void Avx2::NarrowFloat16(const float* in, void* out_v, size_t count) {
  __m128i* out = static_cast<__m128i*>(out_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, out += 4) {
    const __m128i h0 = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i h1 = _mm256_cvtps_ph(_mm256_loadu_ps(in + i + 8), _MM_FROUND_TO_NEAREST_INT);
    const __m128i h2 = _mm256_cvtps_ph(_mm256_loadu_ps(in + i + 16), _MM_FROUND_TO_NEAREST_INT);
    const __m128i h3 = _mm256_cvtps_ph(_mm256_loadu_ps(in + i + 24), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(out, h0);
    _mm_storeu_si128(out + 1, h1);
    _mm_storeu_si128(out + 2, h2);
    _mm_storeu_si128(out + 3, h3);
  }
  for (; i < count; i += 8, ++out) {
    const size_t n = std::min<size_t>(8, count - i);
    float f[8] = {};
    std::memcpy(f, in + i, n * 4);
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(f), _MM_FROUND_TO_NEAREST_INT);
    std::memcpy(out, &h, n * 2);
  }
}

// bfloat16 -> float32: each value becomes the upper half of a 32-bit lane. vpmovzxwd
// zero-extends eight values into eight lanes straight from memory (one shuffle each), and
// a shift moves them to the top. 32 values per iteration keep four loads in flight.
TESSERA_TARGET_AVX2 void Avx2::WidenBfloat16(const void* in_v, float* out, size_t count) {
  const __m128i* in = static_cast<const __m128i*>(in_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, in += 4) {
    const __m256i r0 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(in)), 16);
    const __m256i r1 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(in + 1)), 16);
    const __m256i r2 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(in + 2)), 16);
    const __m256i r3 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(in + 3)), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), r0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8), r1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16), r2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 24), r3);
  }
  if (i < count) WidenBfloat16Body<kBytes>(in, out + i, count - i);
}

// Eight float32 bit patterns rounded to bfloat16 precision, to nearest even: the bfloat16
// is the upper half of each result (the lower half is garbage). Overflow reaches
// infinity. Not for NaN: the increment could carry a NaN into infinity or the sign bit.
TESSERA_TARGET_AVX2 TESSERA_ALWAYS_INLINE __m256i RoundToBfloat16High(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
}

// Sixteen rounded values (r0 then r1, bfloat16 in the upper halves) packed in order.
// packus works within 128-bit lanes, giving [r0 lo, r1 lo, r0 hi, r1 hi]; the permute puts
// the four quarters back in order. Shifted values are < 2^16, so nothing saturates.
TESSERA_TARGET_AVX2 TESSERA_ALWAYS_INLINE __m256i PackBfloat16High(__m256i r0, __m256i r1) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(r0, 16), _mm256_srli_epi32(r1, 16)), 0xd8);
}

// 32 values per iteration. NaNs are rare, so one test per 32 sends a group that has any
// to the portable code (same bits), and the common path skips the NaN masks.
TESSERA_TARGET_AVX2 void Avx2::NarrowBfloat16(const float* in, void* out_v, size_t count) {
  uint16_t* out = static_cast<uint16_t*>(out_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m256 x0 = _mm256_loadu_ps(in + i);
    const __m256 x1 = _mm256_loadu_ps(in + i + 8);
    const __m256 x2 = _mm256_loadu_ps(in + i + 16);
    const __m256 x3 = _mm256_loadu_ps(in + i + 24);
    const __m256 nan01 = _mm256_or_ps(_mm256_cmp_ps(x0, x0, _CMP_UNORD_Q), _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q));
    const __m256 nan23 = _mm256_or_ps(_mm256_cmp_ps(x2, x2, _CMP_UNORD_Q), _mm256_cmp_ps(x3, x3, _CMP_UNORD_Q));
    const __m256 nan = _mm256_or_ps(nan01, nan23);
    if (_mm256_movemask_ps(nan) != 0) {
      NarrowBfloat16Body<kBytes>(in + i, out + i, 32);
      continue;
    }
    const __m256i p0 = PackBfloat16High(RoundToBfloat16High(_mm256_castps_si256(x0)),
                                        RoundToBfloat16High(_mm256_castps_si256(x1)));
    const __m256i p1 = PackBfloat16High(RoundToBfloat16High(_mm256_castps_si256(x2)),
                                        RoundToBfloat16High(_mm256_castps_si256(x3)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16), p1);
  }
  if (i < count) NarrowBfloat16Body<kBytes>(in + i, out + i, count - i);
}

// AVX-512 (F, BW): the same conversions on 64-byte vectors, 32 values per iteration; a
// tail goes to the AVX2 code. Scaling and division are the AVX2 ones. Widening beyond
// the L2 cache runs the AVX2 loop: the 64-byte loop is up to 15% slower there
// (docs/kernels.md), while in cache it is faster.
constexpr size_t kAvx512WidenMaxValues = (1 << 20) / 4;  // 1 MiB of float32 output

struct Avx512 : Avx2 {
  TESSERA_TARGET_AVX512 static void WidenFloat16(const void* in, float* out, size_t count);
  TESSERA_TARGET_AVX512 static void NarrowFloat16(const float* in, void* out, size_t count);
  TESSERA_TARGET_AVX512 static void WidenBfloat16(const void* in, float* out, size_t count);
  TESSERA_TARGET_AVX512 static void NarrowBfloat16(const float* in, void* out, size_t count);
};

TESSERA_TARGET_AVX512 void Avx512::WidenFloat16(const void* in_v, float* out, size_t count) {
  if (count > kAvx512WidenMaxValues) return Avx2::WidenFloat16(in_v, out, count);
  const __m256i* in = static_cast<const __m256i*>(in_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, in += 2) {
    const __m512 r0 = _mm512_cvtph_ps(_mm256_loadu_si256(in));
    const __m512 r1 = _mm512_cvtph_ps(_mm256_loadu_si256(in + 1));
    _mm512_storeu_ps(out + i, r0);
    _mm512_storeu_ps(out + i + 16, r1);
  }
  if (i < count) Avx2::WidenFloat16(in, out + i, count - i);
}

TESSERA_TARGET_AVX512 void Avx512::NarrowFloat16(const float* in, void* out_v, size_t count) {
  __m256i* out = static_cast<__m256i*>(out_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, out += 2) {
    const __m256i h0 = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    const __m256i h1 = _mm512_cvtps_ph(_mm512_loadu_ps(in + i + 16), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(out, h0);
    _mm256_storeu_si256(out + 1, h1);
  }
  if (i < count) Avx2::NarrowFloat16(in + i, out, count - i);
}

TESSERA_TARGET_AVX512 void Avx512::WidenBfloat16(const void* in_v, float* out, size_t count) {
  if (count > kAvx512WidenMaxValues) return Avx2::WidenBfloat16(in_v, out, count);
  const __m256i* in = static_cast<const __m256i*>(in_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, in += 2) {
    const __m512i r0 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(in)), 16);
    const __m512i r1 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(in + 1)), 16);
    _mm512_storeu_si512(out + i, r0);
    _mm512_storeu_si512(out + i + 16, r1);
  }
  if (i < count) Avx2::WidenBfloat16(in, out + i, count - i);
}

// As RoundToBfloat16High, on sixteen lanes.
TESSERA_TARGET_AVX512 TESSERA_ALWAYS_INLINE __m512i RoundToBfloat16High512(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
}

TESSERA_TARGET_AVX512 void Avx512::NarrowBfloat16(const float* in, void* out_v, size_t count) {
  uint16_t* out = static_cast<uint16_t*>(out_v);
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);  // undoes packus's interleave
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512 x0 = _mm512_loadu_ps(in + i);
    const __m512 x1 = _mm512_loadu_ps(in + i + 16);
    if ((_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0) {
      NarrowBfloat16Body<Avx2::kBytes>(in + i, out + i, 32);
      continue;
    }
    const __m512i r0 = _mm512_srli_epi32(RoundToBfloat16High512(_mm512_castps_si512(x0)), 16);
    const __m512i r1 = _mm512_srli_epi32(RoundToBfloat16High512(_mm512_castps_si512(x1)), 16);
    _mm512_storeu_si512(out + i, _mm512_permutexvar_epi64(order, _mm512_packus_epi32(r0, r1)));
  }
  if (i < count) Avx2::NarrowBfloat16(in + i, out + i, count - i);
}

template <typename Impl>
void WidenHalfIn(DataType type, const void* in, float* out, size_t count) {
  if (type == DataType::kFloat16) {
    Impl::WidenFloat16(in, out, count);
  } else {
    Impl::WidenBfloat16(in, out, count);
  }
}

template <typename Impl>
void NarrowHalfIn(DataType type, const float* in, void* out, size_t count) {
  if (type == DataType::kFloat16) {
    Impl::NarrowFloat16(in, out, count);
  } else {
    Impl::NarrowBfloat16(in, out, count);
  }
}

template <typename Impl>
void ScaleIn(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  switch (type) {
    case DataType::kInt8: return Impl::template Scale<int8_t>(scalar, src, dst, count);
    case DataType::kUint8: return Impl::template Scale<uint8_t>(scalar, src, dst, count);
    case DataType::kInt32: return Impl::template Scale<int32_t>(scalar, src, dst, count);
    case DataType::kUint32: return Impl::template Scale<uint32_t>(scalar, src, dst, count);
    case DataType::kInt64: return Impl::template Scale<int64_t>(scalar, src, dst, count);
    case DataType::kUint64: return Impl::template Scale<uint64_t>(scalar, src, dst, count);
    case DataType::kFloat32: return Impl::template Scale<float>(scalar, src, dst, count);
    case DataType::kFloat64: return Impl::template Scale<double>(scalar, src, dst, count);
    default: return;  // half types: ScaleHalfIn; fp8 has no reductions
  }
}

// The half types in float32, a block at a time on the stack: widened, scaled or
// divided, rounded once.
constexpr size_t kHalfBlock = 1024;

template <typename Impl>
void ScaleHalfIn(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  const float wide_scalar = HalfValueToFloat(type, scalar);
  float wide[kHalfBlock];
  for (size_t i = 0; i < count; i += kHalfBlock) {
    const size_t n = std::min(kHalfBlock, count - i);
    WidenHalfIn<Impl>(type, static_cast<const char*>(src) + 2 * i, wide, n);
    Impl::template Scale<float>(&wide_scalar, wide, wide, n);
    NarrowHalfIn<Impl>(type, wide, static_cast<char*>(dst) + 2 * i, n);
  }
}

template <typename Impl>
void DivideIn(DataType type, void* data, size_t count, int divisor) {
  if (divisor < 1) {
    switch (type) {
      case DataType::kInt8: return DivideScalar<int8_t>(data, count, divisor);
      case DataType::kUint8: return DivideScalar<uint8_t>(data, count, divisor);
      case DataType::kInt32: return DivideScalar<int32_t>(data, count, divisor);
      case DataType::kUint32: return DivideScalar<uint32_t>(data, count, divisor);
      case DataType::kInt64: return DivideScalar<int64_t>(data, count, divisor);
      case DataType::kUint64: return DivideScalar<uint64_t>(data, count, divisor);
      case DataType::kFloat32: return DivideScalar<float>(data, count, divisor);
      case DataType::kFloat64: return DivideScalar<double>(data, count, divisor);
      default: return;
    }
  }
  switch (type) {
    case DataType::kInt8: return Impl::template DivideSmallInt<int8_t>(data, count, divisor);
    case DataType::kUint8: return Impl::template DivideSmallInt<uint8_t>(data, count, divisor);
    case DataType::kInt32: return Impl::template DivideSmallInt<int32_t>(data, count, divisor);
    case DataType::kUint32: return Impl::template DivideSmallInt<uint32_t>(data, count, divisor);
    case DataType::kInt64: return DivideInt64<int64_t>(data, count, divisor);
    case DataType::kUint64: return DivideInt64<uint64_t>(data, count, divisor);
    case DataType::kFloat32: return Impl::template DivideFloat<float>(data, count, divisor);
    case DataType::kFloat64: return Impl::template DivideFloat<double>(data, count, divisor);
    default: return;  // half types: DivideHalfIn
  }
}

template <typename Impl>
void DivideHalfIn(DataType type, void* data, size_t count, int divisor) {
  float wide[kHalfBlock];
  for (size_t i = 0; i < count; i += kHalfBlock) {
    const size_t n = std::min(kHalfBlock, count - i);
    char* at = static_cast<char*>(data) + 2 * i;
    WidenHalfIn<Impl>(type, at, wide, n);
    DivideIn<Impl>(DataType::kFloat32, wide, n, divisor);
    NarrowHalfIn<Impl>(type, wide, at, n);
  }
}

// Calls fn(Impl{}) with the implementation struct for `isa`, or the portable one where
// this CPU does not support `isa`.
template <typename Fn>
void WithImpl(SimdIsa isa, const Fn& fn) {
  if (static_cast<int>(isa) > static_cast<int>(SupportedSimdIsa())) isa = SimdIsa::kBaseline;
  switch (isa) {
    case SimdIsa::kAvx512: return fn(Avx512{});
    case SimdIsa::kAvx2: return fn(Avx2{});
    case SimdIsa::kBaseline: break;
  }
  fn(Portable{});
}

}  // namespace

float HalfToFloat(uint16_t h) { return FromBits(HalfBitsToFloatBits<uint32_t, int32_t, float>(h)); }

uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(FloatBitsToHalfBits<uint32_t, float>(Bits(f))); }

float Bfloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float f) { return static_cast<uint16_t>(FloatBitsToBfloat16Bits(Bits(f))); }

float HalfValueToFloat(DataType type, const void* value) {
  uint16_t bits;
  std::memcpy(&bits, value, 2);
  return type == DataType::kFloat16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
}

// The widest: on the same buffers, AVX-512 is faster than AVX2 in cache (up to
// twice for the half reducers and bfloat16 narrowing) and as fast beyond it, except
// widening, which hands large arrays to the AVX2 loop itself (docs/kernels.md).
SimdIsa PreferredElementwiseIsa() { return SupportedSimdIsa(); }

void WidenHalfWith(SimdIsa isa, DataType type, const void* in, float* out, size_t count) {
  WithImpl(isa, [&](auto impl) { WidenHalfIn<decltype(impl)>(type, in, out, count); });
}

void NarrowHalfWith(SimdIsa isa, DataType type, const float* in, void* out, size_t count) {
  WithImpl(isa, [&](auto impl) { NarrowHalfIn<decltype(impl)>(type, in, out, count); });
}

void ScaleArrayWith(SimdIsa isa, DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  WithImpl(isa, [&](auto impl) {
    if (IsHalf(type)) return ScaleHalfIn<decltype(impl)>(type, scalar, src, dst, count);
    ScaleIn<decltype(impl)>(type, scalar, src, dst, count);
  });
}

void DivideArrayWith(SimdIsa isa, DataType type, void* data, size_t count, int divisor) {
  WithImpl(isa, [&](auto impl) {
    if (IsHalf(type)) return DivideHalfIn<decltype(impl)>(type, data, count, divisor);
    DivideIn<decltype(impl)>(type, data, count, divisor);
  });
}

void WidenHalf(DataType type, const void* in, float* out, size_t count) {
  WidenHalfWith(PreferredElementwiseIsa(), type, in, out, count);
}

void NarrowHalf(DataType type, const float* in, void* out, size_t count) {
  NarrowHalfWith(PreferredElementwiseIsa(), type, in, out, count);
}

void ScaleArray(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  ScaleArrayWith(PreferredElementwiseIsa(), type, scalar, src, dst, count);
}

void DivideArray(DataType type, void* data, size_t count, int divisor) {
  DivideArrayWith(PreferredElementwiseIsa(), type, data, count, divisor);
}

namespace {

// ---- Half reducers: dst = narrow(widen(a) op widen(b)), op in float32 with the float32
// reducers' rules (max/min return the NaN operand, a when both are; b when equal). dst
// may equal a or b: every group is read before it is written.

template <RedOp kOp>
TESSERA_ALWAYS_INLINE float ApplyOne(float a, float b) {
  if constexpr (kOp == RedOp::kSum) return element::Sum::Apply(a, b);
  if constexpr (kOp == RedOp::kProd) return element::Prod::Apply(a, b);
  if constexpr (kOp == RedOp::kMax) return element::Max::Apply(a, b);
  return element::Min::Apply(a, b);
}

// One value at a time: the reference the vector loops fall back to for tails and for
// groups that hold a NaN.
template <DataType kType, RedOp kOp>
void HalfReduceScalar(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    uint16_t x, y;
    std::memcpy(&x, static_cast<const char*>(a) + 2 * i, 2);
    std::memcpy(&y, static_cast<const char*>(b) + 2 * i, 2);
    uint16_t r;
    if constexpr (kType == DataType::kFloat16) {
      r = FloatToHalf(ApplyOne<kOp>(HalfToFloat(x), HalfToFloat(y)));
    } else {
      r = FloatToBfloat16(ApplyOne<kOp>(Bfloat16ToFloat(x), Bfloat16ToFloat(y)));
    }
    std::memcpy(static_cast<char*>(dst) + 2 * i, &r, 2);
  }
}

// The portable implementation: a block at a time widened into float32 on the stack,
// reduced by the baseline float32 kernel and narrowed.
template <DataType kType, RedOp kOp>
void HalfReducePortable(void* dst, const void* a, const void* b, size_t count) {
  static const Reducer f32 = [] {
    Reducer r;
    GetReducerForIsa(DataType::kFloat32, kOp, SimdIsa::kBaseline, &r);
    return r;
  }();
  constexpr size_t kBlock = 1024;
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  for (size_t i = 0; i < count; i += kBlock) {
    const size_t n = std::min(kBlock, count - i);
    WidenHalfIn<Portable>(kType, static_cast<const uint16_t*>(a) + i, fa, n);
    WidenHalfIn<Portable>(kType, static_cast<const uint16_t*>(b) + i, fb, n);
    f32.fn(fa, fa, fb, n);
    NarrowHalfIn<Portable>(kType, fa, static_cast<uint16_t*>(dst) + i, n);
  }
}

// The AVX2 implementation: one pass, 32 values per iteration, nothing stored in between.
// Sums and products widen, compute in float32 and round; max and min compare the 16-bit
// values as integers (HalfMaxMinAvx2).
template <RedOp kOp>
TESSERA_TARGET_AVX2 TESSERA_ALWAYS_INLINE __m256 SumOrProd(__m256 a, __m256 b) {
  return kOp == RedOp::kSum ? _mm256_add_ps(a, b) : _mm256_mul_ps(a, b);
}

// float16 through F16C. vcvtps2ph narrows a NaN exactly as FloatToHalf does, so no group
// needs the scalar code.
template <RedOp kOp>
TESSERA_TARGET_AVX2 void HalfReduceFloat16Avx2(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  const __m128i* a = static_cast<const __m128i*>(a_v);
  const __m128i* b = static_cast<const __m128i*>(b_v);
  __m128i* dst = static_cast<__m128i*>(dst_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 4, b += 4, dst += 4) {
    const __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128(a)), b0 = _mm256_cvtph_ps(_mm_loadu_si128(b));
    const __m256 a1 = _mm256_cvtph_ps(_mm_loadu_si128(a + 1)), b1 = _mm256_cvtph_ps(_mm_loadu_si128(b + 1));
    const __m256 a2 = _mm256_cvtph_ps(_mm_loadu_si128(a + 2)), b2 = _mm256_cvtph_ps(_mm_loadu_si128(b + 2));
    const __m256 a3 = _mm256_cvtph_ps(_mm_loadu_si128(a + 3)), b3 = _mm256_cvtph_ps(_mm_loadu_si128(b + 3));
    const __m128i r0 = _mm256_cvtps_ph(SumOrProd<kOp>(a0, b0), _MM_FROUND_TO_NEAREST_INT);
    const __m128i r1 = _mm256_cvtps_ph(SumOrProd<kOp>(a1, b1), _MM_FROUND_TO_NEAREST_INT);
    const __m128i r2 = _mm256_cvtps_ph(SumOrProd<kOp>(a2, b2), _MM_FROUND_TO_NEAREST_INT);
    const __m128i r3 = _mm256_cvtps_ph(SumOrProd<kOp>(a3, b3), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(dst, r0);
    _mm_storeu_si128(dst + 1, r1);
    _mm_storeu_si128(dst + 2, r2);
    _mm_storeu_si128(dst + 3, r3);
  }
  HalfReduceScalar<DataType::kFloat16, kOp>(dst, a, b, count - i);
}

// bfloat16 without a shuffle. A 32-bit lane holds two values, the even one in its low
// half and the odd one in its high half. Widening is a shift (even) or a mask (odd), the
// op runs on the even and the odd values separately, and each rounded result goes back
// into the half it came from. No value leaves its lane. A NaN result (from a NaN input,
// inf - inf or 0 * inf) sends the group to the scalar code: the integer rounding is not
// for NaN.
template <RedOp kOp>
TESSERA_TARGET_AVX2 TESSERA_ALWAYS_INLINE void Bfloat16PairsAvx2(__m256i x, __m256i y, __m256i* out, __m256* nan) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const __m256 xe = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)), ye = _mm256_castsi256_ps(_mm256_slli_epi32(y, 16));
  const __m256 xo = _mm256_castsi256_ps(_mm256_and_si256(x, high)), yo = _mm256_castsi256_ps(_mm256_and_si256(y, high));
  const __m256 re = SumOrProd<kOp>(xe, ye), ro = SumOrProd<kOp>(xo, yo);
  *nan = _mm256_or_ps(*nan, _mm256_or_ps(_mm256_cmp_ps(re, re, _CMP_UNORD_Q), _mm256_cmp_ps(ro, ro, _CMP_UNORD_Q)));
  const __m256i even = _mm256_srli_epi32(RoundToBfloat16High(_mm256_castps_si256(re)), 16);
  const __m256i odd = _mm256_and_si256(RoundToBfloat16High(_mm256_castps_si256(ro)), high);
  *out = _mm256_or_si256(even, odd);
}

template <RedOp kOp>
TESSERA_TARGET_AVX2 void HalfReduceBfloat16Avx2(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  const __m256i* a = static_cast<const __m256i*>(a_v);
  const __m256i* b = static_cast<const __m256i*>(b_v);
  __m256i* dst = static_cast<__m256i*>(dst_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 2, b += 2, dst += 2) {
    __m256 nan = _mm256_setzero_ps();
    __m256i r0, r1;
    Bfloat16PairsAvx2<kOp>(_mm256_loadu_si256(a), _mm256_loadu_si256(b), &r0, &nan);
    Bfloat16PairsAvx2<kOp>(_mm256_loadu_si256(a + 1), _mm256_loadu_si256(b + 1), &r1, &nan);
    if (_mm256_movemask_ps(nan) != 0) {
      HalfReduceScalar<DataType::kBfloat16, kOp>(dst, a, b, 32);
      continue;
    }
    _mm256_storeu_si256(dst, r0);
    _mm256_storeu_si256(dst + 1, r1);
  }
  HalfReduceScalar<DataType::kBfloat16, kOp>(dst, a, b, count - i);
}

// Max and min need no arithmetic: the result is one of the inputs, and narrowing a
// widened value gives back its bits. So they compare the 16-bit values as integers, for
// both types: sign and magnitude become a two's complement key (vpsignw negates the
// magnitude where the value is negative; -0 and +0 both become 0, equal as floats are),
// and the larger (max) or smaller (min) key picks its value, b when the keys are equal.
// kNanAbove is the magnitude above which a value is NaN; groups with a NaN go to the
// scalar code.
template <DataType kType, RedOp kOp>
TESSERA_TARGET_AVX2 void HalfMaxMinAvx2(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  constexpr int16_t kNanAbove = kType == DataType::kFloat16 ? 0x7c00 : 0x7f80;
  const __m256i magnitude_bits = _mm256_set1_epi16(0x7fff);
  const __m256i nan_above = _mm256_set1_epi16(kNanAbove);
  const __m256i* a = static_cast<const __m256i*>(a_v);
  const __m256i* b = static_cast<const __m256i*>(b_v);
  __m256i* dst = static_cast<__m256i*>(dst_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 2, b += 2, dst += 2) {
    const __m256i x0 = _mm256_loadu_si256(a), x1 = _mm256_loadu_si256(a + 1);
    const __m256i y0 = _mm256_loadu_si256(b), y1 = _mm256_loadu_si256(b + 1);
    const __m256i mx0 = _mm256_and_si256(x0, magnitude_bits), mx1 = _mm256_and_si256(x1, magnitude_bits);
    const __m256i my0 = _mm256_and_si256(y0, magnitude_bits), my1 = _mm256_and_si256(y1, magnitude_bits);
    const __m256i nan = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi16(mx0, nan_above), _mm256_cmpgt_epi16(mx1, nan_above)),
        _mm256_or_si256(_mm256_cmpgt_epi16(my0, nan_above), _mm256_cmpgt_epi16(my1, nan_above)));
    if (_mm256_movemask_epi8(nan) != 0) {
      HalfReduceScalar<kType, kOp>(dst, a, b, 32);
      continue;
    }
    const __m256i kx0 = _mm256_sign_epi16(mx0, x0), kx1 = _mm256_sign_epi16(mx1, x1);
    const __m256i ky0 = _mm256_sign_epi16(my0, y0), ky1 = _mm256_sign_epi16(my1, y1);
    const __m256i pick_x0 = kOp == RedOp::kMax ? _mm256_cmpgt_epi16(kx0, ky0) : _mm256_cmpgt_epi16(ky0, kx0);
    const __m256i pick_x1 = kOp == RedOp::kMax ? _mm256_cmpgt_epi16(kx1, ky1) : _mm256_cmpgt_epi16(ky1, kx1);
    _mm256_storeu_si256(dst, _mm256_blendv_epi8(y0, x0, pick_x0));
    _mm256_storeu_si256(dst + 1, _mm256_blendv_epi8(y1, x1, pick_x1));
  }
  HalfReduceScalar<kType, kOp>(dst, a, b, count - i);
}

// HalfMaxMinAvx2 on 64-byte vectors. AVX-512 has no vpsignw, so the key is the magnitude
// subtracted from zero under the mask of sign bits.
template <DataType kType, RedOp kOp>
TESSERA_TARGET_AVX512 void HalfMaxMinAvx512(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  constexpr int16_t kNanAbove = kType == DataType::kFloat16 ? 0x7c00 : 0x7f80;
  const __m512i magnitude_bits = _mm512_set1_epi16(0x7fff);
  const __m512i nan_above = _mm512_set1_epi16(kNanAbove);
  const __m512i zero = _mm512_setzero_si512();
  const char* a = static_cast<const char*>(a_v);
  const char* b = static_cast<const char*>(b_v);
  char* dst = static_cast<char*>(dst_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 64, b += 64, dst += 64) {
    const __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(b);
    const __m512i mx = _mm512_and_si512(x, magnitude_bits), my = _mm512_and_si512(y, magnitude_bits);
    if ((_mm512_cmpgt_epi16_mask(mx, nan_above) | _mm512_cmpgt_epi16_mask(my, nan_above)) != 0) {
      HalfReduceScalar<kType, kOp>(dst, a, b, 32);
      continue;
    }
    const __m512i kx = _mm512_mask_sub_epi16(mx, _mm512_movepi16_mask(x), zero, mx);
    const __m512i ky = _mm512_mask_sub_epi16(my, _mm512_movepi16_mask(y), zero, my);
    const __mmask32 pick_x = kOp == RedOp::kMax ? _mm512_cmpgt_epi16_mask(kx, ky) : _mm512_cmpgt_epi16_mask(ky, kx);
    _mm512_storeu_si512(dst, _mm512_mask_blend_epi16(pick_x, y, x));
  }
  if (i < count) HalfMaxMinAvx2<kType, kOp>(dst, a, b, count - i);
}

// The AVX-512 loops for sums and products: the same shapes on 64-byte vectors, 32 values
// per iteration; a tail goes to the AVX2 loop.
template <RedOp kOp>
TESSERA_TARGET_AVX512 TESSERA_ALWAYS_INLINE __m512 SumOrProd512(__m512 a, __m512 b) {
  return kOp == RedOp::kSum ? _mm512_add_ps(a, b) : _mm512_mul_ps(a, b);
}

template <RedOp kOp>
TESSERA_TARGET_AVX512 void HalfReduceFloat16Avx512(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  const __m256i* a = static_cast<const __m256i*>(a_v);
  const __m256i* b = static_cast<const __m256i*>(b_v);
  __m256i* dst = static_cast<__m256i*>(dst_v);
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 2, b += 2, dst += 2) {
    const __m512 a0 = _mm512_cvtph_ps(_mm256_loadu_si256(a)), b0 = _mm512_cvtph_ps(_mm256_loadu_si256(b));
    const __m512 a1 = _mm512_cvtph_ps(_mm256_loadu_si256(a + 1)), b1 = _mm512_cvtph_ps(_mm256_loadu_si256(b + 1));
    const __m256i r0 = _mm512_cvtps_ph(SumOrProd512<kOp>(a0, b0), _MM_FROUND_TO_NEAREST_INT);
    const __m256i r1 = _mm512_cvtps_ph(SumOrProd512<kOp>(a1, b1), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(dst, r0);
    _mm256_storeu_si256(dst + 1, r1);
  }
  if (i < count) HalfReduceFloat16Avx2<kOp>(dst, a, b, count - i);
}

template <RedOp kOp>
TESSERA_TARGET_AVX512 void HalfReduceBfloat16Avx512(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  const char* a = static_cast<const char*>(a_v);
  const char* b = static_cast<const char*>(b_v);
  char* dst = static_cast<char*>(dst_v);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  size_t i = 0;
  for (; i + 32 <= count; i += 32, a += 64, b += 64, dst += 64) {
    const __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(b);
    const __m512 xe = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    const __m512 ye = _mm512_castsi512_ps(_mm512_slli_epi32(y, 16));
    const __m512 xo = _mm512_castsi512_ps(_mm512_and_si512(x, high));
    const __m512 yo = _mm512_castsi512_ps(_mm512_and_si512(y, high));
    const __m512 re = SumOrProd512<kOp>(xe, ye), ro = SumOrProd512<kOp>(xo, yo);
    if ((_mm512_cmp_ps_mask(re, re, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(ro, ro, _CMP_UNORD_Q)) != 0) {
      HalfReduceScalar<DataType::kBfloat16, kOp>(dst, a, b, 32);
      continue;
    }
    const __m512i even = _mm512_srli_epi32(RoundToBfloat16High512(_mm512_castps_si512(re)), 16);
    const __m512i odd = RoundToBfloat16High512(_mm512_castps_si512(ro));
    _mm512_storeu_si512(dst, _mm512_ternarylogic_epi32(even, odd, high, 0xf8));  // even | (odd & high)
  }
  if (i < count) HalfReduceBfloat16Avx2<kOp>(dst, a, b, count - i);
}

template <RedOp kOp>
ReduceFn HalfReducerFn(SimdIsa isa, DataType type) {
  const bool f16 = type == DataType::kFloat16;
  if (static_cast<int>(isa) > static_cast<int>(SupportedSimdIsa())) isa = SimdIsa::kBaseline;
  if constexpr (kOp == RedOp::kMax || kOp == RedOp::kMin) {
    switch (isa) {
      case SimdIsa::kAvx512:
        return f16 ? &HalfMaxMinAvx512<DataType::kFloat16, kOp> : &HalfMaxMinAvx512<DataType::kBfloat16, kOp>;
      case SimdIsa::kAvx2:
        return f16 ? &HalfMaxMinAvx2<DataType::kFloat16, kOp> : &HalfMaxMinAvx2<DataType::kBfloat16, kOp>;
      case SimdIsa::kBaseline: break;
    }
    return f16 ? &HalfReducePortable<DataType::kFloat16, kOp> : &HalfReducePortable<DataType::kBfloat16, kOp>;
  } else {
    switch (isa) {
      case SimdIsa::kAvx512: return f16 ? &HalfReduceFloat16Avx512<kOp> : &HalfReduceBfloat16Avx512<kOp>;
      case SimdIsa::kAvx2: return f16 ? &HalfReduceFloat16Avx2<kOp> : &HalfReduceBfloat16Avx2<kOp>;
      case SimdIsa::kBaseline: break;
    }
    return f16 ? &HalfReducePortable<DataType::kFloat16, kOp> : &HalfReducePortable<DataType::kBfloat16, kOp>;
  }
}

ReduceFn HalfReducerFor(SimdIsa isa, DataType type, RedOp op) {
  if (!IsHalf(type)) return nullptr;
  switch (op) {
    case RedOp::kSum: return HalfReducerFn<RedOp::kSum>(isa, type);
    case RedOp::kProd: return HalfReducerFn<RedOp::kProd>(isa, type);
    case RedOp::kMax: return HalfReducerFn<RedOp::kMax>(isa, type);
    case RedOp::kMin: return HalfReducerFn<RedOp::kMin>(isa, type);
    case RedOp::kAvg: break;
  }
  return nullptr;
}

}  // namespace

Status GetHalfReducerWith(SimdIsa isa, DataType type, RedOp op, Reducer* out) {
  const ReduceFn fn = HalfReducerFor(isa, type, op);
  if (fn == nullptr) {
    return InvalidArgument(std::string("no half-precision reducer for ") + DataTypeName(type) + " with op " +
                           std::to_string(static_cast<int>(op)));
  }
  out->fn = fn;
  out->elem_size = 2;
  return Status::Ok();
}

Status GetHalfReducer(DataType type, RedOp op, Reducer* out) {
  return GetHalfReducerWith(PreferredElementwiseIsa(), type, op, out);
}

}  // namespace tessera
