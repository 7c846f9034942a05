// Tracer: a per-rank record of every message of every exchange (which operation, send
// or receive, peer, bytes, start, end), written as a Chrome trace (chrome://tracing,
// Perfetto) when TESSERA_TRACE_DIR is set, so step counts and overlap can be seen.
#ifndef TESSERA_TRANSPORT_TRACE_H_
#define TESSERA_TRANSPORT_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/call_observer.h"
#include "base/status.h"

namespace tessera {

class Tracer : public CallObserver {
 public:
  // Events beyond this many are counted, not kept (a long run cannot exhaust memory).
  static constexpr size_t kMaxEvents = 1 << 20;

  // CallObserver: the operation the next exchanges belong to, numbered from 1:
  // "allreduce#12", "allreduce#12 (device)", then with its algorithm "allreduce#12
  // (torus)"; "send/recv#13".
  void CallBegan(const CallRecord& call, int64_t now_us) override;
  void AlgorithmChosen(OpKind collective, const char* label) override;
  void CallEnded(CallOutcome, int64_t) override {}
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
  uint64_t calls_ = 0;  // calls begun
  std::string label_;
  std::vector<Event> events_;
  size_t dropped_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_TRACE_H_
