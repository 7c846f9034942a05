// The arithmetic of one element, written once for the host kernels (reduce_kernels.cc,
// elementwise.cc) and the CUDA kernels (cuda/reduce_kernels.cu, compiled by nvcc):
// what dst = a op b is for every operator, and the type integer arithmetic wraps in.
// The vector loops of the host compute the same values lane by lane; each keeps its
// own copy of the NaN rule only where a vector form needs it (reduce_kernels.cc).
//
// What is not shared: the float16/bfloat16 <-> float32 conversions of device code are
// the GPU's own (one cvt instruction each, the same values as elementwise.h's but for
// NaN payloads), where the host computes them on the bits (elementwise.cc).
#ifndef TESSERA_ELEMENTWISE_ELEMENT_OPS_H_
#define TESSERA_ELEMENTWISE_ELEMENT_OPS_H_

#include <type_traits>

#ifdef __CUDACC__
#define TESSERA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TESSERA_HOST_DEVICE inline __attribute__((always_inline))
#endif

namespace tessera {
namespace element {

// The type integer sums and products run in: the unsigned type of the same size, which
// gives the bits of two's complement wrap-around without the undefined behaviour of
// signed overflow. Floating types are themselves.
template <typename T, bool = std::is_integral<T>::value>
struct Wrapping {
  typedef T type;
};
template <typename T>
struct Wrapping<T, true> {
  typedef std::make_unsigned_t<T> type;
};

// Sums and products of integers wrap around; of floats they are IEEE's.
struct Sum {
  template <typename T>
  TESSERA_HOST_DEVICE static T Apply(T a, T b) {
    typedef typename Wrapping<T>::type W;
    return static_cast<T>(static_cast<W>(static_cast<W>(a) + static_cast<W>(b)));
  }
};
struct Prod {
  template <typename T>
  TESSERA_HOST_DEVICE static T Apply(T a, T b) {
    typedef typename Wrapping<T>::type W;
    return static_cast<T>(static_cast<W>(static_cast<W>(a) * static_cast<W>(b)));
  }
};
// Max and min propagate NaN whichever side it is on: a NaN `a` is returned as is, else
// (a > b being false) a NaN `b`. Operands that compare equal (+0 and -0) give b. For
// integers `a != a` is always false.
struct Max {
  template <typename T>
  TESSERA_HOST_DEVICE static T Apply(T a, T b) {
    return (a > b || a != a) ? a : b;
  }
};
struct Min {
  template <typename T>
  TESSERA_HOST_DEVICE static T Apply(T a, T b) {
    return (a < b || a != a) ? a : b;
  }
};

}  // namespace element
}  // namespace tessera

#endif  // TESSERA_ELEMENTWISE_ELEMENT_OPS_H_
