// The drop-in libnccl.so.2: every function that NCCL 2.28.9's nccl.h declares, with that
// header's exact signatures, implemented on tessera's C API (include/tessera/tessera.h).
// docs/nccl.md lists them with what each one does here.
//
// The header is the CUDA toolkit's own (/usr/local/cuda/include/nccl.h, never a copy):
// every definition below sits in an extern "C" block and every public name is
// redeclared once more (the alias table at the end), so a signature that drifts from the
// header is a "conflicting declaration of C function" and the build fails
// (nccl/signature_drift_test.sh proves it).
//
// Symbols, as in NCCL: each function is defined under its profiling name pncclX, and
// ncclX is a weak alias of it, so that a profiling library can interpose ncclX and call
// on to pncclX. libnccl.so.2 exports exactly these names (nccl/nccl.lds).
//
// Handles: an ncclComm_t is the tesseraComm_t itself (an opaque pointer cast both ways).
// tessera already validates every handle against its set of live communicators (a
// destroyed one is ncclInvalidArgument, not a crash) and makes CommAbort and
// CommGetAsyncError safe from any thread; a wrapper object would have to repeat all of
// that, and the drop-in has no per-communicator state to keep.
//
// Enums: tessera numbers its result codes, data types and operators like nccl.h, so
// arguments are casts (checked by the static_asserts below). The one difference is
// tesseraTimeout (8), which nccl.h lacks: see FromTessera in dropin_result.h.
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "nccl/dropin_result.h"
#include "tessera/tessera.h"

using tessera_nccl::Fail;
using tessera_nccl::FromTessera;
using tessera_nccl::NotSupported;
using tessera_nccl::ToNccl;
using tessera_nccl::ToTessera;

// --- The numbering that makes most functions casts ------------------------------------

static_assert(ncclSuccess == static_cast<int>(tesseraSuccess), "result codes differ");
static_assert(ncclUnhandledCudaError == static_cast<int>(tesseraUnhandledCudaError), "result codes differ");
static_assert(ncclSystemError == static_cast<int>(tesseraSystemError), "result codes differ");
static_assert(ncclInternalError == static_cast<int>(tesseraInternalError), "result codes differ");
static_assert(ncclInvalidArgument == static_cast<int>(tesseraInvalidArgument), "result codes differ");
static_assert(ncclInvalidUsage == static_cast<int>(tesseraInvalidUsage), "result codes differ");
static_assert(ncclRemoteError == static_cast<int>(tesseraRemoteError), "result codes differ");
static_assert(ncclInProgress == static_cast<int>(tesseraInProgress), "result codes differ");
// nccl.h ends its codes where tessera has one more: tesseraTimeout is mapped, not cast.
static_assert(ncclNumResults == static_cast<int>(tesseraTimeout), "tesseraTimeout is the first code nccl.h lacks");

static_assert(ncclInt8 == static_cast<int>(tesseraInt8) && ncclChar == static_cast<int>(tesseraChar), "types differ");
static_assert(ncclUint8 == static_cast<int>(tesseraUint8), "data types differ");
static_assert(ncclInt32 == static_cast<int>(tesseraInt32) && ncclInt == static_cast<int>(tesseraInt), "types differ");
static_assert(ncclUint32 == static_cast<int>(tesseraUint32), "data types differ");
static_assert(ncclInt64 == static_cast<int>(tesseraInt64), "data types differ");
static_assert(ncclUint64 == static_cast<int>(tesseraUint64), "data types differ");
static_assert(ncclFloat16 == static_cast<int>(tesseraFloat16) && ncclHalf == static_cast<int>(tesseraHalf), "");
static_assert(ncclFloat32 == static_cast<int>(tesseraFloat32) && ncclFloat == static_cast<int>(tesseraFloat), "");
static_assert(ncclFloat64 == static_cast<int>(tesseraFloat64) && ncclDouble == static_cast<int>(tesseraDouble), "");
static_assert(ncclBfloat16 == static_cast<int>(tesseraBfloat16), "data types differ");
static_assert(ncclFloat8e4m3 == static_cast<int>(tesseraFloat8e4m3), "data types differ");
static_assert(ncclFloat8e5m2 == static_cast<int>(tesseraFloat8e5m2), "data types differ");
static_assert(ncclNumTypes == static_cast<int>(tesseraNumTypes), "data types differ");

static_assert(ncclSum == static_cast<int>(tesseraSum), "operators differ");
static_assert(ncclProd == static_cast<int>(tesseraProd), "operators differ");
static_assert(ncclMax == static_cast<int>(tesseraMax), "operators differ");
static_assert(ncclMin == static_cast<int>(tesseraMin), "operators differ");
static_assert(ncclAvg == static_cast<int>(tesseraAvg), "operators differ");
static_assert(ncclNumOps == static_cast<int>(tesseraNumOps), "PreMulSum operators start at the same value");
static_assert(ncclMaxRedOp == static_cast<int>(tesseraMaxRedOp), "operators differ");

static_assert(ncclScalarDevice == static_cast<int>(tesseraScalarDevice), "scalar residences differ");
static_assert(ncclScalarHostImmediate == static_cast<int>(tesseraScalarHostImmediate), "scalar residences differ");

static_assert(NCCL_UNIQUE_ID_BYTES == TESSERA_UNIQUE_ID_BYTES, "unique ids differ");
static_assert(sizeof(ncclUniqueId) == sizeof(tesseraUniqueId), "unique ids differ");
static_assert(NCCL_CONFIG_UNDEF_INT == TESSERA_CONFIG_UNDEF_INT, "config 'undefined' markers differ");
static_assert(NCCL_SPLIT_NOCOLOR == TESSERA_SPLIT_NOCOLOR, "split no-color values differ");

// Arguments passed by pointer are reinterpreted, so the objects must have one layout.
static_assert(sizeof(ncclComm_t) == sizeof(tesseraComm_t), "handles differ in size");
static_assert(sizeof(ncclResult_t) == sizeof(tesseraResult_t), "result codes differ in size");
static_assert(sizeof(ncclRedOp_t) == sizeof(tesseraRedOp_t), "operators differ in size");
static_assert(sizeof(ncclDataType_t) == sizeof(tesseraDataType_t), "data types differ in size");

namespace {

// What the drop-in reads from an ncclConfig_t.
constexpr unsigned int kNcclConfigMagic = 0xcafebeef;
// ncclConfig_t appeared in NCCL 2.14; later versions only appended fields, so the struct
// of any 2.14+ header can be read up to its `size`.
constexpr unsigned int kFirstConfigVersion = 21400;
// Alignment of ncclMemAlloc's host memory: a page, which also satisfies
// NCCL_WIN_REQUIRED_ALIGNMENT.
constexpr size_t kMemAllocAlignment = 4096;
static_assert(kMemAllocAlignment % NCCL_WIN_REQUIRED_ALIGNMENT == 0, "ncclMemAlloc alignment");

// The fields of *in that mean something to tessera (blocking, commName) as a
// tesseraConfig_t. Every other field tunes GPU kernels or the NCCL network plugin and is
// ignored (docs/nccl.md). A wrong magic, an unknown version or a size too small to hold
// `blocking` is ncclInvalidArgument.
ncclResult_t ToTesseraConfig(const char* function, const ncclConfig_t* in, tesseraConfig_t* out) {
  const tesseraConfig_t defaults = TESSERA_CONFIG_INITIALIZER;
  *out = defaults;
  if (in->magic != kNcclConfigMagic) {
    char magic[16];
    snprintf(magic, sizeof(magic), "0x%x", in->magic);
    return Fail(ncclInvalidArgument, function,
                std::string("config->magic is ") + magic +
                    ", not NCCL's 0xcafebeef: initialise the config with NCCL_CONFIG_INITIALIZER");
  }
  if (in->version < kFirstConfigVersion) {
    return Fail(ncclInvalidArgument, function,
                "config->version " + std::to_string(in->version) + " is older than NCCL 2.14's ncclConfig_t (21400)");
  }
  if (in->size < offsetof(ncclConfig_t, blocking) + sizeof(in->blocking)) {
    return Fail(ncclInvalidArgument, function,
                "config->size " + std::to_string(in->size) + " is too small for an ncclConfig_t");
  }
  out->blocking = in->blocking;
  if (in->size >= offsetof(ncclConfig_t, commName) + sizeof(in->commName)) out->commName = in->commName;
  return ncclSuccess;
}

// cudaStreamLegacy and cudaStreamPerThread are CUDA's names for the default stream; both
// become tessera's NULL stream. In the CPU library that means "complete before
// returning". In the CUDA library (nccl/cuda) device buffers on the NULL stream are
// staged on the legacy default stream, which also orders the per-thread default stream
// (CUDA synchronises the two). Any other stream is passed on: the CPU library refuses
// it, the CUDA library works in its order.
tesseraStream_t ToTesseraStream(cudaStream_t stream) {
  if (stream == cudaStreamLegacy || stream == cudaStreamPerThread) return nullptr;
  return static_cast<tesseraStream_t>(stream);
}

tesseraDataType_t ToTessera(ncclDataType_t datatype) { return static_cast<tesseraDataType_t>(datatype); }
tesseraRedOp_t ToTessera(ncclRedOp_t op) { return static_cast<tesseraRedOp_t>(op); }

// ncclCommInitRankConfig, also for ncclCommInitRankScalable (`function` names the caller
// in messages). A malformed config creates nothing and sets *comm to NULL.
ncclResult_t InitRankWithConfig(const char* function, ncclComm_t* comm, int nranks, const ncclUniqueId& commId,
                                int rank, const ncclConfig_t* config) {
  tesseraConfig_t converted;
  if (config != nullptr) {
    const ncclResult_t r = ToTesseraConfig(function, config, &converted);
    if (r != ncclSuccess) {
      if (comm != nullptr) *comm = nullptr;
      return r;
    }
  }
  tesseraUniqueId id;
  memcpy(id.internal, commId.internal, sizeof(id.internal));
  return FromTessera(tesseraCommInitRankConfig(reinterpret_cast<tesseraComm_t*>(comm), nranks, id, rank,
                                               config != nullptr ? &converted : nullptr));
}

// NCCL's ncclMemAlloc gives device memory, which programs then use with CUDA (nccl-tests
// cudaMemset it). The CUDA drop-in (TESSERA_NCCL_CUDA) does the same on the current device
// when this process can use CUDA. Otherwise, and on the CPU build, where collectives take
// host memory, it gives page-aligned host memory. Which kind is fixed per process.
#ifdef TESSERA_NCCL_CUDA
bool MemAllocOnDevice() {
  static const bool on_device = [] {
    int devices = 0;
    const bool usable = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    (void)cudaGetLastError();
    return usable;
  }();
  return on_device;
}
#endif

}  // namespace

extern "C" {

// --- Memory ---------------------------------------------------------------------------

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  const char* fn = "ncclMemAlloc";
  if (ptr == nullptr) return Fail(ncclInvalidArgument, fn, "ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  // Round up to the alignment, as aligned_alloc requires (and NCCL's granularity does).
  if (size > SIZE_MAX - kMemAllocAlignment) {
    return Fail(ncclInvalidArgument, fn, "size " + std::to_string(size) + " is too large");
  }
  const size_t rounded = (size + kMemAllocAlignment - 1) / kMemAllocAlignment * kMemAllocAlignment;
#ifdef TESSERA_NCCL_CUDA
  if (MemAllocOnDevice()) {
    const cudaError_t e = cudaMalloc(ptr, rounded);
    if (e == cudaSuccess) return ncclSuccess;
    *ptr = nullptr;
    (void)cudaGetLastError();
    return Fail(ncclUnhandledCudaError, fn,
                "cudaMalloc of " + std::to_string(rounded) + " bytes: " + cudaGetErrorString(e));
  }
#endif
  void* memory = aligned_alloc(kMemAllocAlignment, rounded);
  if (memory == nullptr) {
    return Fail(ncclSystemError, fn, "out of host memory for " + std::to_string(size) + " bytes");
  }
  *ptr = memory;
  return ncclSuccess;
}

// Frees what pncclMemAlloc returned; NULL is a no-op, as free().
ncclResult_t pncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
#ifdef TESSERA_NCCL_CUDA
  if (MemAllocOnDevice()) {
    const cudaError_t e = cudaFree(ptr);
    if (e == cudaSuccess) return ncclSuccess;
    (void)cudaGetLastError();
    return Fail(ncclUnhandledCudaError, "ncclMemFree", std::string("cudaFree: ") + cudaGetErrorString(e));
  }
#endif
  free(ptr);
  return ncclSuccess;
}

// --- Version and ids ------------------------------------------------------------------

// The API level implemented: the version of the nccl.h this library was built against
// (callers compare it to enable features). tessera's own version is tesseraGetVersion's.
ncclResult_t pncclGetVersion(int* version) {
  if (version == nullptr) return Fail(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  tesseraUniqueId id;
  const tesseraResult_t r = tesseraGetUniqueId(uniqueId != nullptr ? &id : nullptr);
  if (r == tesseraSuccess) memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
  return FromTessera(r);
}

// --- Communicators --------------------------------------------------------------------

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return InitRankWithConfig("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  tesseraUniqueId id;
  memcpy(id.internal, commId.internal, sizeof(id.internal));
  return FromTessera(tesseraCommInitRank(reinterpret_cast<tesseraComm_t*>(comm), nranks, id, rank));
}

ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return FromTessera(tesseraCommInitAll(reinterpret_cast<tesseraComm_t*>(comm), ndev, devlist));
}

ncclResult_t pncclCommFinalize(ncclComm_t comm) { return FromTessera(tesseraCommFinalize(ToTessera(comm))); }

ncclResult_t pncclCommDestroy(ncclComm_t comm) { return FromTessera(tesseraCommDestroy(ToTessera(comm))); }

ncclResult_t pncclCommAbort(ncclComm_t comm) { return FromTessera(tesseraCommAbort(ToTessera(comm))); }

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return FromTessera(tesseraCommRevoke(ToTessera(comm), revokeFlags));
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  tesseraConfig_t converted;
  if (config != nullptr) {
    const ncclResult_t r = ToTesseraConfig("ncclCommSplit", config, &converted);
    if (r != ncclSuccess) {
      if (newcomm != nullptr) *newcomm = nullptr;
      return r;
    }
  }
  return FromTessera(tesseraCommSplit(ToTessera(comm), color, key, reinterpret_cast<tesseraComm_t*>(newcomm),
                                      config != nullptr ? &converted : nullptr));
}

// NCCL_SHRINK_DEFAULT and NCCL_SHRINK_ABORT have tessera's values; a NULL or empty list
// excludes the ranks the communicator's failure diagnosis named (tessera's extension).
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags) {
  tesseraConfig_t converted;
  if (config != nullptr) {
    const ncclResult_t r = ToTesseraConfig("ncclCommShrink", config, &converted);
    if (r != ncclSuccess) {
      if (newcomm != nullptr) *newcomm = nullptr;
      return r;
    }
  }
  return FromTessera(tesseraCommShrink(ToTessera(comm), excludeRanksList, excludeRanksCount,
                                       reinterpret_cast<tesseraComm_t*>(newcomm),
                                       config != nullptr ? &converted : nullptr, shrinkFlags));
}

// The several ids only spread NCCL's bootstrap over several roots. Every rank passes the
// same ids in the same order, so all of them can meet at the first one: the communicator
// is the one ncclCommInitRankConfig(commIds[0]) creates. The rendezvous services of the
// other ids, never contacted, end on their own at TESSERA_TIMEOUT_MS.
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    if (newcomm != nullptr) *newcomm = nullptr;
    return Fail(ncclInvalidArgument, "ncclCommInitRankScalable",
                commIds == nullptr ? "commIds is NULL" : "nId " + std::to_string(nId) + " must be >= 1");
  }
  return InitRankWithConfig("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
}

// --- Errors ---------------------------------------------------------------------------

const char* pncclGetErrorString(ncclResult_t result) {
  if (result < ncclSuccess || result >= ncclNumResults) return "unknown result code";
  return tesseraGetErrorString(static_cast<tesseraResult_t>(result));
}

const char* pncclGetLastError(ncclComm_t comm) { return tessera_nccl::LastError(comm); }

// Honoured as a no-op: tessera reads its log settings (TESSERA_DEBUG) from the
// environment whenever a communicator is created, so there is nothing to reload.
void pncclResetDebugInit() {}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  tesseraResult_t error = tesseraSuccess;
  const tesseraResult_t r = tesseraCommGetAsyncError(ToTessera(comm), asyncError != nullptr ? &error : nullptr);
  if (r == tesseraSuccess) {
    // The communicator's error, mapped like a returned one (a timeout is a remote error).
    *asyncError = error == tesseraTimeout ? ncclRemoteError : static_cast<ncclResult_t>(error);
  }
  return FromTessera(r);
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return FromTessera(tesseraCommCount(ToTessera(comm), count));
}

// tessera answers ncclInvalidUsage ("not supported") on a CPU build, which has no device.
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return FromTessera(tesseraCommCuDevice(ToTessera(comm), device));
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return FromTessera(tesseraCommUserRank(ToTessera(comm), rank));
}

// --- Registration and windows: not supported ------------------------------------------

// Registration maps CUDA buffers for zero-copy transfers by the GPU and the NIC; tessera
// moves host memory through its own shared memory and sockets and has nothing to map.
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  (void)comm;
  (void)buff;
  (void)size;
  if (handle != nullptr) *handle = nullptr;
  return NotSupported("ncclCommRegister", "buffer registration maps CUDA memory for zero-copy transfers");
}

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  (void)comm;
  (void)handle;
  return NotSupported("ncclCommDeregister", "buffer registration maps CUDA memory for zero-copy transfers");
}

// Windows are symmetric device memory that GPU kernels (the device API) load from and
// store to across ranks; a CPU build has neither.
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  (void)comm;
  (void)buff;
  (void)size;
  (void)winFlags;
  if (win != nullptr) *win = nullptr;
  return NotSupported("ncclCommWindowRegister", "memory windows are symmetric device memory for GPU kernels");
}

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)comm;
  (void)win;
  return NotSupported("ncclCommWindowDeregister", "memory windows are symmetric device memory for GPU kernels");
}

// --- Reduction operators --------------------------------------------------------------

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  return FromTessera(tesseraRedOpCreatePreMulSum(reinterpret_cast<tesseraRedOp_t*>(op), scalar, ToTessera(datatype),
                                                 static_cast<tesseraScalarResidence_t>(residence), ToTessera(comm)));
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return FromTessera(tesseraRedOpDestroy(ToTessera(op), ToTessera(comm)));
}

// --- Collectives ----------------------------------------------------------------------

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraReduce(sendbuff, recvbuff, count, ToTessera(datatype), ToTessera(op), root,
                                   ToTessera(comm), ToTesseraStream(stream)));
}

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return FromTessera(
      tesseraBcast(buff, count, ToTessera(datatype), root, ToTessera(comm), ToTesseraStream(stream)));
}

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraBroadcast(sendbuff, recvbuff, count, ToTessera(datatype), root, ToTessera(comm),
                                      ToTesseraStream(stream)));
}

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraAllReduce(sendbuff, recvbuff, count, ToTessera(datatype), ToTessera(op),
                                      ToTessera(comm), ToTesseraStream(stream)));
}

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraReduceScatter(sendbuff, recvbuff, recvcount, ToTessera(datatype), ToTessera(op),
                                          ToTessera(comm), ToTesseraStream(stream)));
}

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraAllGather(sendbuff, recvbuff, sendcount, ToTessera(datatype), ToTessera(comm),
                                      ToTesseraStream(stream)));
}

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraAlltoAll(sendbuff, recvbuff, count, ToTessera(datatype), ToTessera(comm),
                                     ToTesseraStream(stream)));
}

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraGather(sendbuff, recvbuff, count, ToTessera(datatype), root, ToTessera(comm),
                                   ToTesseraStream(stream)));
}

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return FromTessera(tesseraScatter(sendbuff, recvbuff, count, ToTessera(datatype), root, ToTessera(comm),
                                    ToTesseraStream(stream)));
}

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return FromTessera(
      tesseraSend(sendbuff, count, ToTessera(datatype), peer, ToTessera(comm), ToTesseraStream(stream)));
}

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return FromTessera(
      tesseraRecv(recvbuff, count, ToTessera(datatype), peer, ToTessera(comm), ToTesseraStream(stream)));
}

// --- Groups ---------------------------------------------------------------------------

ncclResult_t pncclGroupStart() { return FromTessera(tesseraGroupStart()); }

ncclResult_t pncclGroupEnd() { return FromTessera(tesseraGroupEnd()); }

// Not supported: tessera has no cost model to estimate a group with. The group stays
// open, as if this call had not been made: end it with ncclGroupEnd.
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return NotSupported("ncclGroupSimulateEnd",
                      "tessera cannot estimate a group's time; the group is still open: end it with ncclGroupEnd");
}

}  // extern "C"

// --- The public names: weak aliases of the pnccl* definitions -------------------------
// Each line restates nccl.h's signature; the compiler checks it against the header.

// The static_assert also ties pncclX to ncclX, in case the header's two ever differ.
#define NCCL_DROPIN_ALIAS(ret, name, params)                                \
  extern "C" ret name params __attribute__((weak, alias("p" #name)));       \
  static_assert(std::is_same<ret(*) params, decltype(&p##name)>::value, \
                "p" #name " does not have the signature nccl.h gives " #name);

NCCL_DROPIN_ALIAS(ncclResult_t, ncclMemAlloc, (void**, size_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclMemFree, (void*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGetVersion, (int*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommFinalize, (ncclComm_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommDestroy, (ncclComm_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommAbort, (ncclComm_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))
NCCL_DROPIN_ALIAS(const char*, ncclGetErrorString, (ncclResult_t))
NCCL_DROPIN_ALIAS(const char*, ncclGetLastError, (ncclComm_t))
// Deprecated in nccl.h, still declared and exported.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NCCL_DROPIN_ALIAS(void, ncclResetDebugInit, ())
#pragma GCC diagnostic pop
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclReduce,
                  (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclBcast, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclBroadcast,
                  (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclAllReduce,
                  (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclReduceScatter,
                  (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclAllGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclAlltoAll, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGather,
                  (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclScatter,
                  (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclSend, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGroupStart, ())
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGroupEnd, ())
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))
