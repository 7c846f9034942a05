// Element-wise helpers around the reductions: half-precision conversions (float16 and
// bfloat16 are reduced in float32 and rounded once at the end), the PreMulSum scaling,
// and the final division of avg.
#ifndef TESSERA_COLLECTIVES_ELEMENTWISE_H_
#define TESSERA_COLLECTIVES_ELEMENTWISE_H_

#include <cstddef>
#include <cstdint>

#include "base/types.h"

namespace tessera {

// float16 (IEEE binary16) and bfloat16 <-> float32; to-half rounds to nearest even,
// keeps NaN a NaN and saturates to infinity like a hardware conversion.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);

// Arrays: `type` is kFloat16 or kBfloat16.
void WidenHalf(DataType type, const void* in, float* out, size_t count);
void NarrowHalf(DataType type, const float* in, void* out, size_t count);

// dst[i] = scalar * src[i] in `type` (not a half type: those are scaled in float32).
// `scalar` points to one value of `type`.
void ScaleArray(DataType type, const void* scalar, const void* src, void* dst, size_t count);

// dst[i] /= divisor in `type`: integers truncate, as NCCL's avg does.
void DivideArray(DataType type, void* data, size_t count, int divisor);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_ELEMENTWISE_H_
