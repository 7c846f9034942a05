// Element-wise helpers around the reductions, on host memory: the float16/bfloat16 <->
// float32 conversions (their one home: the communicator, the kernels, the host device
// engine, the tests and the benchmarks all use these), PreMulSum's scaling and avg's
// division, and the half reducers of TESSERA_HALF_WIRE=half.
#ifndef TESSERA_ELEMENTWISE_ELEMENTWISE_H_
#define TESSERA_ELEMENTWISE_ELEMENTWISE_H_

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "base/types.h"
#include "elementwise/reducer.h"
#include "elementwise/simd_isa.h"

namespace tessera {

// float16 (IEEE binary16) and bfloat16 <-> float32; to-half rounds to nearest even,
// keeps NaN a NaN and saturates to infinity like a hardware conversion. float16 gives the
// bits of x86's F16C conversions (vcvtph2ps, vcvtps2ph with round-to-nearest-even),
// NaNs included: a NaN comes out quiet with its payload kept (widening) or truncated
// (narrowing).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);

// The value of half type `type` (float16 or bfloat16) at `value`, in float32.
float HalfValueToFloat(DataType type, const void* value);

// Arrays: `type` is kFloat16 or kBfloat16.
void WidenHalf(DataType type, const void* in, float* out, size_t count);
void NarrowHalf(DataType type, const float* in, void* out, size_t count);

// dst[i] = scalar * src[i] in `type`; the half types in float32, rounded once. `scalar`
// points to one value of `type`; dst may be src.
void ScaleArray(DataType type, const void* scalar, const void* src, void* dst, size_t count);

// dst[i] /= divisor in `type`: integers truncate, as NCCL's avg does. Floating types
// divide (never multiply by a reciprocal); the half types in float32, rounded once. A
// divisor of 0 leaves integers unchanged.
void DivideArray(DataType type, void* data, size_t count, int divisor);

// A reducer on float16 or bfloat16 values themselves (sum, prod, max, min): each
// element is widened to float32, combined in float32 and rounded to the half type, so
// values travel in 16 bits and every step that combines them rounds once
// (TESSERA_HALF_WIRE=half). InvalidArgument for another type or op.
Status GetHalfReducer(DataType type, RedOp op, Reducer* out);

// The array functions and the half reducers above have an implementation per SimdIsa
// level (simd_isa.h) with identical results (docs/kernels.md): portable vector code
// for any x86-64 (kBaseline), AVX2 with F16C, and AVX-512. PreferredElementwiseIsa,
// never wider than SupportedSimdIsa(), is the one the functions above use.
SimdIsa PreferredElementwiseIsa();

// The same functions on a chosen implementation, for tests and benchmarks. An
// implementation this CPU does not support falls back to kBaseline.
void WidenHalfWith(SimdIsa isa, DataType type, const void* in, float* out, size_t count);
void NarrowHalfWith(SimdIsa isa, DataType type, const float* in, void* out, size_t count);
void ScaleArrayWith(SimdIsa isa, DataType type, const void* scalar, const void* src, void* dst, size_t count);
void DivideArrayWith(SimdIsa isa, DataType type, void* data, size_t count, int divisor);
Status GetHalfReducerWith(SimdIsa isa, DataType type, RedOp op, Reducer* out);

}  // namespace tessera

#endif  // TESSERA_ELEMENTWISE_ELEMENTWISE_H_
