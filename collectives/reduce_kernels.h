// Element-wise reduction kernels: dst[i] = a[i] op b[i], vectorised with the compiler's
// vector extensions (32-byte vectors: AVX where compiled for it, two SSE2 registers
// otherwise). dst may be a or b exactly; other overlaps are not allowed.
#ifndef TESSERA_COLLECTIVES_REDUCE_KERNELS_H_
#define TESSERA_COLLECTIVES_REDUCE_KERNELS_H_

#include "base/status.h"
#include "base/types.h"
#include "transport/transport.h"

namespace tessera {

// The kernel for (type, op), or InvalidArgument naming what is not supported.
Status GetReducer(DataType type, RedOp op, Reducer* out);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_REDUCE_KERNELS_H_
