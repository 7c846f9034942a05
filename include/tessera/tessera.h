/*
 * tessera: collective communication for data-parallel training.
 *
 * The C API, shaped like nccl.h: the same result codes, data types and reduction
 * operators with the same numeric values, so that code written for NCCL maps one to one.
 *
 * Contracts that hold for every function below:
 *  - No function throws, aborts or exits. Every failure returns a tesseraResult_t other
 *    than tesseraSuccess, and a message naming the operation, the argument or the peer
 *    that failed is available from tesseraGetLastError().
 *  - Every wait is bounded by the communicator's timeout (TESSERA_TIMEOUT_MS, see
 *    docs/settings.md). A peer that dies or stops answering makes the waiting call return
 *    tesseraRemoteError or tesseraTimeout naming that peer; it never hangs.
 *  - Thread safety: calls on one communicator must be serialised by the caller (as with
 *    NCCL), with two exceptions that may be called from any thread at any time:
 *    tesseraCommGetAsyncError() and tesseraCommAbort(). Different communicators may be
 *    used concurrently from different threads.
 *  - After a collective fails with a remote error or a timeout, the communicator is
 *    broken: every later collective returns the same error (also reported by
 *    tesseraCommGetAsyncError()); destroy or abort it.
 *
 * Stream semantics on this CPU build: the `stream` argument is accepted for NCCL
 * compatibility and must be NULL; every collective has completed, and its buffers may be
 * reused, when the call returns.
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_MAJOR 0
#define TESSERA_MINOR 1
#define TESSERA_PATCH 0
/* Encoded as MAJOR * 10000 + MINOR * 100 + PATCH, as NCCL 2.9+ does. */
#define TESSERA_VERSION_CODE (TESSERA_MAJOR * 10000 + TESSERA_MINOR * 100 + TESSERA_PATCH)

/* Opaque handle to a communicator: a group of ranks that run collectives together. */
typedef struct tesseraComm* tesseraComm_t;

/* Identifies one communicator being created. Produced once by tesseraGetUniqueId() on
 * one process and handed, by any means, to every rank that passes it to
 * tesseraCommInitRank(). It carries the rendezvous address and a random secret; a rank
 * holding a different secret is refused. */
#define TESSERA_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TESSERA_UNIQUE_ID_BYTES];
} tesseraUniqueId;

/* Result codes: numbering identical to ncclResult_t, plus tesseraTimeout. */
typedef enum {
  tesseraSuccess = 0,
  tesseraUnhandledCudaError = 1,
  tesseraSystemError = 2,    /* an OS call failed (socket, shared memory, ...) */
  tesseraInternalError = 3,  /* a bug in tessera */
  tesseraInvalidArgument = 4,
  tesseraInvalidUsage = 5,   /* a valid argument at the wrong time or in the wrong state */
  tesseraRemoteError = 6,    /* a peer failed, closed its connection or exited */
  tesseraInProgress = 7,
  tesseraTimeout = 8,        /* a wait exceeded TESSERA_TIMEOUT_MS */
  tesseraNumResults = 9
} tesseraResult_t;

/* Data types: numbering identical to ncclDataType_t. */
typedef enum {
  tesseraInt8 = 0,
  tesseraChar = 0,
  tesseraUint8 = 1,
  tesseraInt32 = 2,
  tesseraInt = 2,
  tesseraUint32 = 3,
  tesseraInt64 = 4,
  tesseraUint64 = 5,
  tesseraFloat16 = 6,
  tesseraHalf = 6,
  tesseraFloat32 = 7,
  tesseraFloat = 7,
  tesseraFloat64 = 8,
  tesseraDouble = 8,
  tesseraBfloat16 = 9,
  tesseraNumTypes = 10
} tesseraDataType_t;

/* Reduction operators: numbering identical to ncclRedOp_t. */
typedef enum {
  tesseraSum = 0,
  tesseraProd = 1,
  tesseraMax = 2,
  tesseraMin = 3,
  tesseraAvg = 4,
  tesseraNumOps = 5
} tesseraRedOp_t;

/* A CUDA stream on CUDA builds; must be NULL on CPU builds (see the stream semantics above). */
typedef void* tesseraStream_t;

/* Writes TESSERA_VERSION_CODE to *version. */
tesseraResult_t tesseraGetVersion(int* version);

/* Creates the identity of a new communicator and starts, in the calling process, the
 * rendezvous service that the ranks of that communicator will contact. The service
 * stops once every rank has joined, or after the timeout. Call it on exactly one
 * process (usually the one that becomes rank 0) and hand the id to every rank. */
tesseraResult_t tesseraGetUniqueId(tesseraUniqueId* uniqueId);

/* Creates this process's member `rank` (0 <= rank < nranks) of the communicator
 * identified by `commId`. Blocks until all nranks ranks have joined (or the timeout),
 * so every rank must call it, from different processes or threads. Settings are read
 * from the environment once, here, and stay fixed for the communicator's lifetime.
 * On failure *comm is set to NULL. */
tesseraResult_t tesseraCommInitRank(tesseraComm_t* comm, int nranks, tesseraUniqueId commId,
                                    int rank);

/* Creates a communicator of all the ranks of the current job, with rank and size taken
 * from the launcher's environment: Open MPI's mpirun (OMPI_COMM_WORLD_RANK/SIZE, the root
 * address shared through the launcher's PMIx server), Slurm (SLURM_PROCID/NTASKS) and
 * torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Collective
 * over the job: every rank must call it. See docs/launching.md. */
tesseraResult_t tesseraCommInitFromEnv(tesseraComm_t* comm);

/* Waits for nothing: releases this rank's resources (shared memory, sockets, threads).
 * Peers that still run collectives on the communicator will see this rank as gone.
 * comm must not be used afterwards; a destroyed handle is answered with
 * tesseraInvalidArgument by every function. */
tesseraResult_t tesseraCommDestroy(tesseraComm_t comm);

/* Like tesseraCommDestroy, and callable from another thread while a collective on comm
 * is blocked: that collective returns tesseraRemoteError ("aborted") promptly and the
 * communicator is then freed. Never blocks longer than a few milliseconds beyond the
 * time the blocked call needs to notice. */
tesseraResult_t tesseraCommAbort(tesseraComm_t comm);

/* Number of ranks in comm. */
tesseraResult_t tesseraCommCount(const tesseraComm_t comm, int* count);

/* This process's rank in comm. */
tesseraResult_t tesseraCommUserRank(const tesseraComm_t comm, int* rank);

/* The error that broke comm, or tesseraSuccess. Thread-safe; does not block. */
tesseraResult_t tesseraCommGetAsyncError(tesseraComm_t comm, tesseraResult_t* asyncError);

/* A short static description of a result code ("invalid argument", ...). */
const char* tesseraGetErrorString(tesseraResult_t result);

/* The message of the last failure: comm's own if comm is a live communicator that has
 * failed, otherwise the last failure of any tessera call on the calling thread.
 * The string stays valid until the next tessera call on the calling thread. */
const char* tesseraGetLastError(tesseraComm_t comm);

/* recvbuff[i] = op over all ranks r of rank r's sendbuff[i], for 0 <= i < count, on
 * every rank. In-place when sendbuff == recvbuff; otherwise the two must not overlap.
 * Collective: every rank calls it with the same count, datatype and op.
 * count == 0 is a valid no-op. Null buffers with count > 0, counts whose byte size
 * overflows, and unknown datatypes or ops return tesseraInvalidArgument. */
tesseraResult_t tesseraAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tesseraDataType_t datatype, tesseraRedOp_t op,
                                 tesseraComm_t comm, tesseraStream_t stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TESSERA_TESSERA_H_ */
