// The health snapshots of a process's communicators (diagnosis/health.h) as the pages
// the metrics server serves: /metrics in the Prometheus text exposition format 0.0.4,
// /health as JSON. Pure functions.
//
// Every sample carries the labels comm (the communicator's id, 16 hex digits) and rank;
// Prometheus adds its own (job, instance). The families (docs/diagnosis.md#metrics):
//   tessera_info{host, pid, nranks}                    1
//   tessera_calls_total{kind}                          calls ended (done or failed)
//   tessera_call_failures_total{kind}
//   tessera_bytes_total{kind}                          this rank's input bytes, calls done
//   tessera_call_duration_seconds{kind}                histogram (tick clock: 1-4 ms a call)
//   tessera_stalled_seconds_total                      stalled waiting on peers
//   tessera_peer_stalled_seconds_total{peer}           ... while that peer was pending
//   tessera_straggler{straggler, straggler_host}       share of the window's waiting on
//                                                      late ranks that was on it; absent:
//                                                      none named
//   tessera_straggler_late_calls{straggler, ...}       the window's calls it was last in
//   tessera_straggler_lag_seconds{straggler, ...}      median of how much after the first
//   tessera_straggler_judge                            1 on the rank that judges
//   tessera_broken                                     1 once a call failed communicating
//   tessera_revokes_total, tessera_shrinks_total
#ifndef TESSERA_METRICS_EXPOSITION_H_
#define TESSERA_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "diagnosis/health.h"

namespace tessera {

std::string PrometheusText(const std::vector<HealthSnapshot>& comms);
// {"communicators": [HealthJson of each]}
std::string HealthPage(const std::vector<HealthSnapshot>& comms);
// A label's value escaped as the text format wants (\\, \", \n).
std::string LabelValue(const std::string& value);

constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tessera

#endif  // TESSERA_METRICS_EXPOSITION_H_
