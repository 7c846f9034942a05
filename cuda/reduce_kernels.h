// Device-side element-wise kernels, the GPU twins of elementwise/reduce_kernels.h and
// elementwise/elementwise.h: dst = a op b for every datatype and operator, float16 and
// bfloat16 <-> float32 conversions, PreMulSum's scaling and avg's division.
//
// Contracts common to every function:
//  - `stream` is a cudaStream_t (nullptr: the legacy default stream), passed as void* so
//    that callers need no CUDA header. The work is enqueued on it and the call returns
//    without waiting; results are there once the stream reaches that point.
//  - Pointers are device memory (or anything the device may access: managed, mapped
//    host, CUDA IPC mappings), on the stream's device. No alignment is required:
//    16-byte vector loads are used where the pointers allow (docs/cuda.md).
//  - count == 0 enqueues nothing and is OK.
//  - Errors are Status with Code::kCudaError naming the function and the CUDA error;
//    without a usable CUDA driver and device every function answers that error
//    (cuda/availability.h) without touching the GPU. Bad (type, op) pairs are
//    InvalidArgument.
//  - Arithmetic matches the host kernels: integers wrap (two's complement), integer avg
//    truncates, max and min propagate NaN whichever side it is on (a NaN `a` is
//    returned as is, else a NaN `b`), float16/bfloat16 compute in float32 and round once
//    to nearest even. NaN payloads after a narrowing may differ from the host's.
#ifndef TESSERA_CUDA_REDUCE_KERNELS_H_
#define TESSERA_CUDA_REDUCE_KERNELS_H_

#include <cstddef>

#include "base/status.h"
#include "base/types.h"

namespace tessera {
namespace cuda {

// Loads every kernel below into the current device's context. Under CUDA's lazy loading
// (the default since CUDA 12.2) a kernel's first launch loads it, and loading may wait
// for the whole context: a stream waiting on the GPU for tessera's proxy (staged calls)
// then deadlocks the proxy's first launch. Call before any stream waits for tessera.
Status LoadKernels();

// dst[i] = a[i] op b[i]. dst may equal a or b exactly; other overlaps are not allowed.
// op is sum, prod, max or min (avg is a sum followed by LaunchDivide). float16 and
// bfloat16 operands are widened to float32, combined, and rounded back to the type.
Status LaunchReduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count,
                    void* stream);

// float16/bfloat16 <-> float32 arrays (type is kFloat16 or kBfloat16). in and out must
// not overlap.
Status LaunchWidenHalf(DataType type, const void* in, float* out, size_t count, void* stream);
Status LaunchNarrowHalf(DataType type, const float* in, void* out, size_t count, void* stream);

// PreMulSum's scaling: dst[i] = scalar * src[i]. `scalar` points to one value of `type`,
// in device memory when scalar_on_device (read when the kernel runs, like NCCL's
// ncclScalarDevice), else in host memory (read now).
//  - Non-half types: src and dst are arrays of `type` (dst may equal src).
//  - kFloat16/kBfloat16: src is of the half type and dst is float32 (widened and
//    scaled in float32 in one pass, as the host reduction pipeline does).
Status LaunchScale(DataType type, const void* scalar, bool scalar_on_device, const void* src, void* dst,
                   size_t count, void* stream);

// avg's division, in place: data[i] /= divisor (divisor >= 0). Integers truncate toward
// zero and a divisor of 0 leaves them unchanged; floating types divide (float16 and
// bfloat16 in float32, rounded once).
Status LaunchDivide(DataType type, void* data, size_t count, int divisor, void* stream);

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_REDUCE_KERNELS_H_
