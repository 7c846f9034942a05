// Tracer: a per-rank record of every message of every exchange (which operation, send
// or receive, peer, bytes, start, end), written as a Chrome trace (chrome://tracing,
// Perfetto) when TESSERA_TRACE_DIR is set, so step counts and overlap can be seen.
#ifndef TESSERA_TRANSPORT_TRACE_H_
#define TESSERA_TRANSPORT_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

class Tracer {
 public:
  // Events beyond this many are counted, not kept (a long run cannot exhaust memory).
  static constexpr size_t kMaxEvents = 1 << 20;

  // The operation the next exchanges belong to, e.g. "allreduce#12 (torus)".
  void BeginOperation(const std::string& label) { label_ = label; }
  void Add(bool is_send, int peer, const char* link_kind, size_t bytes, int64_t start_us, int64_t end_us);

  // Writes {"traceEvents": [...]} with one complete event ("ph":"X") per message.
  Status WriteChromeTrace(const std::string& path, int rank) const;
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    std::string label;
    bool is_send;
    int peer;
    const char* link_kind;
    size_t bytes;
    int64_t start_us, end_us;
  };
  std::string label_;
  std::vector<Event> events_;
  size_t dropped_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_TRACE_H_
