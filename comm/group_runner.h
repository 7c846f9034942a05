// How the C API's calls run: a validated call runs now on the caller's thread, on a
// non-blocking communicator's worker, or through the device path (CUDA device buffers
// and streams); inside tesseraGroupStart/End it is recorded, and the group runs at
// tesseraGroupEnd. Groups are per thread, as in NCCL.
#ifndef TESSERA_COMM_GROUP_RUNNER_H_
#define TESSERA_COMM_GROUP_RUNNER_H_

#include "base/status.h"
#include "comm/handle.h"
#include "comm/operation.h"
#include "tessera/tessera.h"

namespace tessera {

// Validates `op` of `comm` (call_validation.h) and runs or records it; the result as
// Report gives it for C function `fn`. `bad_arguments`: what the caller found wrong
// already, reported like the rest.
tesseraResult_t Submit(const char* fn, tesseraComm* comm, const Operation& op, tesseraStream_t stream,
                       const Status& bad_arguments = Status::Ok());

// tesseraGroupStart and tesseraGroupEnd. A group of several communicators runs each
// blocking communicator's part on a thread of its own, so that one thread can drive all
// the ranks of tesseraCommInitAll without deadlock.
tesseraResult_t GroupStart();
tesseraResult_t GroupEnd();
// Whether this thread is inside a group (calls that cannot be grouped refuse it).
bool InGroup();

}  // namespace tessera

#endif  // TESSERA_COMM_GROUP_RUNNER_H_
