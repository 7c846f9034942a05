#include "diagnosis/health.h"

#include <cinttypes>
#include <cstdio>

#include "base/json.h"

namespace tessera {
namespace {

std::string Seconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6f", static_cast<double>(us) / 1e6);
  return buf;
}

template <typename T, typename F>
std::string List(const std::vector<T>& items, F each) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i > 0 ? ", " : "") + each(items[i]);
  return out + "]";
}

std::string StragglerJson(const HealthSnapshot& h) {
  const StragglerVerdict& v = h.straggler;
  if (!v.named()) return "null";
  char shares[64];
  std::snprintf(shares, sizeof(shares), "\"wait_share\": %.3f, \"time_share\": %.3f", v.wait_permille / 1000.0,
                v.cost_permille / 1000.0);
  return "{\"rank\": " + std::to_string(v.rank) + ", \"window_calls\": " + std::to_string(v.window_calls) +
         ", \"late_calls\": " + std::to_string(v.last_calls) + ", " + shares + ", \"median_lag_s\": " +
         Seconds(v.median_lag_us) + ", \"waiters\": " +
         List(v.waiters, [](int32_t r) { return std::to_string(r); }) + ", \"text\": " + JsonString(h.straggler_text) +
         "}";
}

}  // namespace

std::string HealthJson(const HealthSnapshot& h) {
  char id[24];
  std::snprintf(id, sizeof(id), "%016" PRIx64, h.comm_id);
  std::string kinds;
  for (int k = 0; k < kCallKinds; ++k) {
    const CallCounts& c = h.kinds[k];
    if (c.calls == 0) continue;
    kinds += std::string(kinds.empty() ? "" : ", ") + JsonString(CallKindName(k)) + ": {\"calls\": " +
             std::to_string(c.calls) + ", \"failures\": " + std::to_string(c.failures) + ", \"bytes\": " +
             std::to_string(c.bytes) + ", \"seconds\": " + Seconds(c.time_us) + "}";
  }
  return std::string("{\"comm_id\": \"") + id + "\", \"rank\": " + std::to_string(h.rank) + ", \"nranks\": " +
         std::to_string(h.nranks) + ", \"pid\": " + std::to_string(h.pid) + ", \"host\": " + JsonString(h.host) +
         ", \"state\": " + (h.broken ? "\"broken\"" : "\"ok\"") + ", \"revokes\": " + std::to_string(h.revokes) +
         ", \"shrinks\": " + std::to_string(h.shrinks) + ", \"calls\": {" + kinds + "}, \"stalled_s\": " +
         Seconds(h.stalled_us) + ", \"peer_stalled_s\": " + List(h.peer_stall_us, Seconds) +
         ", \"straggler\": " + StragglerJson(h) + ", \"judge\": " + (h.judge ? "true" : "false") + "}";
}

}  // namespace tessera
