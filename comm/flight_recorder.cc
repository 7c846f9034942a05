#include "comm/flight_recorder.h"

#include <sys/time.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "base/json.h"

namespace tessera {
namespace {

int64_t WallMicros() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec;
}

std::string EntryJson(const FlightEntry& e) {
  return "{\"seq\": " + std::to_string(e.seq) + ", \"op\": " + JsonString(e.what) + ", \"bytes\": " +
         std::to_string(e.bytes) + ", \"algorithm\": " + JsonString(e.algorithm) + ", \"start_us\": " +
         std::to_string(e.start_us) + ", \"end_us\": " + std::to_string(e.end_us) + ", \"state\": " +
         JsonString(FlightStateName(e.state)) + "}";
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
  ring_.reset(capacity > 0 ? new Slot[capacity] : nullptr);
  capacity_ = capacity;
  current_ = nullptr;
  next_slot_ = 0;
  recorded_.store(0, std::memory_order_release);
}

void FlightRecorder::TakeWallOffset(int64_t now_us) {
  wall_minus_now_us_ = WallMicros() - NowMicros();
  offset_taken_us_ = now_us;
}

void FlightRecorder::CallBegan(const CallRecord& call, int64_t now_us) {
  if (capacity_ == 0) return;
  const uint64_t n = recorded_.load(std::memory_order_relaxed);
  Slot& e = ring_[next_slot_];
  current_ = &e;
  next_slot_ = next_slot_ + 1 == capacity_ ? 0 : next_slot_ + 1;
  e.lock.BeginWrite();
  e.index.set(n);
  e.seq.set(call.stamp.seq);
  e.what.set(call.what);
  e.bytes.set(call.bytes);
  e.algorithm.set("");
  e.start_us.set(WallFrom(now_us));
  e.end_us.set(0);
  e.state.set(static_cast<int>(FlightEntry::State::kRunning));
  e.lock.EndWrite();
  recorded_.store(n + 1, std::memory_order_release);
}

void FlightRecorder::AlgorithmChosen(OpKind, const char* label) {
  Slot* e = Current();
  if (e == nullptr) return;
  e->lock.BeginWrite();
  e->algorithm.set(label);
  e->lock.EndWrite();
}

void FlightRecorder::CallEnded(CallOutcome outcome, int64_t now_us) {
  Slot* e = Current();
  if (e == nullptr || e->state.get() != static_cast<int>(FlightEntry::State::kRunning)) return;
  e->lock.BeginWrite();
  e->end_us.set(WallFrom(now_us));
  const bool ok = outcome == CallOutcome::kDone;
  e->state.set(static_cast<int>(ok ? FlightEntry::State::kDone : FlightEntry::State::kFailed));
  e->lock.EndWrite();
}

std::vector<FlightEntry> FlightRecorder::Entries() const {
  std::vector<FlightEntry> out;
  const uint64_t n = recorded_.load(std::memory_order_acquire);
  const uint64_t first = n > capacity_ ? n - capacity_ : 0;
  for (uint64_t i = first; i < n; ++i) {
    const Slot& slot = ring_[i % capacity_];
    FlightEntry e;
    uint64_t index = 0;
    slot.lock.Read([&] {
      index = slot.index.get();
      e.seq = slot.seq.get();
      e.what = slot.what.get();
      e.bytes = slot.bytes.get();
      e.algorithm = slot.algorithm.get();
      e.start_us = slot.start_us.get();
      e.end_us = slot.end_us.get();
      e.state = static_cast<FlightEntry::State>(slot.state.get());
    });
    if (index == i) out.push_back(e);  // else a later entry took the slot meanwhile
  }
  return out;
}

std::string FlightRecorder::ToJson(const FlightIdentity& who, const std::string& reason) const {
  char id[17];
  std::snprintf(id, sizeof(id), "%016" PRIx64, who.comm_id);
  std::string out = "{\"comm_id\": \"" + std::string(id) + "\", \"rank\": " + std::to_string(who.rank) +
                    ", \"nranks\": " + std::to_string(who.nranks) + ", \"pid\": " + std::to_string(who.pid) +
                    ", \"host\": " + JsonString(who.host) + ", \"reason\": " + JsonString(reason) +
                    ", \"dumped_us\": " + std::to_string(WallMicros()) + ",\n \"entries\": [";
  const std::vector<FlightEntry> entries = Entries();
  for (size_t i = 0; i < entries.size(); ++i) out += std::string(i ? ",\n  " : "\n  ") + EntryJson(entries[i]);
  out += "\n],\n \"stragglers\": [";
  std::lock_guard<std::mutex> lock(notes_mu_);
  for (size_t i = 0; i < straggler_notes_.size(); ++i) {
    out += std::string(i ? ", " : "") + "{\"wall_us\": " + std::to_string(straggler_notes_[i].first) +
           ", \"verdict\": " + JsonString(straggler_notes_[i].second) + "}";
  }
  return out + "]}\n";
}

void FlightRecorder::NoteStraggler(const std::string& text) {
  std::lock_guard<std::mutex> lock(notes_mu_);
  if (straggler_notes_.size() == kStragglerNotes) straggler_notes_.erase(straggler_notes_.begin());
  straggler_notes_.emplace_back(WallMicros(), text);
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
