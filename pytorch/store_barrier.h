// torch.distributed.monitored_barrier over a group's c10d store, as Gloo offers it: a
// barrier that names the ranks that did not arrive instead of hanging.
//
// Every rank but 0 checks in under its own key, then waits for rank 0's release. Rank 0
// waits for each check-in within the timeout, in rank order. A rank that does not check
// in is named in rank 0's error, with the process and host it published when the group
// was created ("[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms (pid 4242 on
// host b)", the first of Gloo's words kept so that what matches Gloo's message matches
// this); with wait_all_ranks every missing rank is named ("Ranks 1, 3 failed ..."). Rank
// 0 releases the others only when all arrived, so a failure raises on every rank: the
// others say that rank 0 did not release them.
//
// The communicator is never used: a barrier that fails leaves it as it was. Each round
// uses keys of its own (`round`, counted the same on every rank) and rank 0 deletes them
// once the round is over.
#ifndef TESSERA_PYTORCH_STORE_BARRIER_H_
#define TESSERA_PYTORCH_STORE_BARRIER_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "pytorch/torch_api.h"

namespace tessera_torch {

// Publishes who this rank is (pid and hostname) for later error messages. Called once
// per group by every rank, when the group is created.
void PublishIdentity(c10d::Store& store, int rank);

// What rank `rank` published with PublishIdentity ("pid 4242 on host b"), or "" if it
// did not (within a short wait).
std::string PublishedIdentity(c10d::Store& store, int rank);

// One monitored barrier; throws c10::Error (RuntimeError in Python) as described above.
void MonitoredBarrier(c10d::Store& store, int rank, int size, uint64_t round, std::chrono::milliseconds timeout,
                      bool wait_all_ranks);

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_STORE_BARRIER_H_
