// Rendezvous through the launcher's PMIx server: when mpirun or srun --mpi=pmix started
// the job, rank 0 can hand a small blob (its bootstrap id: address, port, secret) to every
// other rank without any address being configured. Used when LaunchInfo::use_pmix is set.
#ifndef TESSERA_BOOTSTRAP_PMIX_SHARE_H_
#define TESSERA_BOOTSTRAP_PMIX_SHARE_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tessera {

// Collective over every process of the launcher's job (its PMIx namespace): each one
// calls it, and afterwards every process's `*blob` holds what rank 0's `*blob` held
// (binary data and "" allowed; rank 0's is left as is). `rank` is this process's rank as
// DetectLaunch reported it and must equal its PMIx rank.
//
// Steps: PMIx_Init (first call only, see below); on rank 0 PMIx_Put (global scope) +
// PMIx_Commit under a key unique to this call; PMIx_Fence over the namespace collecting
// data; PMIx_Get of rank 0's key on the other ranks. Fence and Get carry PMIX_TIMEOUT
// (PMIx counts whole seconds: timeout_ms is rounded up; measured, a 2000 ms timeout
// returns after ~2.02 s). PMIx_Init, Put and Commit only talk to the local server, which
// answers at once or is gone (then the socket fails); they take no timeout.
//
// Initialisation: the first call of the process calls PMIx_Init and keeps that one
// reference until the process exits (an atexit handler calls PMIx_Finalize, in the
// process that initialised only, never in a forked child). libpmix counts initialisations
// process-wide, so this reference coexists with MPI's in either order. It is never dropped
// earlier because PMIx cannot be cleanly initialised again once its count reaches zero:
// measured here, a share finalising PMIx before MPI_Init made MPI_Init fail ("getting
// local rank failed").
//
// Ordering: the key of the n-th call in a process is "tessera.share.<n>", so every
// process of the job must make the same sequence of calls. Concurrent calls from several
// threads of one process are serialised.
//
// Errors: InvalidArgument for timeout_ms <= 0, a null blob or a rank that is not the
// PMIx rank; InvalidUsage when the process was not started by a PMIx launcher
// (PMIX_NAMESPACE / PMIX_RANK unset) or PMIx_Init fails; Timeout when the fence or get
// did not complete in time (a process of the job never called); RemoteError for any other
// PMIx failure. Messages name the PMIx call, the rank, the namespace and the key.
Status PmixShareFromRankZero(int rank, std::string* blob, int64_t timeout_ms);

}  // namespace tessera

#endif  // TESSERA_BOOTSTRAP_PMIX_SHARE_H_
