// The tessera communicator that mirrors an MPI communicator.
//
// A mirror is created on the first routed call on an MPI communicator (every rank of it
// makes that call, so creation is collective like the call): rank 0 makes a tessera
// unique id and sends it with PMPI_Bcast, every rank joins with
// tesseraCommInitRankConfig, and the ranks check with a PMPI_Allreduce that all of them
// joined. If any did not, no rank keeps a tessera communicator, the communicator's calls
// stay on Open MPI (Route::kUnavailable), and the ranks that failed say why on stderr.
// Intercommunicators and communicators of one rank get a mirror without a tessera
// communicator (Route::kCommunicator).
//
// The mirror is kept as an attribute of the MPI communicator, so MPI_Comm_free (and
// MPI_Comm_disconnect) destroys it; MPI_Comm_dup and the other constructors do not copy
// it (MPI_COMM_NULL_COPY_FN), so every new communicator gets its own on first use;
// MPI_Finalize destroys the rest (DestroyMirrors). A mirror destroyed with non-blocking
// calls in flight waits for them (MPI lets a program free a communicator before they end).
#ifndef TESSERA_MPI_MIRROR_H_
#define TESSERA_MPI_MIRROR_H_

#include <mpi.h>
#include <tessera/tessera.h>

#include <string>

#include "mpi/settings.h"

namespace tessera_mpi {

struct Mirror {
  MPI_Comm mpi_comm = MPI_COMM_NULL;
  tesseraComm_t comm = nullptr;  // null: this communicator's calls go to Open MPI
  Route why_not = Route::kRouted;  // when comm is null: kCommunicator or kUnavailable
  int rank = 0;
  int nranks = 0;
  std::string name;  // the communicator's MPI name ("MPI_COMM_WORLD"), or "MPI communicator #3"
  // The non-blocking communicator of the non-blocking collectives (AsyncCommOf). MPI has
  // a communicator's collectives called in one order, so no two threads make it at once.
  mutable tesseraComm_t async_comm = nullptr;
  mutable bool async_tried = false;
};

// The mirror of comm, created on first use (collectively: see above). Cheap on the calls
// after the first: a per-thread cache of the last communicator. Null for MPI_COMM_NULL.
// Thread-safe: different threads may use different communicators at once, as MPI allows.
const Mirror* MirrorOf(MPI_Comm comm);

// The mirror's non-blocking tessera communicator (tesseraConfig_t.blocking = 0): split
// from mirror.comm on the first non-blocking call (collective like that call), then kept
// with the mirror. Null where any rank could not make it (each such rank says why on
// stderr): the communicator's non-blocking calls then go to Open MPI.
tesseraComm_t AsyncCommOf(const Mirror& mirror);

// Destroys every mirror that remains, before PMPI_Finalize.
void DestroyMirrors();

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_MIRROR_H_
