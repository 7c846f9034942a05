// What differs between the two torch APIs the backend builds against, and nothing else.
// Every other file of pytorch/ is the same source for both.
//
//                          torch 1.13 (Debian)               torch 2.x (the package index)
//  the class torch holds   c10d::ProcessGroup                c10d::Backend, one per device type
//                          (the whole group)                 of a c10d::ProcessGroup
//  language                C++17                             C++20 (ATen requires it)
//  endCoalescing           void endCoalescing(works&)        Work endCoalescing()
//  only in 2.x             allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced,
//                          split, shrink, abort, shutdown, getError, eagerConnectSingleDevice,
//                          getBackendOptions, supportsSplitting/Coalescing/Shrinking
//  a backend's failure     RuntimeError                      DistBackendError (a RuntimeError)
//  PREMUL_SUM's tensor     tensor_factors (a list)            tensor_factor (one tensor)
//
// TESSERA_TORCH_2 is 1 when building against torch 2.x; code that exists for one API
// only is inside `#if TESSERA_TORCH_2` blocks in backend.h and backend.cc.
#ifndef TESSERA_PYTORCH_TORCH_API_H_
#define TESSERA_PYTORCH_TORCH_API_H_

#include <exception>
#include <string>

#include <ATen/ATen.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#define TESSERA_TORCH_2 1
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#define TESSERA_TORCH_2 0
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace tessera_torch {

#if TESSERA_TORCH_2
using TorchBackendBase = c10d::Backend;
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::COALESCED;  // endCoalescing's Work
#else
using TorchBackendBase = c10d::ProcessGroup;
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::UNKNOWN;  // 1.13 has no COALESCED
#endif

// The torch version the backend was compiled against, "2.15.0".
inline std::string CompiledTorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// The exception a failed collective completes its Work with: what torch's own
// backends raise for a failure of the library under them.
inline std::exception_ptr BackendFailure(const std::string& message) {
#if TESSERA_TORCH_2
  return std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, message));
#else
  return std::make_exception_ptr(std::runtime_error(message));
#endif
}

// PREMUL_SUM's factor when it is a tensor, else an undefined tensor (the factor is then
// supplement.double_factor). TORCH_CHECKs that a list holds one tensor.
inline at::Tensor PreMulSumTensorFactor(const c10d::NCCLPreMulSumSupplement& supplement) {
#if TESSERA_TORCH_2
  return supplement.tensor_factor;
#else
  if (supplement.tensor_factors.empty()) return at::Tensor();
  TORCH_CHECK(supplement.tensor_factors.size() == 1, "tessera: PREMUL_SUM takes one factor, got ",
              supplement.tensor_factors.size());
  return supplement.tensor_factors[0];
#endif
}

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_TORCH_API_H_
