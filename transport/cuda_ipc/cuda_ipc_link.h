// CudaIpcLink: one peer's Link of the CUDA IPC transport (cuda_ipc_transport.h has the
// protocol). Exposed for the transport and its tests; algorithms never see it.
#ifndef TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_LINK_H_
#define TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_LINK_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "device/device_engine.h"
#include "transport/transport.h"

namespace tessera {

// One slot-state message on the control link (32 bytes on the wire).
struct SlotMessage {
  static constexpr uint32_t kFull = 1;  // sender -> receiver: piece `index` is in its slot
  static constexpr uint32_t kFree = 2;  // receiver -> sender: piece `index` has been consumed
  uint32_t kind = 0;
  uint32_t reserved = 0;
  uint64_t index = 0;          // piece number on this directed pair; its slot is index % slots
  uint64_t message_bytes = 0;  // kFull: the length of the message the piece belongs to
  uint64_t offset = 0;         // kFull: the piece's offset in that message
};
static_assert(sizeof(SlotMessage) == 32, "SlotMessage is 32 bytes on the wire");

// How many slot-state messages can be in a control ring at once: FULLs of one direction
// and FREEs of the other, each bounded by the slot count.
inline int64_t ControlRingSlots(int64_t slots) { return 2 * slots; }

class CudaIpcLink : public Link {
 public:
  struct Parts {
    std::unique_ptr<Link> control;         // the pair's shared-memory link, connected
    std::unique_ptr<DeviceStream> send_stream, recv_stream;
    std::unique_ptr<ExportedMemory> inbound;  // our slots, the peer writes them
    std::unique_ptr<MappedMemory> outbound;   // the peer's slots, mapped
    size_t slot_bytes = 0;
    size_t slots = 0;
    int busy_fd = -1;  // always readable (owned by the transport)
  };
  CudaIpcLink(int peer, Parts parts);
  // Waits (briefly, bounded) for device work still in flight before unmapping.
  ~CudaIpcLink() override;

  const char* kind() const override { return "cuda_ipc"; }
  void BeginSend(const void* data, size_t len) override;
  void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) override;
  Status ProgressSend(size_t available, bool* progressed, bool* done) override;
  Status ProgressRecv(bool* progressed, bool* done) override;
  void AddWaits(WaitSet* set, bool sending, bool receiving) override;
  void Flush() override { parts_.control->Flush(); }  // Pump drives the control link
  Status CheckPeer() override { return parts_.control->CheckPeer(); }
  size_t sent_bytes() const override { return send_published_; }
  size_t received_bytes() const override { return recv_launched_; }
  size_t ready_bytes() const override { return recv_ready_; }

  // Slot accounting, for tests: pieces copied and not yet freed by the peer, and pieces
  // announced by the peer and not yet consumed here.
  uint64_t slots_in_use_by_sends() const { return send_next_ - send_freed_; }
  size_t pieces_waiting() const { return fulls_.size(); }

 private:
  struct InFlight {
    uint64_t index;
    uint64_t ticket;
    size_t offset;
    size_t bytes;
  };
  Status Pump(bool* progressed);           // control messages in and out
  Status Dispatch(const SlotMessage& m);   // one that arrived
  Status Fail(const Status& s) const;      // names the peer and the transport

  Parts parts_;
  // Control path.
  SlotMessage in_msg_, out_msg_;
  bool control_receiving_ = false, control_sending_ = false;
  std::deque<SlotMessage> outgoing_;
  // Sending.
  const char* send_data_ = nullptr;
  size_t send_len_ = 0, send_copied_ = 0, send_published_ = 0;
  uint64_t send_next_ = 0, send_freed_ = 0;
  std::deque<InFlight> send_flight_;
  // Receiving.
  std::deque<SlotMessage> fulls_;
  uint64_t fulls_seen_ = 0, recv_next_ = 0;
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  size_t recv_len_ = 0, recv_launched_ = 0, recv_ready_ = 0;
  std::deque<InFlight> recv_flight_;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_LINK_H_
