// Creating communicators for the C API: from a unique id, for every rank of one process,
// from the launcher's environment, by splitting or shrinking one; and the fields of a
// tesseraConfig_t. Each new communicator gets a live handle (handle_registry.h) and, in
// the CUDA build, its device engine and links (DevicePath::Attach).
#ifndef TESSERA_COMM_COMM_INIT_H_
#define TESSERA_COMM_COMM_INIT_H_

#include <cstdint>

#include "base/status.h"
#include "comm/handle.h"
#include "tessera/tessera.h"

namespace tessera {

// tesseraGetUniqueId: a new id whose rendezvous this process serves.
Status NewApiUniqueId(tesseraUniqueId* out);

// tesseraCommInitRank(Config) (`fn` names it in errors): a blocking communicator is
// created before this returns; a non-blocking one (config.blocking = 0) on its worker,
// and this answers InProgress with *out already set.
Status InitRank(const char* fn, int nranks, const tesseraUniqueId& id, int rank, const tesseraConfig_t* config,
                tesseraComm** out);

// tesseraCommInitAll: `ndev` ranks of one communicator, each created on a thread of its
// own; on a failure none is left, and the result and this thread's last error are the
// first failed rank's.
tesseraResult_t InitAll(tesseraComm** comms, int ndev);

// tesseraCommInitFromEnv.
Status InitFromEnv(tesseraComm** out);

// tesseraCommSplit on live handle `comm`: *out stays null for TESSERA_SPLIT_NOCOLOR.
// A NULL config inherits comm's blocking.
Status SplitHandle(tesseraComm* comm, int color, int key, const tesseraConfig_t* config, tesseraComm** out);

// tesseraCommShrink on live handle `comm` (its arguments validated: call_validation.h).
Status ShrinkHandle(tesseraComm* comm, const int* exclude_ranks, int exclude_count, const tesseraConfig_t* config,
                    int flags, tesseraComm** out);

}  // namespace tessera

#endif  // TESSERA_COMM_COMM_INIT_H_
