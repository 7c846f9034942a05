// FlightRecorder: a communicator's last N operations, kept so that when a job goes wrong
// every rank can say where it was (as NCCL's RAS and PyTorch's flight recorder do). Each
// entry is one collective, or one group's sends and receives: its sequence number on
// this communicator, what it was, its bytes, the algorithm, when it started and ended
// (wall clock, microseconds since the epoch, comparable across ranks on synchronised
// hosts) and how it ended. When the communicator breaks, the ring is written as JSON
// (TESSERA_FLIGHT_RECORDER_DIR); tools/flight_report.py reads every rank's file. It
// also keeps the last kStragglerNotes changes of the straggler verdict
// (docs/diagnosis.md#stragglers), with their wall-clock times.
//
// Thread-safety: one thread at a time writes (the CallObserver methods: the thread that
// runs the operations, under the communicator's run lock), without a lock: each entry
// is a seqlock (base/seqlock.h). Entries, ToJson and Dump may come from any thread at
// any time (the watch service's, tesseraCommDumpFlightRecord's). SetCapacity only
// before the first Begin and before any reader exists.
#ifndef TESSERA_COMM_FLIGHT_RECORDER_H_
#define TESSERA_COMM_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/call_observer.h"
#include "base/deadline.h"
#include "base/seqlock.h"
#include "base/status.h"

namespace tessera {

struct FlightEntry {
  enum class State { kRunning, kDone, kFailed };
  uint64_t seq = 0;               // the collective's sequence number (CallStamp); 0 for sends/receives
  const char* what = "";          // "allreduce", ..., "send/recv"
  uint64_t bytes = 0;             // this rank's input bytes (a group: its sends' total)
  const char* algorithm = "";     // the table row's label, "" where none was chosen
  int64_t start_us = 0;
  int64_t end_us = 0;             // 0 while running
  State state = State::kRunning;
};

// Who wrote a dump: the communicator and this rank.
struct FlightIdentity {
  uint64_t comm_id = 0;  // the same on every rank of the communicator
  int rank = 0;
  int nranks = 1;
  int pid = 0;
  std::string host;
};

class FlightRecorder : public CallObserver {
 public:
  // `capacity` 0: records nothing.
  explicit FlightRecorder(size_t capacity) { SetCapacity(capacity); }
  void SetCapacity(size_t capacity);  // empties the ring
  size_t capacity() const { return capacity_; }

  // CallObserver: a new entry, running from `now_us` (the monotonic clock; the entries
  // hold wall-clock times), its algorithm, its end (done, or failed).
  void CallBegan(const CallRecord& call, int64_t now_us) override;
  void AlgorithmChosen(OpKind collective, const char* label) override;
  void CallEnded(CallOutcome outcome, int64_t now_us) override;

  // The entries, oldest first.
  std::vector<FlightEntry> Entries() const;
  // The straggler verdict changed to `text` ("" when no straggler is named any more).
  // Thread-safe.
  static constexpr size_t kStragglerNotes = 16;
  void NoteStraggler(const std::string& text);
  // {"comm_id", "rank", "nranks", "pid", "host", "reason", "dumped_us", "entries": [...],
  //  "stragglers": [{"wall_us", "verdict"}, ...]}
  std::string ToJson(const FlightIdentity& who, const std::string& reason) const;
  // Writes ToJson to <dir>/tessera-flight-<comm_id as 16 hex digits>-rank<r>.json;
  // *path names the file. SystemError naming the path when it cannot be written.
  Status Dump(const std::string& dir, const FlightIdentity& who, const std::string& reason,
              std::string* path) const;

 private:
  // One entry of the ring, and which entry it is (entries are numbered from 0).
  struct Slot {
    SeqLock lock;
    SeqField<uint64_t> index, seq, bytes;
    SeqField<const char*> what, algorithm;
    SeqField<int64_t> start_us, end_us;
    SeqField<int> state;
  };
  // The slot of the latest entry, or null (none yet, or capacity 0).
  Slot* Current() { return current_; }
  // The wall-clock time of a NowMicros() reading: one wall-clock read a second, not two
  // per call. Inline: twice a call, and it is a compare and an add.
  int64_t WallFrom(int64_t now_us) {
    if (offset_taken_us_ < 0 || now_us - offset_taken_us_ >= 1000000) TakeWallOffset(now_us);
    return now_us + wall_minus_now_us_;
  }
  void TakeWallOffset(int64_t now_us);

  std::unique_ptr<Slot[]> ring_;
  size_t capacity_ = 0;
  std::atomic<uint64_t> recorded_{0};  // entries ever begun
  // The writer's place: the latest entry's slot and the next one's index in ring_ (no
  // division by the capacity per call).
  Slot* current_ = nullptr;
  size_t next_slot_ = 0;
  mutable std::mutex dump_mu_;         // one Dump at a time
  mutable std::mutex notes_mu_;
  std::vector<std::pair<int64_t, std::string>> straggler_notes_;  // (wall_us, text), oldest first
  int64_t wall_minus_now_us_ = 0;      // WallFrom's offset, taken at offset_taken_us_
  int64_t offset_taken_us_ = -1;
};

const char* FlightStateName(FlightEntry::State state);  // "running", "done", "failed"

}  // namespace tessera

#endif  // TESSERA_COMM_FLIGHT_RECORDER_H_
