// How torch tensors become tessera buffers: the wire type and operator of a reduction,
// the byte packing of tensor lists into one contiguous buffer and back, and the checks
// that turn a bad argument into a torch error on the caller's thread.
//
// Every function here runs on the caller's thread or the group's worker, never touches a
// communicator, and throws c10::Error (Python: RuntimeError) for what it refuses.
#ifndef TESSERA_PYTORCH_TENSOR_VIEWS_H_
#define TESSERA_PYTORCH_TENSOR_VIEWS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "pytorch/torch_api.h"

#include "tessera/tessera.h"

namespace tessera_torch {

// How a reduction runs on the wire.
struct Reduction {
  enum class Kind {
    kDirect,   // a tessera reduction of `type` with `op`
    kBitwise,  // BAND/BOR/BXOR: gather every rank's input and fold it here
  };
  Kind kind = Kind::kDirect;
  tesseraDataType_t type = tesseraFloat32;
  tesseraRedOp_t op = tesseraSum;  // kDirect; for PREMUL_SUM, tesseraSum with `scale`
  c10d::ReduceOp::RedOpType torch_op = c10d::ReduceOp::SUM;
  size_t elements_per_torch_element = 1;  // 2 for complex numbers (reduced as real pairs)
  at::Tensor scale;  // PREMUL_SUM: a one-element tensor of the wire type, else undefined
};

// The reduction of `op` over tensors of `dtype`. Refuses, naming `operation`, what
// tessera cannot reduce: int16 and other types without a tessera type, bitwise operators
// on floating point, anything but SUM/AVG on complex numbers, AVG on bool.
// bool reduces as uint8 with SUM/MAX as logical or and PRODUCT/MIN as logical and.
Reduction ReductionFor(at::ScalarType dtype, const c10d::ReduceOp& op, const std::string& operation);

// `t` as the buffer a reduction reads and writes: itself, or a view as real pairs.
at::Tensor WireView(const at::Tensor& t, const Reduction& reduction);

// Folds gathered[0..n) (n equal blocks of `elements` elements, rank order) with the
// bitwise operator into `out` (contiguous, `elements` elements).
void FoldBitwise(const at::Tensor& gathered, int64_t n, c10d::ReduceOp::RedOpType op, at::Tensor& out);

// Checks that every tensor is a dense CPU tensor; `operation` names the call.
void CheckDenseCpu(const std::vector<at::Tensor>& tensors, const std::string& operation);

// Checks that `tensors` holds exactly one tensor (one per process, as with NCCL), and
// returns it.
at::Tensor& SingleTensor(std::vector<at::Tensor>& tensors, const std::string& operation);

// Checks that every tensor in `tensors` has `dtype` and `numel` elements.
void CheckAllLike(const std::vector<at::Tensor>& tensors, at::ScalarType dtype, int64_t numel,
                  const std::string& operation);

// A tensor usable as a tessera buffer for `t`: `t` itself when contiguous, otherwise a
// contiguous copy (`copy_back` says whether results must be copied into `t` afterwards).
struct Buffer {
  at::Tensor tensor;
  bool copy_back = false;
};
Buffer ContiguousBuffer(const at::Tensor& t);
void CopyBack(const at::Tensor& t, const Buffer& buffer);

// Total bytes of `tensors`.
size_t TotalBytes(const std::vector<at::Tensor>& tensors);

// Copies the tensors, in order, into `dst` (TotalBytes bytes).
void PackBytes(const std::vector<at::Tensor>& tensors, uint8_t* dst);

// Copies TotalBytes(tensors) bytes from `src` into the tensors, in order (non-contiguous
// tensors through a contiguous copy).
void UnpackBytes(const uint8_t* src, std::vector<at::Tensor>& tensors);

// A new byte buffer of `bytes` bytes.
at::Tensor ByteBuffer(size_t bytes);

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_TENSOR_VIEWS_H_
