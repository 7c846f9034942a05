// Reducer: dst[i] = a[i] op b[i] for `count` elements, the one kernel every reducing
// transfer runs (a transport reduces each piece it receives with it). It sits below the
// transports and the device engines, which both take one, and above nothing but base/.
// reduce_kernels.h and elementwise.h (GetHalfReducer) hand out the host ones.
#ifndef TESSERA_ELEMENTWISE_REDUCER_H_
#define TESSERA_ELEMENTWISE_REDUCER_H_

#include <cstddef>

#include "base/types.h"

namespace tessera {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// dst may equal a or b exactly; other overlaps are not allowed. Host links call fn. A
// device link (transport/cuda_ipc) launches its own kernel for (type, op) instead, so a
// Reducer handed to one must say what fn computes: typed set, type the element type
// (float16/bfloat16: combined in float32 and rounded at each step, as
// TESSERA_HALF_WIRE=half does) and op one of sum, prod, max, min.
struct Reducer {
  ReduceFn fn = nullptr;
  size_t elem_size = 1;
  bool typed = false;  // type and op below are set
  DataType type = DataType::kUint8;
  RedOp op = RedOp::kSum;
};

}  // namespace tessera

#endif  // TESSERA_ELEMENTWISE_REDUCER_H_
