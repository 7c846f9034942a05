// Device kernels of cuda/reduce_kernels.h, compiled by nvcc (cuda/cuda.bzl) for sm_80 and
// sm_90. One template per kernel, instantiated for every datatype (and operator):
//  - ReduceKernel: dst = a op b. Where a, b and dst share their offset modulo 16 bytes,
//    the body moves in 16-byte packs (one 128-bit load per operand, one store); the
//    unaligned head and the tail, or everything when offsets differ, go one element per
//    thread. Grid-stride loops, so any count fits a bounded grid.
//  - WidenKernel / NarrowKernel: float16 and bfloat16 <-> float32.
//  - ScaleKernel: PreMulSum's scalar * x (half types widened to float32 on the way).
//  - DivideKernel: avg's division.
// The arithmetic of one element is the host kernels' (elementwise/element_ops.h); the
// half conversions are the GPU's own instructions. The header states the contract.
#include "cuda/reduce_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda/availability.h"
#include "elementwise/element_ops.h"

namespace tessera {
namespace cuda {
namespace {

constexpr unsigned kThreads = 256;
// A grid-stride loop over at most this many blocks keeps every SM of an H100 (132 SMs x
// 8 resident blocks of 256 threads) busy without launching blocks that find no work.
constexpr size_t kMaxBlocks = 2048;
constexpr size_t kPackBytes = 16;

// ---- Element arithmetic ----------------------------------------------------------------

// The type arithmetic happens in: float32 for the half types, the type itself otherwise.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<__half> { using type = float; };
template <> struct Compute<__nv_bfloat16> { using type = float; };

template <typename T>
__device__ __forceinline__ typename Compute<T>::type Widen(T x) { return x; }
template <>
__device__ __forceinline__ float Widen<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float Widen<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// Round-to-nearest-even back to the type (identity for the others).
template <typename T>
__device__ __forceinline__ T Narrow(typename Compute<T>::type x) { return x; }
template <>
__device__ __forceinline__ __half Narrow<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 Narrow<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// The operators themselves are the host kernels' (elementwise/element_ops.h): integers
// wrap like two's complement, max and min propagate NaN whichever side it is on.
using element::Max;
using element::Min;
using element::Prod;
using element::Sum;

template <typename T, typename Op>
__device__ __forceinline__ T Combine(T a, T b) {
  return Narrow<T>(Op::template Apply<typename Compute<T>::type>(Widen(a), Widen(b)));
}

// 16 bytes of elements, loaded and stored as one 128-bit access.
template <typename T>
struct alignas(kPackBytes) Pack {
  T e[kPackBytes / sizeof(T)];
};

__device__ __forceinline__ size_t FirstIndex() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ size_t GridStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

// ---- Kernels ------------------------------------------------------------------------------

// Elements [0, head) and [head + vectors * lanes, count) one by one; in between,
// `vectors` 16-byte packs (a + head, b + head and dst + head are 16-byte aligned).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    ReduceKernel(T* dst, const T* a, const T* b, size_t count, size_t head, size_t vectors) {
  constexpr size_t kLanes = kPackBytes / sizeof(T);
  const size_t first = FirstIndex(), stride = GridStride();
  for (size_t v = first; v < vectors; v += stride) {
    const size_t i = head + v * kLanes;
    Pack<T> pa = *reinterpret_cast<const Pack<T>*>(a + i);
    const Pack<T> pb = *reinterpret_cast<const Pack<T>*>(b + i);
#pragma unroll
    for (size_t k = 0; k < kLanes; ++k) pa.e[k] = Combine<T, Op>(pa.e[k], pb.e[k]);
    *reinterpret_cast<Pack<T>*>(dst + i) = pa;
  }
  const size_t body_end = head + vectors * kLanes;
  const size_t singles = head + (count - body_end);
  for (size_t s = first; s < singles; s += stride) {
    const size_t i = s < head ? s : body_end + (s - head);
    dst[i] = Combine<T, Op>(a[i], b[i]);
  }
}

template <typename H>
__global__ void __launch_bounds__(kThreads) WidenKernel(const H* in, float* out, size_t count) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) out[i] = Widen(in[i]);
}

template <typename H>
__global__ void __launch_bounds__(kThreads) NarrowKernel(const float* in, H* out, size_t count) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) out[i] = Narrow<H>(in[i]);
}

// dst = scalar * src in Compute<T>; Out is T, or float for the half types. The scalar is
// read from device memory when scalar_on_device is set, else taken from scalar_value.
template <typename T, typename Out>
__global__ void __launch_bounds__(kThreads)
    ScaleKernel(const T* src, Out* dst, size_t count, const T* scalar_on_device, T scalar_value) {
  typedef typename Compute<T>::type A;
  const A scalar = Widen(scalar_on_device != nullptr ? *scalar_on_device : scalar_value);
  for (size_t i = FirstIndex(); i < count; i += GridStride()) {
    dst[i] = static_cast<Out>(Prod::Apply<A>(scalar, Widen(src[i])));
  }
}

// Integers truncate toward zero (C++ division) and stay unchanged for a divisor of 0.
template <typename T>
__global__ void __launch_bounds__(kThreads) DivideKernel(T* data, size_t count, int divisor) {
  typedef typename Compute<T>::type A;
  if (std::is_integral<A>::value && divisor == 0) return;
  const A d = static_cast<A>(divisor);
  for (size_t i = FirstIndex(); i < count; i += GridStride()) data[i] = Narrow<T>(Widen(data[i]) / d);
}

// ---- Launching ----------------------------------------------------------------------------

unsigned Blocks(size_t items) {
  const size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min(std::max<size_t>(blocks, 1), kMaxBlocks));
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

template <typename T> struct Tag { typedef T type; };

// Calls f(Tag<T>()) with the device type of `type`.
template <typename F>
Status VisitType(DataType type, const char* fn, F&& f) {
  switch (type) {
    case DataType::kInt8: return f(Tag<int8_t>());
    case DataType::kUint8: return f(Tag<uint8_t>());
    case DataType::kInt32: return f(Tag<int32_t>());
    case DataType::kUint32: return f(Tag<uint32_t>());
    case DataType::kInt64: return f(Tag<int64_t>());
    case DataType::kUint64: return f(Tag<uint64_t>());
    case DataType::kFloat16: return f(Tag<__half>());
    case DataType::kFloat32: return f(Tag<float>());
    case DataType::kFloat64: return f(Tag<double>());
    case DataType::kBfloat16: return f(Tag<__nv_bfloat16>());
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: break;
  }
  return InvalidArgument(std::string(fn) + ": datatype " + DataTypeName(type) + " is not supported");
}

// Every pointer must be aligned to the element size, as any CUDA access requires.
Status CheckAligned(const char* fn, size_t elem, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % elem != 0) {
      return InvalidArgument(std::string(fn) + ": pointer " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                             " is not aligned to its " + std::to_string(elem) + "-byte elements");
    }
  }
  return Status::Ok();
}

Status Launched(const char* fn) { return CudaCall(cudaGetLastError(), std::string(fn) + ": kernel launch"); }

template <typename T, typename Op>
Status LaunchReduceTyped(void* dst, const void* a, const void* b, size_t count, void* stream) {
  constexpr size_t kLanes = kPackBytes / sizeof(T);
  const uintptr_t offset = reinterpret_cast<uintptr_t>(a) % kPackBytes;
  size_t head = count, vectors = 0;
  if (reinterpret_cast<uintptr_t>(b) % kPackBytes == offset && reinterpret_cast<uintptr_t>(dst) % kPackBytes == offset) {
    head = std::min(count, offset == 0 ? 0 : (kPackBytes - offset) / sizeof(T));
    vectors = (count - head) / kLanes;
  }
  const size_t singles = count - vectors * kLanes;
  ReduceKernel<T, Op><<<Blocks(std::max(vectors, singles)), kThreads, 0, AsStream(stream)>>>(
      static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count, head, vectors);
  return Launched("LaunchReduce");
}

}  // namespace

namespace {

// cudaFuncGetAttributes loads a kernel that lazy loading has not loaded yet.
Status Load(const void* kernel, const char* name) {
  cudaFuncAttributes attributes;
  return CudaCall(cudaFuncGetAttributes(&attributes, kernel), std::string("loading the kernel ") + name);
}

template <typename T>
Status LoadTyped() {
  typedef std::conditional_t<sizeof(T) == 2, float, T> Out;
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(ReduceKernel<T, Sum>), "ReduceKernel (sum)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(ReduceKernel<T, Prod>), "ReduceKernel (prod)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(ReduceKernel<T, Max>), "ReduceKernel (max)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(ReduceKernel<T, Min>), "ReduceKernel (min)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(ScaleKernel<T, Out>), "ScaleKernel"));
  return Load(reinterpret_cast<const void*>(DivideKernel<T>), "DivideKernel");
}

}  // namespace

Status LoadKernels() {
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LoadKernels"));
  for (DataType type : {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kUint32, DataType::kInt64,
                        DataType::kUint64, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                        DataType::kBfloat16}) {
    TESSERA_RETURN_IF_ERROR(VisitType(type, "LoadKernels", [](auto tag) -> Status {
      return LoadTyped<typename decltype(tag)::type>();
    }));
  }
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(WidenKernel<__half>), "WidenKernel (float16)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(WidenKernel<__nv_bfloat16>), "WidenKernel (bfloat16)"));
  TESSERA_RETURN_IF_ERROR(Load(reinterpret_cast<const void*>(NarrowKernel<__half>), "NarrowKernel (float16)"));
  return Load(reinterpret_cast<const void*>(NarrowKernel<__nv_bfloat16>), "NarrowKernel (bfloat16)");
}

Status LaunchReduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count, void* stream) {
  if (op != RedOp::kSum && op != RedOp::kProd && op != RedOp::kMax && op != RedOp::kMin) {
    return InvalidArgument("LaunchReduce: op " + std::to_string(static_cast<int>(op)) +
                           " has no kernel (sum, prod, max, min; avg is a sum, then LaunchDivide)");
  }
  return VisitType(type, "LaunchReduce", [&](auto tag) -> Status {
    typedef typename decltype(tag)::type T;
    if (count == 0) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchReduce", sizeof(T), {dst, a, b}));
    TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LaunchReduce"));
    switch (op) {
      case RedOp::kSum: return LaunchReduceTyped<T, Sum>(dst, a, b, count, stream);
      case RedOp::kProd: return LaunchReduceTyped<T, Prod>(dst, a, b, count, stream);
      case RedOp::kMax: return LaunchReduceTyped<T, Max>(dst, a, b, count, stream);
      default: return LaunchReduceTyped<T, Min>(dst, a, b, count, stream);
    }
  });
}

Status LaunchWidenHalf(DataType type, const void* in, float* out, size_t count, void* stream) {
  if (!IsHalf(type)) return InvalidArgument(std::string("LaunchWidenHalf: ") + DataTypeName(type) + " is not a half type");
  if (count == 0) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchWidenHalf", 4, {out}));
  TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchWidenHalf", 2, {in}));
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LaunchWidenHalf"));
  if (type == DataType::kFloat16) {
    WidenKernel<__half><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(static_cast<const __half*>(in), out, count);
  } else {
    WidenKernel<__nv_bfloat16><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(
        static_cast<const __nv_bfloat16*>(in), out, count);
  }
  return Launched("LaunchWidenHalf");
}

Status LaunchNarrowHalf(DataType type, const float* in, void* out, size_t count, void* stream) {
  if (!IsHalf(type)) return InvalidArgument(std::string("LaunchNarrowHalf: ") + DataTypeName(type) + " is not a half type");
  if (count == 0) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchNarrowHalf", 4, {in}));
  TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchNarrowHalf", 2, {out}));
  TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LaunchNarrowHalf"));
  if (type == DataType::kFloat16) {
    NarrowKernel<__half><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(in, static_cast<__half*>(out), count);
  } else {
    NarrowKernel<__nv_bfloat16><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(
        in, static_cast<__nv_bfloat16*>(out), count);
  }
  return Launched("LaunchNarrowHalf");
}

Status LaunchScale(DataType type, const void* scalar, bool scalar_on_device, const void* src, void* dst, size_t count,
                   void* stream) {
  return VisitType(type, "LaunchScale", [&](auto tag) -> Status {
    typedef typename decltype(tag)::type T;
    typedef std::conditional_t<sizeof(T) == 2, float, T> Out;  // the half types scale into float32
    if (count == 0) return Status::Ok();
    if (scalar == nullptr) return InvalidArgument("LaunchScale: the scalar is NULL");
    TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchScale", sizeof(T), {src, scalar_on_device ? scalar : nullptr}));
    TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchScale", sizeof(Out), {dst}));
    TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LaunchScale"));
    T value;
    std::memset(static_cast<void*>(&value), 0, sizeof(T));
    if (!scalar_on_device) std::memcpy(static_cast<void*>(&value), scalar, sizeof(T));
    ScaleKernel<T, Out><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(
        static_cast<const T*>(src), static_cast<Out*>(dst), count,
        scalar_on_device ? static_cast<const T*>(scalar) : nullptr, value);
    return Launched("LaunchScale");
  });
}

Status LaunchDivide(DataType type, void* data, size_t count, int divisor, void* stream) {
  return VisitType(type, "LaunchDivide", [&](auto tag) -> Status {
    typedef typename decltype(tag)::type T;
    if (divisor < 0) return InvalidArgument("LaunchDivide: divisor " + std::to_string(divisor) + " is negative");
    if (count == 0) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(CheckAligned("LaunchDivide", sizeof(T), {data}));
    TESSERA_RETURN_IF_ERROR(CudaUsable().Annotate("LaunchDivide"));
    DivideKernel<T><<<Blocks(count), kThreads, 0, AsStream(stream)>>>(static_cast<T*>(data), count, divisor);
    return Launched("LaunchDivide");
  });
}

}  // namespace cuda
}  // namespace tessera
