// Element-wise reduction kernels: dst[i] = a[i] op b[i], vectorised with the compiler's
// vector extensions, compiled for baseline x86-64 (SSE2), AVX2 and AVX-512; GetReducer
// returns the AVX2 ones where the CPU has AVX2, else baseline (docs/kernels.md says why
// not AVX-512). dst may be a or b exactly; other overlaps are not allowed. No alignment is
// required.
#ifndef TESSERA_COLLECTIVES_REDUCE_KERNELS_H_
#define TESSERA_COLLECTIVES_REDUCE_KERNELS_H_

#include "base/status.h"
#include "base/types.h"
#include "transport/transport.h"

namespace tessera {

// The kernel for (type, op), or InvalidArgument naming what is not supported.
Status GetReducer(DataType type, RedOp op, Reducer* out);

// Instruction sets the kernels are compiled for, narrowest first.
enum class KernelIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
const char* KernelIsaName(KernelIsa isa);  // "baseline", "avx2", "avx512"

// The widest set this CPU runs, and the one GetReducer uses (never wider).
KernelIsa SupportedKernelIsa();
KernelIsa PreferredKernelIsa();

// GetReducer compiled for `isa`, for tests and benchmarks; InvalidArgument if this CPU
// does not support `isa`.
Status GetReducerForIsa(DataType type, RedOp op, KernelIsa isa, Reducer* out);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_REDUCE_KERNELS_H_
