// Element-wise helpers around the reductions: float16/bfloat16 <-> float32, PreMulSum's
// scaling and avg's division.
//
// Every array function has two implementations that give identical bits:
// - portable: branch-free C++ on GCC vector extensions (16-byte vectors, SSE2), for any
//   x86-64;
// - avx2: compiled for AVX2 through per-function target attributes (no -march for the
//   build): float16 through F16C's conversions (vcvtph2ps, vcvtps2ph with round to nearest
//   even), bfloat16 through AVX2 integer intrinsics, scaling and division through the
//   portable code on 32-byte vectors.
// The best one the CPU supports is chosen once per process. A tail shorter than a vector
// goes through vector code on a zero-padded copy. The scalar functions (HalfToFloat...)
// compute the same bits one value at a time; elementwise_test checks all of them against
// each other and against references computed in float64.
#include "collectives/elementwise.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "collectives/reduce_kernels.h"

// Helpers here return vectors by value. Each is always inlined, so no vector crosses a
// call ABI and GCC's warning about the AVX vector ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tessera {
namespace {

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,f16c")))

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

// The type integer sums and products run in: the unsigned type of the same size, which
// gives the same bits as two's complement wrap-around without the undefined behaviour of
// signed overflow. Floating types are themselves.
template <typename T, bool = std::is_integral<T>::value>
struct Wrapping {
  typedef T type;
};
template <typename T>
struct Wrapping<T, true> {
  typedef std::make_unsigned_t<T> type;
};

// dst = s * src. Integers multiply with wrap-around, as the scalar C++ does after
// promotion and truncation.
template <typename T0, size_t kBytes>
TESSERA_ALWAYS_INLINE void ScaleBody(const void* scalar, const void* src, void* dst, size_t count) {
  typedef typename Wrapping<T0>::type T;
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

// bfloat16 -> float32: each value becomes the upper half of a 32-bit lane. Sixteen
// values per iteration: one load, one permute (unpack works within 128-bit lanes, so the
// middle quarters swap first), and an unpack with zeros for each half.
TESSERA_TARGET_AVX2 void Avx2::WidenBfloat16(const void* in_v, float* out, size_t count) {
  const uint16_t* in = static_cast<const uint16_t*>(in_v);
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i x = _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_unpacklo_epi16(zero, x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8), _mm256_unpackhi_epi16(zero, x));
  }
  if (i < count) WidenBfloat16Body<kBytes>(in + i, out + i, count - i);
}

// Eight float32 bit patterns -> eight bfloat16 in the low halves of the 32-bit lanes,
// rounded to nearest even (overflow reaches infinity). Not for NaN: the increment could
// carry a NaN into infinity or the sign bit.
TESSERA_TARGET_AVX2 TESSERA_ALWAYS_INLINE __m256i RoundToBfloat16(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
}

// Sixteen values per iteration. NaNs are rare, so one test per 16 sends a group that has
// any to the portable code (same bits), and the common path skips the NaN masks.
TESSERA_TARGET_AVX2 void Avx2::NarrowBfloat16(const float* in, void* out_v, size_t count) {
  uint16_t* out = static_cast<uint16_t*>(out_v);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(in + i);
    const __m256 x1 = _mm256_loadu_ps(in + i + 8);
    const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(x0, x0, _CMP_UNORD_Q), _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q));
    if (!_mm256_testz_ps(nan, nan)) {
      NarrowBfloat16Body<kBytes>(in + i, out + i, 16);
      continue;
    }
    const __m256i r0 = RoundToBfloat16(_mm256_castps_si256(x0));
    const __m256i r1 = RoundToBfloat16(_mm256_castps_si256(x1));
    // packus works within 128-bit lanes: [r0 lo, r1 lo, r0 hi, r1 hi]; the permute puts
    // the four quarters back in order. Values are < 2^16, so nothing saturates.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  if (i < count) NarrowBfloat16Body<kBytes>(in + i, out + i, count - i);
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
    default: return;  // half types are scaled in float32; fp8 has no reductions
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
    default: return;
  }
}

ElementwiseIsa DetectIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return ElementwiseIsa::kAvx2F16c;
  return ElementwiseIsa::kPortable;
}

bool UseAvx2(ElementwiseIsa isa) { return isa == ElementwiseIsa::kAvx2F16c && SupportedElementwiseIsa() == isa; }

}  // namespace

float HalfToFloat(uint16_t h) { return FromBits(HalfBitsToFloatBits<uint32_t, int32_t, float>(h)); }

uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(FloatBitsToHalfBits<uint32_t, float>(Bits(f))); }

float Bfloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float f) { return static_cast<uint16_t>(FloatBitsToBfloat16Bits(Bits(f))); }

const char* ElementwiseIsaName(ElementwiseIsa isa) {
  return isa == ElementwiseIsa::kAvx2F16c ? "avx2+f16c" : "portable";
}

ElementwiseIsa SupportedElementwiseIsa() {
  static const ElementwiseIsa isa = DetectIsa();
  return isa;
}

void WidenHalfWith(ElementwiseIsa isa, DataType type, const void* in, float* out, size_t count) {
  UseAvx2(isa) ? WidenHalfIn<Avx2>(type, in, out, count) : WidenHalfIn<Portable>(type, in, out, count);
}

void NarrowHalfWith(ElementwiseIsa isa, DataType type, const float* in, void* out, size_t count) {
  UseAvx2(isa) ? NarrowHalfIn<Avx2>(type, in, out, count) : NarrowHalfIn<Portable>(type, in, out, count);
}

void ScaleArrayWith(ElementwiseIsa isa, DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  UseAvx2(isa) ? ScaleIn<Avx2>(type, scalar, src, dst, count) : ScaleIn<Portable>(type, scalar, src, dst, count);
}

void DivideArrayWith(ElementwiseIsa isa, DataType type, void* data, size_t count, int divisor) {
  UseAvx2(isa) ? DivideIn<Avx2>(type, data, count, divisor) : DivideIn<Portable>(type, data, count, divisor);
}

void WidenHalf(DataType type, const void* in, float* out, size_t count) {
  WidenHalfWith(SupportedElementwiseIsa(), type, in, out, count);
}

void NarrowHalf(DataType type, const float* in, void* out, size_t count) {
  NarrowHalfWith(SupportedElementwiseIsa(), type, in, out, count);
}

void ScaleArray(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  ScaleArrayWith(SupportedElementwiseIsa(), type, scalar, src, dst, count);
}

void DivideArray(DataType type, void* data, size_t count, int divisor) {
  DivideArrayWith(SupportedElementwiseIsa(), type, data, count, divisor);
}

namespace {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// dst = narrow(widen(a) op widen(b)), a block at a time in float32 on the stack; dst
// may equal a or b (each block is read before it is written).
template <DataType kType, RedOp kOp>
void HalfReduce(void* dst, const void* a, const void* b, size_t count) {
  static const Reducer f32 = [] {
    Reducer r;
    GetReducer(DataType::kFloat32, kOp, &r);
    return r;
  }();
  constexpr size_t kBlock = 1024;
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  for (size_t i = 0; i < count; i += kBlock) {
    const size_t n = std::min(kBlock, count - i);
    WidenHalf(kType, static_cast<const uint16_t*>(a) + i, fa, n);
    WidenHalf(kType, static_cast<const uint16_t*>(b) + i, fb, n);
    f32.fn(fa, fa, fb, n);
    NarrowHalf(kType, fa, static_cast<uint16_t*>(dst) + i, n);
  }
}

template <DataType kType>
ReduceFn HalfReducerFor(RedOp op) {
  switch (op) {
    case RedOp::kSum: return &HalfReduce<kType, RedOp::kSum>;
    case RedOp::kProd: return &HalfReduce<kType, RedOp::kProd>;
    case RedOp::kMax: return &HalfReduce<kType, RedOp::kMax>;
    case RedOp::kMin: return &HalfReduce<kType, RedOp::kMin>;
    case RedOp::kAvg: break;
  }
  return nullptr;
}

}  // namespace

Status GetHalfReducer(DataType type, RedOp op, Reducer* out) {
  const ReduceFn fn = type == DataType::kFloat16    ? HalfReducerFor<DataType::kFloat16>(op)
                      : type == DataType::kBfloat16 ? HalfReducerFor<DataType::kBfloat16>(op)
                                                    : nullptr;
  if (fn == nullptr) {
    return InvalidArgument(std::string("no half-precision reducer for ") + DataTypeName(type) + " with op " +
                           std::to_string(static_cast<int>(op)));
  }
  out->fn = fn;
  out->elem_size = 2;
  return Status::Ok();
}

}  // namespace tessera
