// PollUntil: a bounded wait for a condition that offers nothing to block on (a GPU
// event, a word a stream writes into host memory): it is asked again and again, with
// pauses of 1 us at first, doubling up to 1 ms, so a condition met within microseconds
// costs microseconds and a long wait costs a wake-up a millisecond.
#ifndef TESSERA_BASE_POLL_H_
#define TESSERA_BASE_POLL_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "base/deadline.h"
#include "base/status.h"

namespace tessera {

// Calls ready(&done) (a Status(bool*)) until it sets done (OK) or fails (its error).
// RemoteError "<what>: the communicator was aborted" once *abort is true (abort may be
// null); TimeoutError "<what>: <late>" once `deadline` has passed.
template <typename Ready>
Status PollUntil(Ready ready, const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what,
                 const std::string& late) {
  int64_t pause_us = 0;
  for (;;) {
    bool done = false;
    TESSERA_RETURN_IF_ERROR(ready(&done));
    if (done) return Status::Ok();
    if (abort != nullptr && abort->load()) return RemoteError(what + ": the communicator was aborted");
    if (deadline.Expired()) return TimeoutError(what + ": " + late);
    if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
    pause_us = std::min<int64_t>(1000, std::max<int64_t>(1, pause_us * 2));
  }
}

}  // namespace tessera

#endif  // TESSERA_BASE_POLL_H_
