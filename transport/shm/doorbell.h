// Doorbell: a wake-up word in shared memory, one per rank (in its shared-memory
// segment). Peers ring it after publishing data for that rank or freeing space it waits
// for; the rank sleeps on it with a futex wait (WaitSet::AddWakeWord).
#ifndef TESSERA_TRANSPORT_SHM_DOORBELL_H_
#define TESSERA_TRANSPORT_SHM_DOORBELL_H_

#include <atomic>
#include <cstdint>

#include "transport/transport.h"

namespace tessera {

struct Doorbell {
  std::atomic<uint32_t> bell{0};
  std::atomic<uint32_t> sleepers{0};
  // After publishing: if anyone sleeps, bell++ and futex-wake.
  void Ring();
  // What a rank waiting for this doorbell's owner's data sleeps on.
  void AddTo(WaitSet* set) { set->AddWakeWord(&bell, &sleepers); }
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_SHM_DOORBELL_H_
