#include "metrics/metrics_endpoint.h"

#include <map>
#include <mutex>
#include <vector>

#include "metrics/exposition.h"
#include "metrics/http_server.h"

namespace tessera {
namespace {

// The process's server and the sources joined to it.
struct Served {
  std::mutex mu;  // held while a page reads the sources
  std::map<uint64_t, MetricsEndpoint::Source> sources;
  uint64_t next_id = 1;
  std::unique_ptr<HttpServer> server;
};

Served& TheServed() {
  static Served* served = new Served();  // never destroyed: ranks may exit with it running
  return *served;
}

void ServePage(const std::string& path, HttpReply* reply) {
  std::vector<HealthSnapshot> snapshots;
  {
    Served& s = TheServed();
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [id, source] : s.sources) snapshots.push_back(source());
  }
  if (path == "/metrics") {
    reply->content_type = kPrometheusContentType;
    reply->body = PrometheusText(snapshots);
  } else if (path == "/health") {
    reply->content_type = "application/json";
    reply->body = HealthPage(snapshots);
  } else {
    reply->status = path == "/" ? 200 : 404;
    reply->body = "tessera: /metrics (Prometheus text format), /health (JSON)\n";
  }
}

}  // namespace

Status MetricsEndpoint::Join(int port, Source source, std::unique_ptr<MetricsEndpoint>* out) {
  Served& s = TheServed();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.server) TESSERA_RETURN_IF_ERROR(HttpServer::Start(port, ServePage, &s.server));
  const uint64_t id = s.next_id++;
  s.sources[id] = std::move(source);
  out->reset(new MetricsEndpoint(id, s.server->port()));
  return Status::Ok();
}

MetricsEndpoint::~MetricsEndpoint() {
  Served& s = TheServed();
  std::unique_ptr<HttpServer> last;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.sources.erase(id_);
    if (s.sources.empty()) last = std::move(s.server);
  }
  // Stopped outside the lock: the server's thread may be waiting for it.
}

}  // namespace tessera
