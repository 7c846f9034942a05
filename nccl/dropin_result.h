// Result codes and error messages of the drop-in libnccl.so.2, shared by the file that
// implements nccl.h (nccl_api.cc) and the one that implements the host side of NCCL's
// device API (nccl_device_api.cc).
//
// Where a message comes from: tessera keeps the message of its own failures (read with
// tesseraGetLastError). The drop-in adds failures of its own: a malformed ncclConfig_t,
// or a function that it cannot honour on a CPU build. Their messages live in a
// thread-local buffer here, and LastError() answers with whichever of the two failed
// last on the calling thread, as ncclGetLastError promises.
#ifndef TESSERA_NCCL_DROPIN_RESULT_H_
#define TESSERA_NCCL_DROPIN_RESULT_H_

#include <nccl.h>  // the real header of the CUDA toolkit (see nccl/BUILD)

#include <string>

#include "tessera/tessera.h"

namespace tessera_nccl {

// tessera's result as an ncclResult_t. The numbering is the same, except for
// tesseraTimeout, which nccl.h does not have: it becomes ncclRemoteError ("a peer failed
// or stopped answering", which is what a timeout means to the caller), and LastError()
// then starts its message with "timeout".
ncclResult_t FromTessera(tesseraResult_t result);

// Records a failure found by the drop-in itself, with the message "function: why", and
// returns `code`.
ncclResult_t Fail(ncclResult_t code, const char* function, const std::string& why);

// Fail(ncclInvalidUsage, ...) for a function that the drop-in cannot honour; the message
// says so and why.
ncclResult_t NotSupported(const char* function, const std::string& why);

// ncclGetLastError's answer for `comm` (may be NULL or dead). Valid until the next call
// of the drop-in on the calling thread.
const char* LastError(ncclComm_t comm);

// An ncclComm_t is the tesseraComm_t itself: both are pointers to an incomplete struct,
// and the drop-in keeps no state of its own per communicator.
inline tesseraComm_t ToTessera(ncclComm_t comm) { return reinterpret_cast<tesseraComm_t>(comm); }
inline ncclComm_t ToNccl(tesseraComm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }

}  // namespace tessera_nccl

#endif  // TESSERA_NCCL_DROPIN_RESULT_H_
