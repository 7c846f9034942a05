// Non-blocking collectives as MPI requests.
//
// A routed MPI_Iallreduce (and the rest) is posted on the mirror's non-blocking tessera
// communicator (tesseraConfig_t.blocking = 0; AsyncCommOf in mirror.h), which runs its
// calls in order on a thread of its own, and the program gets a generalized request
// (MPI_Grequest_start): MPI_Wait, MPI_Test and the rest are Open MPI's, untouched. One
// thread of this library watches the communicators with pending calls: once one has no
// call in progress (tesseraCommGetAsyncError), every call posted on it before is done,
// and the thread finishes them (unpacking, copying) and completes their requests
// (MPI_Grequest_complete). Calling MPI from that thread needs MPI_THREAD_MULTIPLE:
// without it the non-blocking collectives go to Open MPI (Route::kThreadLevel).
// A call that failed completes its request with an error code whose string is tessera's
// message (errors.h), which MPI_Wait returns or passes to the error handler.
#ifndef TESSERA_MPI_REQUESTS_H_
#define TESSERA_MPI_REQUESTS_H_

#include <mpi.h>
#include <tessera/tessera.h>

#include <memory>

#include "mpi/routed_call.h"

namespace tessera_mpi {

// Posts `call` on `async` (the mirror's non-blocking communicator) and makes *request.
// MPI_SUCCESS, or an MPI error code where the generalized request could not be made.
int StartRequest(std::unique_ptr<RoutedCall> call, tesseraComm_t async, MPI_Request* request);

// Waits until no pending call of `async` remains (its requests completed), before the
// communicator is destroyed.
void DrainRequests(tesseraComm_t async);

// Ends the watching thread, at MPI_Finalize (after the mirrors are destroyed).
void StopRequests();

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_REQUESTS_H_
