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

void FlightRecorder::SetCapacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.assign(capacity, FlightEntry());
  recorded_ = 0;
}

FlightEntry* FlightRecorder::Current() {
  if (ring_.empty() || recorded_ == 0) return nullptr;
  return &ring_[(recorded_ - 1) % ring_.size()];
}

int64_t FlightRecorder::WallFrom(int64_t now_us) {
  if (offset_taken_us_ < 0 || now_us - offset_taken_us_ >= 1000000) {
    wall_minus_now_us_ = WallMicros() - NowMicros();
    offset_taken_us_ = now_us;
  }
  return now_us + wall_minus_now_us_;
}

void FlightRecorder::Begin(const char* what, uint64_t bytes, uint64_t seq, int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.empty()) return;
  FlightEntry& e = ring_[recorded_++ % ring_.size()];
  e = FlightEntry();
  e.seq = seq;
  e.what = what;
  e.bytes = bytes;
  e.start_us = WallFrom(now_us);
}

void FlightRecorder::SetAlgorithm(const char* label) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = Current()) e->algorithm = label;
}

void FlightRecorder::End(bool ok, int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  FlightEntry* e = Current();
  if (e == nullptr || e->state != FlightEntry::State::kRunning) return;
  e->end_us = WallFrom(now_us);
  e->state = ok ? FlightEntry::State::kDone : FlightEntry::State::kFailed;
}

std::vector<FlightEntry> FlightRecorder::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return EntriesLocked();
}

std::vector<FlightEntry> FlightRecorder::EntriesLocked() const {
  std::vector<FlightEntry> out;
  const uint64_t first = recorded_ > ring_.size() ? recorded_ - ring_.size() : 0;
  for (uint64_t i = first; i < recorded_; ++i) out.push_back(ring_[i % ring_.size()]);
  return out;
}

std::string FlightRecorder::ToJson(const FlightIdentity& who, const std::string& reason) const {
  char id[17];
  std::snprintf(id, sizeof(id), "%016" PRIx64, who.comm_id);
  std::string out = "{\"comm_id\": \"" + std::string(id) + "\", \"rank\": " + std::to_string(who.rank) +
                    ", \"nranks\": " + std::to_string(who.nranks) + ", \"pid\": " + std::to_string(who.pid) +
                    ", \"host\": " + Quoted(who.host) + ", \"reason\": " + Quoted(reason) +
                    ", \"dumped_us\": " + std::to_string(WallMicros()) + ",\n \"entries\": [";
  const std::vector<FlightEntry> entries = Entries();  // locks
  for (size_t i = 0; i < entries.size(); ++i) out += std::string(i ? ",\n  " : "\n  ") + EntryJson(entries[i]);
  return out + "\n]}\n";
}

Status FlightRecorder::Dump(const std::string& dir, const FlightIdentity& who, const std::string& reason,
                            std::string* path) const {
  char name[80];
  std::snprintf(name, sizeof(name), "/tessera-flight-%016" PRIx64 "-rank%d.json", who.comm_id, who.rank);
  *path = dir + name;
  // The failing thread and the watch service (a peer's diagnosis asking) may dump at
  // once: one at a time, each whole file renamed into place, so a reader never sees
  // two writes interleaved and the last dump is the latest state.
  std::lock_guard<std::mutex> lock(dump_mu_);
  const std::string part = *path + ".part";
  std::ofstream out(part, std::ios::trunc);
  out << ToJson(who, reason);
  out.close();
  if (!out || std::rename(part.c_str(), path->c_str()) != 0) {
    std::remove(part.c_str());
    return SystemError("cannot write the flight record " + *path);
  }
  return Status::Ok();
}

}  // namespace tessera
