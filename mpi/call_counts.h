// How many calls of each collective went to tessera, and how many to Open MPI and why:
// counted when TESSERA_MPI_STATS=1, and printed by every rank at MPI_Finalize, one line a
// collective that was called, e.g.
//   tessera_mpi: rank 0: MPI_Allreduce 1210 (tessera 1200, datatype 10)
#ifndef TESSERA_MPI_CALL_COUNTS_H_
#define TESSERA_MPI_CALL_COUNTS_H_

#include "mpi/settings.h"

namespace tessera_mpi {

// Counts one call of `collective` that took `route`; nothing unless TESSERA_MPI_STATS=1.
void CountCall(Collective collective, Route route);

// Prints the counts to stderr (TESSERA_MPI_STATS=1 only); `rank` is MPI_COMM_WORLD's.
void PrintCallCounts(int rank);

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_CALL_COUNTS_H_
