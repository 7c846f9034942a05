// The recording stand-in of the transport seam (transport/transport.h): a Transport
// whose Links move no data, and a LocalMemory (collectives/collective.h) that copies
// nothing and hands out memory no one may touch. A real algorithm run by one rank on
// them, through the real Exchange engine (transport/exchange.cc), leaves that rank's
// schedule (schedule.h) in the ScheduleRecorder: its messages, their sizes and peers,
// the local copies, and what each send waits for.
//
// How a gate is seen. The engine lets a gated send move only what its gate receive has
// made final: before each ProgressSend it asks the gate's link for ready_bytes(), unless
// the gate is done (all of it is there) or not yet begun (nothing is). The recorder
// notes which link was asked, so a send that cannot move names its gate. For every send
// to be seen stuck on its gate, receives complete only when nothing else can move: when
// the engine is about to sleep (it calls AddWaits), the recorder completes the receives
// that stuck sends wait for, or, if none, every receive begun (the exchange could not
// end otherwise), and the engine goes on without sleeping. Sends complete as soon as
// all their bytes are available. Where a send's data starts inside its gate's bytes
// (Transfer::gate_offset) comes from their addresses: the send's data less the
// receive's destination; a send whose data is not inside its gate's fails the
// recording. The schedules of the algorithms in collectives/ are
// checked against their data flow by simulator:recorder_test.
//
// Exchange boundaries: the engine calls SetCall on a link before it begins the link's
// messages (transport.h); a SetCall after the engine has progressed anything starts a
// new exchange. A step of the schedule is therefore one Exchange call.
#ifndef TESSERA_SIMULATOR_RECORDING_TRANSPORT_H_
#define TESSERA_SIMULATOR_RECORDING_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/collective.h"
#include "simulator/schedule.h"
#include "transport/transport.h"

namespace tessera {

// Reserved address space for the buffers of recorded calls: PROT_NONE, so a byte read or
// written by mistake faults instead of passing silently, and never backed by memory.
class ReservedArena {
 public:
  ReservedArena() = default;
  ~ReservedArena();
  ReservedArena(const ReservedArena&) = delete;
  ReservedArena& operator=(const ReservedArena&) = delete;

  Status Reserve(size_t bytes);
  // `bytes` of the reserved space, 64-byte aligned; InvalidUsage when the space is used
  // up.
  Status Take(size_t bytes, char** out);
  size_t reserved() const { return size_; }
  size_t used() const { return used_; }
  void Rewind(size_t used) { used_ = used; }  // forget what was taken after `used`

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
};

// One rank's recording: what the links and the memory of that rank tell it. Single
// threaded, as a rank's algorithm is.
class ScheduleRecorder : public LocalMemory {
 public:
  ScheduleRecorder(ReservedArena* arena, bool keep_addresses) : arena_(arena), keep_addresses_(keep_addresses) {}

  // LocalMemory: copies are recorded as steps; memory comes from the arena.
  Status Copy(void* dst, const void* src, size_t bytes) override;
  Status Allocate(size_t bytes, std::shared_ptr<void>* out) override;

  // What the links report (recording_transport.cc).
  void OnSetCall();
  Status OnBegin(int peer, bool is_send, const void* data, size_t len, bool reduces, int* index);
  void OnReadyQuery(int receive) { queried_ = receive; }
  int TakeQuery();
  void OnSendProgress(int send, size_t available, int queried, bool* progressed, bool* done);
  void OnRecvProgress(int receive, bool* progressed, bool* done);
  void OnStall();
  uint32_t Length(int index) const { return schedule_.messages[exchange_first_ + index].bytes; }

  // The schedule so far; a failure seen by a link (a send gated on two receives).
  Status Finish(RankSchedule* out);

 private:
  void CloseExchange();
  void NoteGate(int send, int receive);

  ReservedArena* arena_;
  bool keep_addresses_;
  RankSchedule schedule_;
  bool open_ = false;         // an exchange step is being recorded
  bool progressed_ = false;   // the engine progressed something in it
  uint32_t exchange_first_ = 0;
  int queried_ = -1;          // receive whose ready_bytes was asked since the last Progress call
  std::vector<uint8_t> done_;        // by message of the open exchange
  std::vector<uintptr_t> data_;      // by message of the open exchange: what it reads or writes
  std::vector<int> waited_for_;      // receives that stuck sends named since the last stall
  std::vector<int> begun_receives_;  // receives begun and not done
  bool stall_handled_ = false;
  Status failure_;
};

// Reaches every peer with a RecordingLink reporting to `recorder`.
class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(ScheduleRecorder* recorder) : recorder_(recorder) {}
  const char* name() const override { return "recording"; }
  bool CanConnect(int peer) const override { return peer >= 0; }
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;

 private:
  ScheduleRecorder* recorder_;
};

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_RECORDING_TRANSPORT_H_
