#include "comm/flight_recorder.h"

#include <sys/time.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace tessera {
namespace {

int64_t WallMicros() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec;
}

// `text` as a JSON string literal.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string EntryJson(const FlightEntry& e) {
  return "{\"seq\": " + std::to_string(e.seq) + ", \"op\": " + Quoted(e.what) + ", \"bytes\": " +
         std::to_string(e.bytes) + ", \"algorithm\": " + Quoted(e.algorithm) + ", \"start_us\": " +
         std::to_string(e.start_us) + ", \"end_us\": " + std::to_string(e.end_us) + ", \"state\": " +
         Quoted(FlightStateName(e.state)) + "}";
}

}  // namespace

const char* FlightStateName(FlightEntry::State state) {
  switch (state) {
    case FlightEntry::State::kRunning: return "running";
    case FlightEntry::State::kDone: return "done";
    case FlightEntry::State::kFailed: return "failed";
  }
  return "unknown";
}

FlightEntry* FlightRecorder::Current() {
  if (ring_.empty() || next_seq_ == 1) return nullptr;
  return &ring_[(next_seq_ - 2) % ring_.size()];
}

uint64_t FlightRecorder::Begin(const char* what, uint64_t bytes) {
  const uint64_t seq = next_seq_++;
  if (ring_.empty()) return seq;
  FlightEntry& e = ring_[(seq - 1) % ring_.size()];
  e = FlightEntry();
  e.seq = seq;
  e.what = what;
  e.bytes = bytes;
  e.start_us = WallMicros();
  return seq;
}

void FlightRecorder::SetAlgorithm(const char* label) {
  if (FlightEntry* e = Current()) e->algorithm = label;
}

void FlightRecorder::End(bool ok) {
  FlightEntry* e = Current();
  if (e == nullptr || e->state != FlightEntry::State::kRunning) return;
  e->end_us = WallMicros();
  e->state = ok ? FlightEntry::State::kDone : FlightEntry::State::kFailed;
}

std::vector<FlightEntry> FlightRecorder::Entries() const {
  std::vector<FlightEntry> out;
  const uint64_t recorded = next_seq_ - 1;
  const uint64_t first = recorded > ring_.size() ? recorded - ring_.size() + 1 : 1;
  for (uint64_t seq = first; seq <= recorded && !ring_.empty(); ++seq) out.push_back(ring_[(seq - 1) % ring_.size()]);
  return out;
}

std::string FlightRecorder::ToJson(const FlightIdentity& who, const std::string& reason) const {
  char id[17];
  std::snprintf(id, sizeof(id), "%016" PRIx64, who.comm_id);
  std::string out = "{\"comm_id\": \"" + std::string(id) + "\", \"rank\": " + std::to_string(who.rank) +
                    ", \"nranks\": " + std::to_string(who.nranks) + ", \"pid\": " + std::to_string(who.pid) +
                    ", \"host\": " + Quoted(who.host) + ", \"reason\": " + Quoted(reason) +
                    ", \"dumped_us\": " + std::to_string(WallMicros()) + ",\n \"entries\": [";
  const std::vector<FlightEntry> entries = Entries();
  for (size_t i = 0; i < entries.size(); ++i) out += std::string(i ? ",\n  " : "\n  ") + EntryJson(entries[i]);
  return out + "\n]}\n";
}

Status FlightRecorder::Dump(const std::string& dir, const FlightIdentity& who, const std::string& reason,
                            std::string* path) const {
  char name[80];
  std::snprintf(name, sizeof(name), "/tessera-flight-%016" PRIx64 "-rank%d.json", who.comm_id, who.rank);
  *path = dir + name;
  std::ofstream out(*path, std::ios::trunc);
  out << ToJson(who, reason);
  out.close();
  if (!out) return SystemError("cannot write the flight record " + *path);
  return Status::Ok();
}

}  // namespace tessera
