#include "transport/shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace tessera {

// The publisher has stored its data (head or tail) before calling Ring. The fence
// orders that store before the load of `sleepers`; the sleeper increments `sleepers`
// (a full barrier, WaitSet::Announce) before re-checking for data. So either the
// sleeper's re-check sees the data, or this load sees the sleeper and the bell changes
// under its futex wait. A rank that nobody waits for costs a fence and a read of a line
// that rarely changes, instead of a locked increment of a line the two processes would
// keep stealing.
void Doorbell::Ring() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) {
    bell.fetch_add(1, std::memory_order_seq_cst);
    // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace tessera
