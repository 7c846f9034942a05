#include "pytorch/tensor_views.h"

#include <cstring>

namespace tessera_torch {
namespace {

using RedOp = c10d::ReduceOp::RedOpType;

const char* OpName(RedOp op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "an unknown operator";
  }
}

// The tessera type that holds one element (or, for complex, one real part) of dtype.
bool WireType(at::ScalarType dtype, tesseraDataType_t* type) {
  switch (dtype) {
    case at::kChar: *type = tesseraInt8; return true;
    case at::kByte: *type = tesseraUint8; return true;
    case at::kBool: *type = tesseraUint8; return true;
    case at::kInt: *type = tesseraInt32; return true;
    case at::kLong: *type = tesseraInt64; return true;
    case at::kHalf: *type = tesseraFloat16; return true;
    case at::kBFloat16: *type = tesseraBfloat16; return true;
    case at::kFloat: *type = tesseraFloat32; return true;
    case at::kDouble: *type = tesseraFloat64; return true;
    case at::kComplexFloat: *type = tesseraFloat32; return true;
    case at::kComplexDouble: *type = tesseraFloat64; return true;
    default: return false;
  }
}

bool IsBitwise(RedOp op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

tesseraRedOp_t DirectOp(RedOp op, bool is_bool) {
  switch (op) {
    case c10d::ReduceOp::SUM: return is_bool ? tesseraMax : tesseraSum;
    case c10d::ReduceOp::PREMUL_SUM: return tesseraSum;
    case c10d::ReduceOp::AVG: return tesseraAvg;
    case c10d::ReduceOp::PRODUCT: return is_bool ? tesseraMin : tesseraProd;
    case c10d::ReduceOp::MIN: return tesseraMin;
    default: return tesseraMax;
  }
}

// PREMUL_SUM's factor as a one-element tensor of dtype.
at::Tensor PreMulScale(const c10d::ReduceOp& op, at::ScalarType dtype, const std::string& operation) {
  auto* supplement = static_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "tessera ", operation, ": PREMUL_SUM without its factor");
  const at::Tensor factor = PreMulSumTensorFactor(*supplement);
  if (factor.defined()) {
    TORCH_CHECK(factor.numel() == 1, "tessera ", operation, ": PREMUL_SUM takes one factor, got ", factor.numel());
    return factor.to(at::kCPU, dtype).contiguous().reshape({1});
  }
  return at::full({1}, supplement->double_factor, at::TensorOptions().dtype(dtype));
}

}  // namespace

Reduction ReductionFor(at::ScalarType dtype, const c10d::ReduceOp& op, const std::string& operation) {
  const RedOp torch_op = op.op_;
  Reduction r;
  r.torch_op = torch_op;
  TORCH_CHECK(WireType(dtype, &r.type), "tessera ", operation, ": tensors of type ", at::toString(dtype),
              " cannot be reduced (tessera reduces int8, uint8, bool, int32, int64, float16, bfloat16, "
              "float32, float64 and complex)");
  const bool is_complex = at::isComplexType(dtype);
  const bool is_integral = at::isIntegralType(dtype, /*includeBool=*/true);
  TORCH_CHECK(torch_op <= c10d::ReduceOp::PREMUL_SUM, "tessera ", operation, ": unknown reduce operator ",
              static_cast<int>(torch_op));
  if (IsBitwise(torch_op)) {
    TORCH_CHECK(is_integral, "tessera ", operation, ": ", OpName(torch_op),
                " needs an integer or bool tensor, not ", at::toString(dtype));
    r.kind = Reduction::Kind::kBitwise;
    return r;
  }
  if (is_complex) {
    TORCH_CHECK(torch_op == c10d::ReduceOp::SUM || torch_op == c10d::ReduceOp::AVG, "tessera ", operation,
                ": complex tensors reduce with SUM or AVG only, not ", OpName(torch_op));
    r.elements_per_torch_element = 2;
  }
  TORCH_CHECK(!(dtype == at::kBool && (torch_op == c10d::ReduceOp::AVG || torch_op == c10d::ReduceOp::PREMUL_SUM)),
              "tessera ", operation, ": ", OpName(torch_op), " is not defined on bool tensors");
  r.op = DirectOp(torch_op, dtype == at::kBool);
  if (torch_op == c10d::ReduceOp::PREMUL_SUM) r.scale = PreMulScale(op, dtype, operation);
  return r;
}

at::Tensor WireView(const at::Tensor& t, const Reduction& reduction) {
  return reduction.elements_per_torch_element == 2 ? at::view_as_real(t) : t;
}

void FoldBitwise(const at::Tensor& gathered, int64_t n, c10d::ReduceOp::RedOpType op, at::Tensor& out) {
  at::Tensor blocks = gathered.reshape({n, -1});
  at::Tensor acc = blocks[0].clone();
  for (int64_t i = 1; i < n; ++i) {
    if (op == c10d::ReduceOp::BAND) acc.bitwise_and_(blocks[i]);
    if (op == c10d::ReduceOp::BOR) acc.bitwise_or_(blocks[i]);
    if (op == c10d::ReduceOp::BXOR) acc.bitwise_xor_(blocks[i]);
  }
  out.reshape({-1}).copy_(acc);
}

void CheckDenseCpu(const std::vector<at::Tensor>& tensors, const std::string& operation) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined(), "tessera ", operation, ": an undefined tensor");
    TORCH_CHECK(t.device().is_cpu(), "tessera ", operation, ": tensors must be on the CPU, not ", t.device(),
                " (this build of the backend has no device path)");
    TORCH_CHECK(t.layout() == at::kStrided, "tessera ", operation, ": sparse tensors are taken by all_reduce (SUM) only");
  }
}

at::Tensor& SingleTensor(std::vector<at::Tensor>& tensors, const std::string& operation) {
  TORCH_CHECK(tensors.size() == 1, "tessera ", operation, ": takes one tensor per process, got ", tensors.size());
  CheckDenseCpu(tensors, operation);
  return tensors[0];
}

void CheckAllLike(const std::vector<at::Tensor>& tensors, at::ScalarType dtype, int64_t numel,
                  const std::string& operation) {
  CheckDenseCpu(tensors, operation);
  for (size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK(tensors[i].scalar_type() == dtype, "tessera ", operation, ": tensor ", i, " is ",
                at::toString(tensors[i].scalar_type()), ", want ", at::toString(dtype));
    TORCH_CHECK(tensors[i].numel() == numel, "tessera ", operation, ": tensor ", i, " has ", tensors[i].numel(),
                " elements, want ", numel);
  }
}

Buffer ContiguousBuffer(const at::Tensor& t) {
  if (t.is_contiguous()) return Buffer{t, false};
  return Buffer{t.contiguous(), true};
}

void CopyBack(const at::Tensor& t, const Buffer& buffer) {
  if (buffer.copy_back) const_cast<at::Tensor&>(t).copy_(buffer.tensor);
}

size_t TotalBytes(const std::vector<at::Tensor>& tensors) {
  size_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += t.nbytes();
  return bytes;
}

void PackBytes(const std::vector<at::Tensor>& tensors, uint8_t* dst) {
  for (const at::Tensor& t : tensors) {
    at::Tensor c = t.contiguous();
    if (c.nbytes() > 0) std::memcpy(dst, c.data_ptr(), c.nbytes());
    dst += c.nbytes();
  }
}

void UnpackBytes(const uint8_t* src, std::vector<at::Tensor>& tensors) {
  for (at::Tensor& t : tensors) {
    const size_t bytes = t.nbytes();
    if (bytes == 0) continue;
    if (t.is_contiguous()) {
      std::memcpy(t.data_ptr(), src, bytes);
    } else {
      at::Tensor c = at::empty(t.sizes(), t.options());
      std::memcpy(c.data_ptr(), src, bytes);
      t.copy_(c);
    }
    src += bytes;
  }
}

at::Tensor ByteBuffer(size_t bytes) {
  return at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

}  // namespace tessera_torch
