// The host side of NCCL 2.28's device API, as the drop-in libnccl.so.2 offers it.
//
// The device API (nccl_device.h, the CUDA toolkit's own header, included here so that
// the signatures are checked) lets CUDA kernels talk to peers directly: its host
// functions size and create device communicators, barriers and all-to-all buffers over
// symmetric device memory. A CPU build has no device and no such memory, so those
// answer ncclInvalidUsage ("not supported") with a message for ncclGetLastError; they
// exist so that programs built against the header still link and load.
//
// What is honoured: ncclTeamWorld and ncclTeamRankToWorld (they only describe the
// communicator's ranks) and ncclLLA2ACalcSlots (arithmetic on the caller's numbers).
// The LSA ("load/store accessible" device memory) and rail teams describe the device
// runtime: they return what NCCL returns when that runtime cannot start (an empty team,
// or -1), with a "not supported" message.
//
// Symbols: as in nccl_api.cc, pncclX is the definition and ncclX a weak alias.
#include <nccl.h>
#include <nccl_device.h>

#include <string>
#include <type_traits>

#include "nccl/dropin_result.h"
#include "tessera/tessera.h"

using tessera_nccl::FromTessera;
using tessera_nccl::NotSupported;
using tessera_nccl::ToTessera;

namespace {

constexpr char kNoDeviceRuntime[] = "the device API runs CUDA kernels on symmetric device memory";

// The team NCCL returns when its device runtime cannot start.
ncclTeam_t EmptyTeam() {
  ncclTeam_t team;
  team.nRanks = 0;
  team.rank = 0;
  team.stride = 0;
  return team;
}

}  // namespace

extern "C" {

ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  (void)comm;
  (void)reqs;
  (void)outDevComm;
  return NotSupported("ncclDevCommCreate", kNoDeviceRuntime);
}

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  (void)comm;
  (void)devComm;
  return NotSupported("ncclDevCommDestroy", kNoDeviceRuntime);
}

// Every rank of comm, this one at its rank. An empty team when comm is not a live
// communicator (the message is in ncclGetLastError).
ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  int nranks = 0, rank = 0;
  if (FromTessera(tesseraCommCount(ToTessera(comm), &nranks)) != ncclSuccess ||
      FromTessera(tesseraCommUserRank(ToTessera(comm), &rank)) != ncclSuccess) {
    return EmptyTeam();
  }
  ncclTeam_t team;
  team.nRanks = nranks;
  team.rank = rank;
  team.stride = 1;
  return team;
}

ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  (void)comm;
  NotSupported("ncclTeamLsa", kNoDeviceRuntime);
  return EmptyTeam();
}

ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  (void)comm;
  NotSupported("ncclTeamRail", kNoDeviceRuntime);
  return EmptyTeam();
}

// The world rank of `team`'s member `rank`, where team contains this rank at team.rank.
// -1 when comm is not a live communicator.
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  int my_rank = 0;
  if (FromTessera(tesseraCommUserRank(ToTessera(comm), &my_rank)) != ncclSuccess) return -1;
  return my_rank + (rank - team.rank) * team.stride;
}

int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  (void)comm;
  (void)team;
  (void)rank;
  NotSupported("ncclTeamRankToLsa", kNoDeviceRuntime);
  return -1;
}

// Slots of 8 bytes that maxElts elements of maxEltSize bytes each occupy. -1 for
// negative sizes or when the count does not fit in an int.
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  if (maxElts < 0 || maxEltSize < 0) {
    tessera_nccl::Fail(ncclInvalidArgument, "ncclLLA2ACalcSlots",
                       "maxElts " + std::to_string(maxElts) + " and maxEltSize " + std::to_string(maxEltSize) +
                           " must be >= 0");
    return -1;
  }
  const long long slots = static_cast<long long>(maxElts) * ((maxEltSize + 7LL) / 8);
  if (slots > 0x7fffffffLL) {
    tessera_nccl::Fail(ncclInvalidArgument, "ncclLLA2ACalcSlots", std::to_string(slots) + " slots overflow an int");
    return -1;
  }
  return static_cast<int>(slots);
}

ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq) {
  (void)nBlocks;
  (void)nSlots;
  (void)outHandle;
  (void)outReq;
  return NotSupported("ncclLLA2ACreateRequirement", kNoDeviceRuntime);
}

ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq) {
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return NotSupported("ncclLsaBarrierCreateRequirement", kNoDeviceRuntime);
}

ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq) {
  (void)comm;
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return NotSupported("ncclGinBarrierCreateRequirement", kNoDeviceRuntime);
}

}  // extern "C"

// --- The public names: weak aliases, checked against nccl_device.h's declarations ----

// nccl_device.h declares no pncclX: the static_assert ties each definition's type to the
// header's declaration of ncclX.
#define NCCL_DROPIN_ALIAS(ret, name, params)                                \
  extern "C" ret name params __attribute__((weak, alias("p" #name)));       \
  static_assert(std::is_same<ret(*) params, decltype(&p##name)>::value, \
                "p" #name " does not have the signature nccl_device.h gives " #name);

NCCL_DROPIN_ALIAS(ncclResult_t, ncclDevCommCreate, (ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, ncclDevComm_t const*))
NCCL_DROPIN_ALIAS(ncclTeam_t, ncclTeamWorld, (ncclComm_t))
NCCL_DROPIN_ALIAS(ncclTeam_t, ncclTeamLsa, (ncclComm_t))
NCCL_DROPIN_ALIAS(ncclTeam_t, ncclTeamRail, (ncclComm_t))
NCCL_DROPIN_ALIAS(int, ncclTeamRankToWorld, (ncclComm_t, ncclTeam_t, int))
NCCL_DROPIN_ALIAS(int, ncclTeamRankToLsa, (ncclComm_t, ncclTeam_t, int))
NCCL_DROPIN_ALIAS(int, ncclLLA2ACalcSlots, (int, int))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclLLA2ACreateRequirement,
                  (int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclLsaBarrierCreateRequirement,
                  (ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*))
NCCL_DROPIN_ALIAS(ncclResult_t, ncclGinBarrierCreateRequirement,
                  (ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*))
