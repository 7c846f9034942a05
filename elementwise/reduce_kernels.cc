// Element-wise reduction kernels dst = a op b. One template body (GCC vector extensions)
// is compiled three times: for baseline x86-64 (SSE2), for AVX2 and for AVX-512, each
// through a per-function target attribute, so the library runs on any x86-64 and the
// build needs no -march flag. GetReducer uses AVX2 where the CPU has it (see
// PreferredKernelIsa for why not AVX-512), else baseline; the choice is made once per
// process (simd_isa.h). docs/kernels.md has the measurements behind these choices.
#include "elementwise/reduce_kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "elementwise/element_ops.h"

namespace tessera {
namespace {

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2")))
#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// Vector ops update `a` in place (vectors by reference: no vector crosses a call ABI).
// They are always inlined, so each compiles with the instruction set of its caller.
struct SumV { template <typename V> static TESSERA_ALWAYS_INLINE void Apply(V& a, const V& b) { a = a + b; } };
struct ProdV { template <typename V> static TESSERA_ALWAYS_INLINE void Apply(V& a, const V& b) { a = a * b; } };
// Max and min propagate NaN whichever side it is on (element_ops.h). The select yields
// b when either is NaN; KeepNan then puts a back where a is the NaN. KeepNan tests NaN on the bits, with
// integer compares: GCC scalarises a second float comparison when a kernel is compiled
// for AVX-512 (it types the mask by the non-AVX-512 function the op is written in), while
// this form compiles to one max/min, one integer compare and one masked move.
template <typename V>
TESSERA_ALWAYS_INLINE void KeepNan(V& m, const V& a) {
  typedef std::remove_reference_t<decltype(a[0])> T;
  if constexpr (std::is_floating_point<T>::value) {
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
    typedef I VI __attribute__((vector_size(sizeof(V))));
    constexpr I kAbs = std::numeric_limits<I>::max();                  // all bits but the sign
    constexpr I kInf = kAbs ^ ((I{1} << (std::numeric_limits<T>::digits - 1)) - 1);  // infinity's bits
    VI ai, mi;
    std::memcpy(&ai, &a, sizeof(V));
    std::memcpy(&mi, &m, sizeof(V));
    const VI nan = (ai & kAbs) > kInf;  // -1 where a is NaN
    mi = (mi & ~nan) | (ai & nan);
    std::memcpy(&m, &mi, sizeof(V));
  }
}
struct MaxV {
  template <typename V>
  static TESSERA_ALWAYS_INLINE void Apply(V& a, const V& b) {
    V m = a > b ? a : b;
    KeepNan(m, a);
    a = m;
  }
};
struct MinV {
  template <typename V>
  static TESSERA_ALWAYS_INLINE void Apply(V& a, const V& b) {
    V m = a < b ? a : b;
    KeepNan(m, a);
    a = m;
  }
};

// Unaligned vector load and store (memcpy of one vector compiles to one move). Vectors
// pass by reference: no vector crosses a call ABI.
template <typename V>
TESSERA_ALWAYS_INLINE void Load(V& v, const char* p) {
  std::memcpy(&v, p, sizeof(V));
}
template <typename V>
TESSERA_ALWAYS_INLINE void Store(char* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// The loop, on vectors of kBytes bytes, the tail one element at a time (ScalarOp, an
// op of element_ops.h). No alignment is assumed. dst may be a or b exactly: every
// element is read before it is written.
template <typename T, typename VecOp, typename ScalarOp, size_t kBytes>
TESSERA_ALWAYS_INLINE void KernelBody(void* dst_v, const void* a_v, const void* b_v, size_t count) {
  typedef T V __attribute__((vector_size(kBytes)));
  constexpr size_t kLanes = kBytes / sizeof(T);
  char* dst = static_cast<char*>(dst_v);
  const char* a = static_cast<const char*>(a_v);
  const char* b = static_cast<const char*>(b_v);
  size_t i = 0;
  // Four independent vectors per iteration keep enough loads in flight to saturate
  // memory. They are separate variables, not an array, so they stay in registers.
  for (; i + 4 * kLanes <= count; i += 4 * kLanes) {
    const size_t at = i * sizeof(T);
    V a0, a1, a2, a3, b0, b1, b2, b3;
    Load(a0, a + at);
    Load(a1, a + at + kBytes);
    Load(a2, a + at + 2 * kBytes);
    Load(a3, a + at + 3 * kBytes);
    Load(b0, b + at);
    Load(b1, b + at + kBytes);
    Load(b2, b + at + 2 * kBytes);
    Load(b3, b + at + 3 * kBytes);
    VecOp::Apply(a0, b0);
    VecOp::Apply(a1, b1);
    VecOp::Apply(a2, b2);
    VecOp::Apply(a3, b3);
    Store(dst + at, a0);
    Store(dst + at + kBytes, a1);
    Store(dst + at + 2 * kBytes, a2);
    Store(dst + at + 3 * kBytes, a3);
  }
  for (; i + kLanes <= count; i += kLanes) {
    const size_t at = i * sizeof(T);
    V va, vb;
    Load(va, a + at);
    Load(vb, b + at);
    VecOp::Apply(va, vb);
    Store(dst + at, va);
  }
  for (; i < count; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    T r = ScalarOp::Apply(x, y);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

// The three compilations of the body. Baseline uses 32-byte vectors too: GCC splits
// them into two SSE2 registers, which keeps the unrolled loop's shape.
template <typename T, typename VecOp, typename ScalarOp>
void KernelBaseline(void* dst, const void* a, const void* b, size_t count) {
  KernelBody<T, VecOp, ScalarOp, 16>(dst, a, b, count);
}

template <typename T, typename VecOp, typename ScalarOp>
TESSERA_TARGET_AVX2 void KernelAvx2(void* dst, const void* a, const void* b, size_t count) {
  KernelBody<T, VecOp, ScalarOp, 32>(dst, a, b, count);
}

template <typename T, typename VecOp, typename ScalarOp>
TESSERA_TARGET_AVX512 void KernelAvx512(void* dst, const void* a, const void* b, size_t count) {
  KernelBody<T, VecOp, ScalarOp, 64>(dst, a, b, count);
}


template <typename T, typename VecOp, typename ScalarOp>
ReduceFn Pick(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::kAvx512: return &KernelAvx512<T, VecOp, ScalarOp>;
    case SimdIsa::kAvx2: return &KernelAvx2<T, VecOp, ScalarOp>;
    case SimdIsa::kBaseline: break;
  }
  return &KernelBaseline<T, VecOp, ScalarOp>;
}

template <typename T>
Status ForType(RedOp op, SimdIsa isa, Reducer* out) {
  typedef typename element::Wrapping<T>::type W;  // sums and products wrap around
  out->elem_size = sizeof(T);
  switch (op) {
    case RedOp::kSum: out->fn = Pick<W, SumV, element::Sum>(isa); return Status::Ok();
    case RedOp::kProd: out->fn = Pick<W, ProdV, element::Prod>(isa); return Status::Ok();
    case RedOp::kMax: out->fn = Pick<T, MaxV, element::Max>(isa); return Status::Ok();
    case RedOp::kMin: out->fn = Pick<T, MinV, element::Min>(isa); return Status::Ok();
    case RedOp::kAvg: break;
  }
  return InvalidArgument(std::string("op ") + RedOpName(op) + " is not supported yet");
}

}  // namespace

// AVX2 even where AVX-512 runs: at the sizes the transports hand to a reducer (128 KiB
// shared-memory slots, 256 KiB TCP chunks) and beyond, AVX-512 is no faster (the
// loop waits on L2 and memory, not on instructions), and on Skylake-SP wide instructions
// lower the core's clock for everything around them (glibc avoids AVX-512 there for the
// same reason). It doubles the speed only on L1-resident buffers (docs/kernels.md).
SimdIsa PreferredKernelIsa() {
  return SupportedSimdIsa() == SimdIsa::kAvx512 ? SimdIsa::kAvx2 : SupportedSimdIsa();
}

Status GetReducerForIsa(DataType type, RedOp op, SimdIsa isa, Reducer* out) {
  if (static_cast<int>(isa) > static_cast<int>(SupportedSimdIsa())) {
    return InvalidArgument(std::string("kernel instruction set ") + SimdIsaName(isa) +
                           " is not supported by this CPU");
  }
  switch (type) {
    case DataType::kInt8: return ForType<int8_t>(op, isa, out);
    case DataType::kUint8: return ForType<uint8_t>(op, isa, out);
    case DataType::kInt32: return ForType<int32_t>(op, isa, out);
    case DataType::kUint32: return ForType<uint32_t>(op, isa, out);
    case DataType::kInt64: return ForType<int64_t>(op, isa, out);
    case DataType::kUint64: return ForType<uint64_t>(op, isa, out);
    case DataType::kFloat32: return ForType<float>(op, isa, out);
    case DataType::kFloat64: return ForType<double>(op, isa, out);
    case DataType::kFloat16:
    case DataType::kBfloat16:  // reduced through float32 by the communicator
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: break;
  }
  return InvalidArgument(std::string("datatype ") + DataTypeName(type) + " is not supported yet");
}

// Every supported (type, op) found once: each reduction asks for its reducer, and the
// three switches cost a small call as much as its flight record.
Status GetReducer(DataType type, RedOp op, Reducer* out) {
  struct Table {
    Reducer reducer[kNumDataTypes][kNumRedOps];
    bool found[kNumDataTypes][kNumRedOps] = {};
  };
  static const Table table = [] {
    Table t;
    for (int d = 0; d < kNumDataTypes; ++d) {
      for (int o = 0; o < kNumRedOps; ++o) {
        t.found[d][o] = GetReducerForIsa(static_cast<DataType>(d), static_cast<RedOp>(o), PreferredKernelIsa(),
                                         &t.reducer[d][o]).ok();
      }
    }
    return t;
  }();
  const int d = static_cast<int>(type), o = static_cast<int>(op);
  if (d >= 0 && d < kNumDataTypes && o >= 0 && o < kNumRedOps && table.found[d][o]) {
    *out = table.reducer[d][o];
    return Status::Ok();
  }
  return GetReducerForIsa(type, op, PreferredKernelIsa(), out);  // its error
}

}  // namespace tessera
