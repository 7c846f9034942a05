#include "comm/health_report.h"

#include <algorithm>
#include <cstring>

namespace tessera {

Status CheckHealthArguments(const tesseraHealth_t* health, int npeers) {
  if (health == nullptr) return InvalidArgument("health is NULL");
  if (health->size < sizeof(tesseraHealth_t)) {
    return InvalidArgument("health->size is " + std::to_string(health->size) + ", not at least " +
                           std::to_string(sizeof(tesseraHealth_t)) + " (use TESSERA_HEALTH_INITIALIZER)");
  }
  if (npeers < 0) return InvalidArgument("npeers is " + std::to_string(npeers));
  return Status::Ok();
}

void FillHealth(const HealthSnapshot& h, tesseraHealth_t* out, double* peer_stalled_s, int npeers) {
  const size_t size = out->size;
  *out = tesseraHealth_t{};
  out->size = size;
  out->rank = h.rank;
  out->nranks = h.nranks;
  out->broken = h.broken ? 1 : 0;
  int64_t call_us = 0;
  for (const CallCounts& c : h.kinds) {
    out->calls += c.calls;
    out->failures += c.failures;
    out->bytes += c.bytes;
    call_us += c.time_us;
  }
  out->callSeconds = static_cast<double>(call_us) / 1e6;
  out->stalledSeconds = static_cast<double>(h.stalled_us) / 1e6;
  const StragglerVerdict& v = h.straggler;
  out->straggler = v.rank;
  out->windowCalls = static_cast<int>(v.window_calls);
  out->lateCalls = static_cast<int>(v.last_calls);
  out->stragglerLagSeconds = static_cast<double>(v.median_lag_us) / 1e6;
  out->waitShare = v.wait_permille / 1000.0;
  out->timeShare = v.cost_permille / 1000.0;
  const size_t text = std::min(h.straggler_text.size(), sizeof(out->verdict) - 1);
  std::memcpy(out->verdict, h.straggler_text.data(), text);
  out->verdict[text] = '\0';
  if (peer_stalled_s == nullptr) return;
  const size_t n = std::min(static_cast<size_t>(npeers), h.peer_stall_us.size());
  for (size_t r = 0; r < n; ++r) peer_stalled_s[r] = static_cast<double>(h.peer_stall_us[r]) / 1e6;
}

}  // namespace tessera
