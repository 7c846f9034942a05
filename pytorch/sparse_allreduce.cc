#include "pytorch/sparse_allreduce.h"

#include <algorithm>
#include <vector>

#include "pytorch/operation_queue.h"

namespace tessera_torch {
namespace {

// Every rank's `block` (the same shape on every rank) gathered along a new first
// dimension: [size, block...].
at::Tensor AllGatherBlocks(tesseraComm_t comm, int size, const at::Tensor& block) {
  at::Tensor src = block.contiguous();
  std::vector<int64_t> shape{size};
  shape.insert(shape.end(), src.sizes().begin(), src.sizes().end());
  at::Tensor all = at::empty(shape, src.options());
  Ok(tesseraAllGather(src.data_ptr(), all.data_ptr(), src.nbytes(), tesseraUint8, comm, nullptr));
  return all;
}

// `t` (rows along dimension `dim`) padded with zeros to `rows` rows.
at::Tensor PadRows(const at::Tensor& t, int64_t dim, int64_t rows) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[dim] = rows;
  at::Tensor padded = at::zeros(shape, t.options());
  padded.narrow(dim, 0, t.size(dim)).copy_(t);
  return padded;
}

}  // namespace

void CheckSparseAllReduce(const at::Tensor& t, bool is_sum, const char* operation) {
  TORCH_CHECK(t.layout() == at::kSparse, "tessera ", operation, ": sparse tensors must be COO (torch.sparse_coo)");
  TORCH_CHECK(t.device().is_cpu(), "tessera ", operation, ": tensors must be on the CPU, not ", t.device());
  TORCH_CHECK(is_sum, "tessera ", operation, ": sparse tensors reduce with SUM only, as with Gloo");
}

at::Tensor SparseAllReduce(tesseraComm_t comm, int size, const at::Tensor& t) {
  at::Tensor input = t.coalesce();
  at::Tensor indices = input._indices();  // [sparse_dim, nnz] int64
  at::Tensor values = input._values();    // [nnz, dense dims...]
  const int64_t nnz = input._nnz();

  at::Tensor counts = AllGatherBlocks(comm, size, at::full({1}, nnz, at::TensorOptions().dtype(at::kLong)));
  const int64_t most = counts.max().item<int64_t>();
  at::Tensor all_indices = AllGatherBlocks(comm, size, PadRows(indices, 1, most));  // [size, sparse_dim, most]
  at::Tensor all_values = AllGatherBlocks(comm, size, PadRows(values, 0, most));    // [size, most, dense...]

  std::vector<at::Tensor> index_parts, value_parts;
  for (int r = 0; r < size; ++r) {
    const int64_t n = counts[r].item<int64_t>();
    index_parts.push_back(all_indices[r].narrow(1, 0, n));
    value_parts.push_back(all_values[r].narrow(0, 0, n));
  }
  return at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0), input.sizes(), input.options())
      .coalesce();
}

}  // namespace tessera_torch
