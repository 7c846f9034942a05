// The health snapshot of one rank of a communicator: what its calls did (CallStats),
// how long it stalled on each peer (Activity), the straggler verdict, its failures,
// revokes and shrinks. Read by tesseraCommGetHealth, served as JSON on /health and in
// the Prometheus text format on /metrics (metrics/). Taken on any thread, at any time.
#ifndef TESSERA_DIAGNOSIS_HEALTH_H_
#define TESSERA_DIAGNOSIS_HEALTH_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "diagnosis/call_stats.h"
#include "diagnosis/straggler.h"

namespace tessera {

struct HealthSnapshot {
  uint64_t comm_id = 0;   // the same on every rank of the communicator
  int rank = 0;
  int nranks = 1;
  int pid = 0;
  std::string host;
  bool broken = false;    // a call failed while communicating (the sticky error)
  uint64_t revokes = 0;   // tesseraCommRevoke on this communicator (0 or 1)
  uint64_t shrinks = 0;   // communicators shrunk from this one
  std::array<CallCounts, kCallKinds> kinds;  // by CallKindName
  int64_t stalled_us = 0;                    // in all
  std::vector<int64_t> peer_stall_us;        // by peer rank
  StragglerVerdict straggler;
  std::string straggler_text;  // StragglerText; "" when none is named
  std::string straggler_host;  // the straggler's host
  bool judge = false;          // this rank judges (the verdict is current, not a period late)
};

// {"comm_id": "0123456789abcdef", "rank": 0, ..., "straggler": {...} or null}
std::string HealthJson(const HealthSnapshot& h);

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_HEALTH_H_
