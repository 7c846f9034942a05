// CallObserver: what records a call, told by the one place that runs calls (the
// communicator's executor): the flight recorder (the communicator's last calls, for
// dumps), the activity record (what this rank is doing, for its peers' diagnosis) and
// the tracer (TESSERA_TRACE_DIR). A call is one collective, or one group's sends and
// receives: it begins, learns the algorithm of each collective it runs, and ends.
//
// Observers are called on the thread that runs the call, one call at a time.
#ifndef TESSERA_BASE_CALL_OBSERVER_H_
#define TESSERA_BASE_CALL_OBSERVER_H_

#include <cstdint>

#include "base/call_stamp.h"
#include "base/types.h"

namespace tessera {

struct CallRecord {
  const char* what = "";  // "allreduce", ..., "send/recv" (a string that outlives the call)
  CallStamp stamp;        // what every rank's call must match; sequence number 0 for sends and receives
  uint64_t bytes = 0;     // this rank's input bytes (a group: its sends' total)
  bool on_device = false; // on device buffers (device-resident)
};

// How a call ended.
enum class CallOutcome {
  kDone,
  // Failed without breaking the communicator (an argument found wrong as it ran).
  kFailed,
  // Failed while communicating: the communicator breaks next (it diagnoses the failure,
  // writes the flight record and tells its peers). Until it has, the activity record
  // still shows this rank in the call, which is where the peers' diagnosis must find it.
  kBreaking,
};

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // `now_us`: the monotonic clock (NowMicros or CoarseNowMicros) at the call's start.
  virtual void CallBegan(const CallRecord& call, int64_t now_us) = 0;
  // The algorithm (its table label) of a collective the call runs: once for most calls,
  // once per collective for a call made of several (deterministic mode's reductions).
  virtual void AlgorithmChosen(OpKind collective, const char* label) = 0;
  virtual void CallEnded(CallOutcome outcome, int64_t now_us) = 0;
};

}  // namespace tessera

#endif  // TESSERA_BASE_CALL_OBSERVER_H_
