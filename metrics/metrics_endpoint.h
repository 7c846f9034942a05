// MetricsEndpoint: the process's metrics server, shared by its communicators (a port
// serves one process). Each communicator created with TESSERA_METRICS_PORT joins with
// a source of its health snapshot; the first to join starts the server (HttpServer),
// the last to leave stops it. It serves, from its own thread (never a collective's):
//   /metrics  every joined communicator's snapshot in the Prometheus text format
//   /health   the same as JSON (metrics/exposition.h)
// Thread-safe.
#ifndef TESSERA_METRICS_METRICS_ENDPOINT_H_
#define TESSERA_METRICS_METRICS_ENDPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "base/status.h"
#include "diagnosis/health.h"

namespace tessera {

class MetricsEndpoint {
 public:
  using Source = std::function<HealthSnapshot()>;
  // Joins `source` (called on the server's thread until the endpoint is destroyed). The
  // server listens on `port` unless it already runs (then on the port it has). An
  // error, naming the port, when it cannot start.
  static Status Join(int port, Source source, std::unique_ptr<MetricsEndpoint>* out);
  ~MetricsEndpoint();  // leaves: waits for a page that reads the source to be done
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

 private:
  MetricsEndpoint(uint64_t id, int port) : id_(id), port_(port) {}
  uint64_t id_;
  int port_;
};

}  // namespace tessera

#endif  // TESSERA_METRICS_METRICS_ENDPOINT_H_
