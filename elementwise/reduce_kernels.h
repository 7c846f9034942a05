// Element-wise reduction kernels: dst[i] = a[i] op b[i], vectorised with the compiler's
// vector extensions, compiled for each SimdIsa level (simd_isa.h); GetReducer returns
// the AVX2 ones where the CPU has AVX2, else baseline (docs/kernels.md says why not
// AVX-512). dst may be a or b exactly; other overlaps are not allowed. No alignment is
// required.
#ifndef TESSERA_ELEMENTWISE_REDUCE_KERNELS_H_
#define TESSERA_ELEMENTWISE_REDUCE_KERNELS_H_

#include "base/status.h"
#include "base/types.h"
#include "elementwise/simd_isa.h"
#include "elementwise/reducer.h"

namespace tessera {

// The kernel for (type, op), or InvalidArgument naming what is not supported.
Status GetReducer(DataType type, RedOp op, Reducer* out);

// The level GetReducer uses (never wider than SupportedSimdIsa()).
SimdIsa PreferredKernelIsa();

// GetReducer compiled for `isa`, for tests and benchmarks; InvalidArgument if this CPU
// does not support `isa`.
Status GetReducerForIsa(DataType type, RedOp op, SimdIsa isa, Reducer* out);

}  // namespace tessera

#endif  // TESSERA_ELEMENTWISE_REDUCE_KERNELS_H_
