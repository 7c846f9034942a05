// The checks of the C API's arguments, made before anything runs or communicates, each
// naming the argument that is wrong (InvalidArgument) or the misuse (InvalidUsage).
#ifndef TESSERA_COMM_CALL_VALIDATION_H_
#define TESSERA_COMM_CALL_VALIDATION_H_

#include <string>

#include "base/status.h"
#include "base/types.h"
#include "comm/handle.h"
#include "comm/operation.h"
#include "tessera/tessera.h"

namespace tessera {

// Inlined: called on every call, and its check is a compare.
[[gnu::always_inline]] inline Status CheckType(tesseraDataType_t datatype) {
  if (datatype < 0 || datatype >= tesseraNumTypes) {
    return InvalidArgument("datatype " + std::to_string(static_cast<int>(datatype)) + " is not a tesseraDataType_t");
  }
  return Status::Ok();
}

// Everything about a collective or a send or receive of live handle `comm` that can be
// checked before communicating: datatype, operator (built in, or a live PreMulSum
// operator of the type; reductions take no fp8), stream, root, peer, sizes that
// overflow, buffers that are NULL, overlap where they may not, and the parts of
// tesseraAllReduceParts.
Status ValidateOperation(const tesseraComm* comm, const Operation& op, tesseraStream_t stream);

// tesseraRedOpCreatePreMulSum's arguments (comm checked by the caller).
Status ValidatePreMulSum(const tesseraRedOp_t* op, const void* scalar, tesseraDataType_t datatype,
                         tesseraScalarResidence_t residence);

// tesseraCommInitRank's: nranks > 0 and rank among them.
Status ValidateRank(int nranks, int rank);

// tesseraCommShrink's exclude list and flags.
Status ValidateShrink(const int* exclude_ranks, int exclude_count, int flags);

}  // namespace tessera

#endif  // TESSERA_COMM_CALL_VALIDATION_H_
