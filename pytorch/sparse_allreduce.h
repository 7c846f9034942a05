// all_reduce of a sparse COO tensor (SUM), as Gloo offers it for embedding gradients.
//
// Every rank's coalesced indices and values are gathered by three tessera allgathers (the
// counts of non-zeros, then indices and values padded to the largest count), and each
// rank adds them up itself: the result is the coalesced sum, the same on every rank.
// Traffic is every rank's non-zeros to every rank (p x the largest nnz), which is what a
// sparse gradient needs when ranks touch different rows.
#ifndef TESSERA_PYTORCH_SPARSE_ALLREDUCE_H_
#define TESSERA_PYTORCH_SPARSE_ALLREDUCE_H_

#include <ATen/ATen.h>

#include "tessera/tessera.h"

namespace tessera_torch {

// Checks on the caller's thread that `t` can be reduced (a sparse COO CPU tensor, SUM);
// throws c10::Error naming `operation` otherwise.
void CheckSparseAllReduce(const at::Tensor& t, bool is_sum, const char* operation);

// The sum of every rank's `t` over `comm` (size ranks), coalesced. Throws
// TesseraCallFailed (operation_queue.h) when a tessera call fails.
at::Tensor SparseAllReduce(tesseraComm_t comm, int size, const at::Tensor& t);

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_SPARSE_ALLREDUCE_H_
