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
 * Stream semantics.
 *  - CPU build (libtessera.so): `stream` must be NULL; every collective has completed,
 *    and its buffers may be reused, when the call returns.
 *  - CUDA build (libtessera_cuda.so, or --config=cuda; docs/cuda.md): a call with device
 *    or managed buffers, or a non-NULL stream, is enqueued on that stream and returns at
 *    once, as in NCCL; the stream continues when the collective is done. Host buffers on
 *    the NULL stream behave as in the CPU build. In a process without a usable CUDA
 *    driver a non-NULL stream is tesseraInvalidArgument, saying why.
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
  tesseraFloat8e4m3 = 10, /* accepted by the API; reductions answer "not supported" */
  tesseraFloat8e5m2 = 11,
  tesseraNumTypes = 12
} tesseraDataType_t;

/* Reduction operators: numbering identical to ncclRedOp_t. */
typedef enum {
  tesseraSum = 0,
  tesseraProd = 1,
  tesseraMax = 2,
  tesseraMin = 3,
  tesseraAvg = 4,
  /* Values from tesseraNumOps up are operators created by tesseraRedOpCreatePreMulSum. */
  tesseraNumOps = 5,
  tesseraMaxRedOp = 0x7fffffff
} tesseraRedOp_t;

/* Where the scalar of tesseraRedOpCreatePreMulSum lives. On this CPU build both mean
 * host memory: Device is read when each collective starts, HostImmediate once, when the
 * operator is created. */
typedef enum { tesseraScalarDevice = 0, tesseraScalarHostImmediate = 1 } tesseraScalarResidence_t;

/* Communicator configuration, as ncclConfig_t: initialise with TESSERA_CONFIG_INITIALIZER
 * and set the fields you need. Fields left undefined take their defaults. */
#define TESSERA_CONFIG_UNDEF_INT (-2147483647 - 1)
typedef struct {
  size_t size;           /* sizeof(tesseraConfig_t), set by the initializer */
  unsigned int magic;    /* set by the initializer */
  unsigned int version;  /* set by the initializer */
  /* 1 (default): every call on the communicator returns when its work is done.
   * 0: creation, collectives inside and outside groups return tesseraInProgress at once
   * and progress on a background thread; poll tesseraCommGetAsyncError until it stops
   * answering tesseraInProgress. */
  int blocking;
  const char* commName;  /* a name for logs and error messages; NULL: none */
  /* Bound on every wait of the communicator, in milliseconds (> 0), in place of
   * TESSERA_TIMEOUT_MS; TESSERA_CONFIG_UNDEF_INT: TESSERA_TIMEOUT_MS. Every rank must
   * pass the same value (it is checked at creation like TESSERA_TIMEOUT_MS). A split
   * inherits its parent's timeout unless its config sets one. */
  int timeoutMs;
  /* 1: deterministic mode, 0: not, in place of TESSERA_DETERMINISTIC (undefined: the
   * setting; a split or shrink inherits its parent's). Sums, averages and PreMulSums of
   * float16, bfloat16, float32 and float64 by allreduce, reduce and reduce-scatter then
   * give the same bits whatever the algorithm, layout, transport, chunk sizes and rank
   * count, up to 4096 contributions (docs/semantics.md#deterministic-mode). Every rank
   * must pass the same value (checked at creation). */
  int deterministic;
} tesseraConfig_t;
#define TESSERA_CONFIG_MAGIC 0x7e55e7a1u
#define TESSERA_CONFIG_INITIALIZER \
  { sizeof(tesseraConfig_t), TESSERA_CONFIG_MAGIC, TESSERA_VERSION_CODE, TESSERA_CONFIG_UNDEF_INT, NULL, \
    TESSERA_CONFIG_UNDEF_INT, TESSERA_CONFIG_UNDEF_INT }

/* tesseraCommSplit's color for ranks that take no part in any new communicator. */
#define TESSERA_SPLIT_NOCOLOR (-1)

/* A CUDA stream (cudaStream_t) on CUDA builds; must be NULL on CPU builds (see the stream
 * semantics above). */
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

/* As tesseraCommInitRank, with a configuration (NULL: defaults). A malformed config
 * (wrong size, magic or version) is tesseraInvalidArgument. */
tesseraResult_t tesseraCommInitRankConfig(tesseraComm_t* comm, int nranks, tesseraUniqueId commId, int rank,
                                          tesseraConfig_t* config);

/* Creates ndev communicators of ndev ranks in this process at once (rank i in comms[i]),
 * as ncclCommInitAll. devlist may be NULL; on a CPU build its values are only recorded.
 * The communicators can then be driven by one thread each, or by one thread inside a
 * group (tesseraGroupStart/End) calling each of them. */
tesseraResult_t tesseraCommInitAll(tesseraComm_t* comms, int ndev, const int* devlist);

/* Creates, collectively over `comm`, one new communicator per distinct color: the ranks
 * that pass the same color form it, ordered by key (ties: by rank in comm). color
 * TESSERA_SPLIT_NOCOLOR: no new communicator for this rank (*newcomm = NULL). config
 * NULL: inherit comm's. Every rank of comm must call it. */
tesseraResult_t tesseraCommSplit(tesseraComm_t comm, int color, int key, tesseraComm_t* newcomm,
                                 tesseraConfig_t* config);

/* Revokes comm: every pending and future call on it fails promptly, on this rank and on
 * every rank it can still reach, which learn it from this rank's failure notice (the
 * error says which rank revoked it). Not collective: any rank may call it, e.g. after a
 * call failed because a peer was lost. comm keeps its resources, and may then be shrunk
 * (tesseraCommShrink) and must be destroyed or aborted. Thread-safe: may be called while
 * another thread is blocked in a call of comm. flags must be 0. */
tesseraResult_t tesseraCommRevoke(tesseraComm_t comm, int flags);

/* tesseraCommShrink flags: TESSERA_SHRINK_ABORT revokes comm first (its pending calls
 * end), as nccl.h's NCCL_SHRINK_ABORT. TESSERA_SHRINK_LOST (a tessera extension; with
 * excludeCount 0) excludes the ranks that are lost now instead of the diagnosis'
 * culprits: each survivor asks every rank's watch service, and a rank that is gone or
 * does not answer within TESSERA_DIAGNOSIS_MS is excluded (the survivors then adopt the
 * lowest survivor's list). A live rank that was merely outside tessera when comm failed
 * (computing, as a training loop's rank between collectives) is a culprit of the
 * diagnosis but not lost: it is kept, and must call tesseraCommShrink too. */
#define TESSERA_SHRINK_DEFAULT 0x00
#define TESSERA_SHRINK_ABORT 0x01
#define TESSERA_SHRINK_LOST 0x100

/* Called by the ranks of comm that are not in excludeRanks (the survivors; the excluded
 * ranks, usually lost, take no part), each with the same list: creates *newcomm of the
 * survivors, numbered in their order in comm. excludeCount 0 (excludeRanks may be NULL)
 * excludes the culprits that comm's failure diagnosis named (docs/diagnosis.md), the same
 * on every survivor. The survivors agree through the lowest survivor: a survivor whose
 * list differs from its list fails with tesseraInvalidUsage naming both. Works on a
 * broken or revoked comm (comm's links are not used). config as in tesseraCommSplit
 * (NULL: inherit comm's). tesseraInvalidUsage when this rank is in excludeRanks or when
 * TESSERA_DIAGNOSIS_MS is 0; bounded by TESSERA_TIMEOUT_MS. */
tesseraResult_t tesseraCommShrink(tesseraComm_t comm, const int* excludeRanks, int excludeCount,
                                  tesseraComm_t* newcomm, tesseraConfig_t* config, int flags);

/* Waits until every operation issued on comm has completed (on a non-blocking
 * communicator), so that tesseraCommDestroy frees without waiting. */
tesseraResult_t tesseraCommFinalize(tesseraComm_t comm);

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

/* The CUDA device of comm. A NULL comm or device is tesseraInvalidArgument; otherwise a
 * CPU build has none: tesseraInvalidUsage ("not supported"). */
tesseraResult_t tesseraCommCuDevice(const tesseraComm_t comm, int* device);

/* Number of ranks in comm. */
tesseraResult_t tesseraCommCount(const tesseraComm_t comm, int* count);

/* This process's rank in comm. */
tesseraResult_t tesseraCommUserRank(const tesseraComm_t comm, int* rank);

/* The error that broke comm, or tesseraSuccess. Thread-safe; does not block. */
tesseraResult_t tesseraCommGetAsyncError(tesseraComm_t comm, tesseraResult_t* asyncError);

/* Writes comm's flight recorder (its last TESSERA_FLIGHT_RECORDER operations) as JSON
 * to TESSERA_FLIGHT_RECORDER_DIR now, as a failure would (docs/diagnosis.md). Thread-safe:
 * may be called while another thread is blocked in a collective of comm.
 * tesseraInvalidUsage when TESSERA_FLIGHT_RECORDER_DIR is not set or comm is still being
 * created; tesseraSystemError when the file cannot be written. */
tesseraResult_t tesseraCommDumpFlightRecord(tesseraComm_t comm);

/* A communicator's health as one rank sees it (tesseraCommGetHealth): its calls, how
 * long they stalled waiting on peers, and the straggler verdict (docs/diagnosis.md#stragglers).
 * Initialise with TESSERA_HEALTH_INITIALIZER (it sets `size`); later versions add
 * fields at the end only. */
typedef struct {
  size_t size;                 /* sizeof(tesseraHealth_t), set by the initializer */
  int rank;
  int nranks;
  int broken;                  /* 1 once a call failed while communicating, else 0 */
  unsigned long long calls;    /* collectives and send/receive groups that ended here */
  unsigned long long failures; /* of which failed */
  unsigned long long bytes;    /* this rank's input bytes of the calls done */
  double callSeconds;          /* the calls' time (on a clock of 1-4 ms ticks) */
  double stalledSeconds;       /* time this rank's calls stalled waiting on peers */
  /* The straggler: over the last TESSERA_STRAGGLER_WINDOW collectives, the rank that
   * arrived last in TESSERA_STRAGGLER_SHARE percent of them, or that the others' waiting
   * on late ranks was that share on (docs/diagnosis.md#stragglers); judged by rank 0
   * and handed to every rank (at most TESSERA_STRAGGLER_PERIOD_MS late). -1: none. */
  int straggler;
  int windowCalls;             /* collectives in the window */
  int lateCalls;               /* of those, the ones the straggler arrived last in */
  double stragglerLagSeconds;  /* its median lag behind the first rank in those */
  double waitShare;            /* the share (0-1) of the waiting on late ranks that was on it */
  double timeShare;            /* that waiting, over the window's time (0-1) */
  /* The verdict in words, NUL-terminated, "" when none: "rank 5 (pid 4242, host b)
   * arrived last in 910 of the last 1000 collectives, a median of 38.0 ms after the
   * first (97% of the waiting on late ranks, 35% of the time); ranks 0-4, 6, 7 waited
   * on it" (cut at 511 bytes). */
  char verdict[512];
} tesseraHealth_t;
#define TESSERA_HEALTH_INITIALIZER \
  { sizeof(tesseraHealth_t), 0, 0, 0, 0, 0, 0, 0.0, 0.0, -1, 0, 0, 0.0, 0.0, 0.0, "" }

/* Fills *health as this rank sees comm, and, when peerStalledSeconds is not NULL, its
 * first npeers entries (at most nranks are written) with the time this rank stalled
 * while a transfer with that rank was pending (its own entry 0). Never communicates;
 * thread-safe: may be called while another thread is in a collective of comm, and on a
 * broken communicator. The same figures are served on TESSERA_METRICS_PORT.
 * tesseraInvalidArgument when health is NULL, its size is not at least this version's
 * sizeof(tesseraHealth_t), or npeers < 0; tesseraInvalidUsage while comm is being
 * created. */
tesseraResult_t tesseraCommGetHealth(tesseraComm_t comm, tesseraHealth_t* health, double* peerStalledSeconds,
                                     int npeers);

/* A short static description of a result code ("invalid argument", ...). */
const char* tesseraGetErrorString(tesseraResult_t result);

/* The message of the last failure: comm's own if comm is a live communicator that has
 * failed, otherwise the last failure of any tessera call on the calling thread.
 * The string stays valid until the next tessera call on the calling thread. */
const char* tesseraGetLastError(tesseraComm_t comm);

/* Creates a reduction operator for comm and datatype: sum over ranks of
 * (*scalar) * x, with *scalar of type datatype. Destroy it with tesseraRedOpDestroy. */
tesseraResult_t tesseraRedOpCreatePreMulSum(tesseraRedOp_t* op, void* scalar, tesseraDataType_t datatype,
                                            tesseraScalarResidence_t residence, tesseraComm_t comm);
tesseraResult_t tesseraRedOpDestroy(tesseraRedOp_t op, tesseraComm_t comm);

/* Collectives. Common rules: every rank calls the same collectives in the same order
 * with consistent counts, datatype, op and root; count 0 is a valid no-op; null buffers
 * with count > 0, overflowing byte sizes, unknown datatypes or ops, a root out of range
 * and a non-NULL stream (CPU build) are tesseraInvalidArgument. "In place" rules are
 * nccl.h's and are stated per function. Max and min of floating point: a NaN in any
 * input makes the result NaN; -0.0 and +0.0 compare equal and either may be returned. */

/* recvbuff[i] = op over all ranks r of rank r's sendbuff[i], for 0 <= i < count, on
 * every rank. In-place when sendbuff == recvbuff; otherwise the two must not overlap.
 * Collective: every rank calls it with the same count, datatype and op.
 * count == 0 is a valid no-op. Null buffers with count > 0, counts whose byte size
 * overflows, and unknown datatypes or ops return tesseraInvalidArgument. */
tesseraResult_t tesseraAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tesseraDataType_t datatype, tesseraRedOp_t op,
                                 tesseraComm_t comm, tesseraStream_t stream);

/* tessera extension (not in nccl.h): an allreduce of several local contributions.
 * recvbuff[i] = op over every rank r and every part j < nparts of rank r's
 * sendbuffs[j][i], for 0 <= i < count, on every rank: the same as combining the parts
 * with op on each rank and allreducing the result (avg divides by the number of ranks),
 * with one difference in deterministic mode, where every part is one contribution on the
 * shared grid (a sum over all parts of all ranks, rounded once): the result then does
 * not depend on how the parts are spread over ranks, e.g. micro-batches of 2 ranks x 2
 * against 4 ranks x 1. nparts >= 1 and may differ between ranks; in deterministic mode
 * nranks times the largest nparts must not exceed 4096. In place when recvbuff ==
 * sendbuffs[0]; recvbuff must not overlap any other part. The parts are host memory; the
 * array and the buffers must stay valid until the call (or its group) completes. Other
 * rules as tesseraAllReduce's. */
tesseraResult_t tesseraAllReduceParts(const void* const* sendbuffs, int nparts, void* recvbuff, size_t count,
                                      tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                      tesseraStream_t stream);

/* tessera extension (not in nccl.h): the name of the allreduce algorithm comm would run
 * for count elements of datatype ("ring", "board", "recursive_doubling", "rabenseifner",
 * "torus", "hierarchical", "hierarchical_leader", "hierarchical_doubling"), or NULL for
 * a bad argument. The
 * string is static. Benchmarks print it. */
const char* tesseraAllReduceAlgorithm(tesseraComm_t comm, size_t count, tesseraDataType_t datatype);

/* Root's sendbuff is copied to every rank's recvbuff (count elements). In place when
 * sendbuff == recvbuff on the root; sendbuff is only read on the root. */
tesseraResult_t tesseraBroadcast(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                 int root, tesseraComm_t comm, tesseraStream_t stream);
/* In-place broadcast of buff (the legacy form). */
tesseraResult_t tesseraBcast(void* buff, size_t count, tesseraDataType_t datatype, int root, tesseraComm_t comm,
                             tesseraStream_t stream);

/* The root's recvbuff receives the reduction of every rank's sendbuff (count elements);
 * recvbuff is only written on the root. In place when sendbuff == recvbuff. */
tesseraResult_t tesseraReduce(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              tesseraRedOp_t op, int root, tesseraComm_t comm, tesseraStream_t stream);

/* Every rank's recvbuff (nranks * sendcount elements) receives rank i's sendbuff at
 * offset i * sendcount. In place when sendbuff == recvbuff + rank * sendcount. */
tesseraResult_t tesseraAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 tesseraDataType_t datatype, tesseraComm_t comm, tesseraStream_t stream);

/* sendbuff holds nranks * recvcount elements; rank i's recvbuff receives block i of the
 * reduction. In place when recvbuff == sendbuff + rank * recvcount. */
tesseraResult_t tesseraReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tesseraDataType_t datatype, tesseraRedOp_t op, tesseraComm_t comm,
                                     tesseraStream_t stream);

/* Rank i's block j (sendbuff + j * count) lands at rank j's recvbuff + i * count.
 * In place when sendbuff == recvbuff (the input is copied aside first); otherwise the
 * two must not overlap. */
tesseraResult_t tesseraAlltoAll(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                                tesseraComm_t comm, tesseraStream_t stream);

/* Rank i's sendbuff (count elements) lands at the root's recvbuff + i * count; recvbuff
 * is only used on the root. In place when sendbuff == recvbuff + root * count. */
tesseraResult_t tesseraGather(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                              int root, tesseraComm_t comm, tesseraStream_t stream);

/* The root's sendbuff + i * count (count elements) lands in rank i's recvbuff; sendbuff
 * is only used on the root. In place when recvbuff == sendbuff + root * count. */
tesseraResult_t tesseraScatter(const void* sendbuff, void* recvbuff, size_t count, tesseraDataType_t datatype,
                               int root, tesseraComm_t comm, tesseraStream_t stream);

/* Point to point: count elements to / from `peer`. A Send must be matched by a Recv of
 * the same count and datatype on the peer; outside a group each call blocks until its
 * data has moved, so exchanges between two ranks belong inside a group, where sends and
 * receives in any order progress together without deadlock. */
tesseraResult_t tesseraSend(const void* sendbuff, size_t count, tesseraDataType_t datatype, int peer,
                            tesseraComm_t comm, tesseraStream_t stream);
tesseraResult_t tesseraRecv(void* recvbuff, size_t count, tesseraDataType_t datatype, int peer,
                            tesseraComm_t comm, tesseraStream_t stream);

/* Groups. Between tesseraGroupStart and the matching tesseraGroupEnd (groups nest; only
 * the outermost End acts), calls on communicators are recorded and return
 * tesseraSuccess at once; the outermost tesseraGroupEnd runs them all: the operations of
 * each communicator in issue order, different communicators and all sends and receives
 * of the group progressing together. Buffers must stay valid until GroupEnd returns.
 * A call with invalid arguments (the collectives' common rules) is refused at once, by
 * the call, and not recorded; an error while running recorded calls is reported by
 * GroupEnd. Per thread, as NCCL. */
tesseraResult_t tesseraGroupStart(void);
tesseraResult_t tesseraGroupEnd(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TESSERA_TESSERA_H_ */
