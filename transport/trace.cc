#include "transport/trace.h"

#include <cerrno>
#include <cstdio>

namespace tessera {

void Tracer::CallBegan(const CallRecord& call, int64_t) {
  label_ = std::string(call.what) + "#" + std::to_string(++calls_) + (call.on_device ? " (device)" : "");
}

void Tracer::AlgorithmChosen(OpKind collective, const char* label) {
  label_ = std::string(OpName(collective)) + "#" + std::to_string(calls_) + " (" + label + ")";
}

void Tracer::Add(bool is_send, int peer, const char* link_kind, size_t bytes, int64_t start_us, int64_t end_us) {
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{label_, is_send, peer, link_kind, bytes, start_us, end_us});
}

Status Tracer::WriteChromeTrace(const std::string& path, int rank) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return ErrnoError("TESSERA_TRACE_DIR: cannot write " + path, errno);
  std::fprintf(f, "{\"traceEvents\": [\n");
  std::fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", rank,
               rank);
  for (const Event& e : events_) {
    // One row (tid) per peer and direction, so concurrent messages do not overlap.
    std::fprintf(f,
                 ",\n{\"name\": \"%s %s %d\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %lld, \"dur\": %lld, "
                 "\"pid\": %d, \"tid\": %d, \"args\": {\"op\": \"%s\", \"peer\": %d, \"bytes\": %zu, \"link\": \"%s\"}}",
                 e.label.c_str(), e.is_send ? "send to" : "recv from", e.peer, e.is_send ? "send" : "recv",
                 static_cast<long long>(e.start_us), static_cast<long long>(e.end_us - e.start_us), rank,
                 e.peer * 2 + (e.is_send ? 0 : 1), e.label.c_str(), e.peer, e.bytes, e.link_kind);
  }
  std::fprintf(f, "\n], \"otherData\": {\"dropped_events\": %zu}}\n", dropped_);
  if (std::fclose(f) != 0) return ErrnoError("TESSERA_TRACE_DIR: writing " + path, errno);
  return Status::Ok();
}

}  // namespace tessera
