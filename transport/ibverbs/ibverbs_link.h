// IbverbsLink: one peer over one reliable-connected (RC) queue pair. Internal to the
// ibverbs transport (ibverbs_transport.h is the interface the communicator sees).
//
// Each side owns a receive ring of `slots` slots of `slot_bytes`, registered for remote
// write, followed by a small notice area. A message is cut into pieces of at most one
// slot; piece k is written with RDMA WRITE WITH IMMEDIATE into the peer's next ring slot,
// and the 32-bit immediate says which slot, how long, and whether it is the message's
// last piece (wire_format.h). The write consumes one of the receiver's posted receive
// requests, so its arrival is a completion on the receiver's completion queue. The
// receiver copies (or reduces) the piece from the slot into the destination, frees the
// slot, and returns it to the sender as a credit: a zero-byte SEND WITH IMMEDIATE
// naming the freed slots. The sender never writes a slot that has not been returned
// (CreditWindow), so the ring cannot overflow.
//
// The sender writes from the user's buffer directly when that range is registered (the
// registration cache: a buffer registered explicitly, or any buffer with
// register_user_buffers), otherwise it first copies the piece into its own registered
// staging slot. A gated send (available < length) sends pieces of at least 64 KiB,
// ending on 64-byte boundaries, so every piece holds whole elements of any type.
//
// Completions of sends and receives share one completion queue with a completion
// channel; AddWaits arms the queue and gives the channel's file descriptor to the
// engine, so a waiting rank sleeps in poll() instead of spinning. Any failed completion
// (the peer's queue pair in error, retries exhausted because the peer is gone, an access
// error) becomes a sticky RemoteError naming the peer. CheckPeer probes a quiet link
// with a zero-byte RDMA write, so a dead peer is found even while only receiving.
#ifndef TESSERA_TRANSPORT_IBVERBS_IBVERBS_LINK_H_
#define TESSERA_TRANSPORT_IBVERBS_IBVERBS_LINK_H_

#include <infiniband/verbs.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "transport/ibverbs/credit_window.h"
#include "transport/ibverbs/gpu_direct.h"
#include "transport/ibverbs/message_pieces.h"
#include "transport/ibverbs/queue_pair.h"
#include "transport/ibverbs/registration_cache.h"
#include "transport/ibverbs/verbs_device.h"
#include "transport/ibverbs/verbs_registrar.h"
#include "transport/ibverbs/wire_format.h"
#include "device/device_engine.h"
#include "transport/transport.h"

namespace tessera {
namespace ibverbs {

class IbverbsLink;

// What a transport and its links share: the device, the registration cache, the links
// alive now (for failure notices) and the notices peers sent. Held by shared_ptr so it
// outlives whichever of the transport and its links goes last.
struct SharedState {
  std::shared_ptr<VerbsDevice> device;
  std::unique_ptr<CudaDriver> cuda;  // null: host memory only
  std::unique_ptr<VerbsRegistrar> registrar;
  std::unique_ptr<RegistrationCache> cache;
  std::vector<IbverbsLink*> links;  // each link adds and removes itself
  std::deque<Status> notices;       // peers' failure notices not yet reported
};

// Filled from IbverbsTransport::Options; the defaults are the settings table's.
struct LinkConfig {
  uint32_t slots = SettingDefaults::ib_slots;            // a power of two, <= kMaxSlots
  uint32_t slot_bytes = SettingDefaults::ib_slot_bytes;  // kMinSlotBytes ... kMaxSlotBytes, a multiple of 64
  QueuePairTuning tuning;
  bool register_user_buffers = false;
  // GPUDirect mode (see above): device memory and kernels from this engine, which must
  // outlive the link. Needs SharedState::cuda. Null: host memory.
  DeviceEngine* engine = nullptr;
};

class IbverbsLink : public Link {
 public:
  // Creates the completion queue and channel, the queue pair (in INIT), the registered
  // ring and staging memory, and posts the receives. Not connected yet.
  static Status Create(std::shared_ptr<SharedState> shared, int my_rank, int peer, const LinkConfig& config,
                       std::unique_ptr<IbverbsLink>* out);
  ~IbverbsLink() override;

  // What the peer needs to connect to this side.
  ConnectionInfo LocalInfo() const;
  // Checks the peer's data against this side (who it is from, the same ring geometry)
  // and moves the queue pair through RTR to RTS.
  Status ConnectTo(const ConnectionInfo& remote);

  const char* kind() const override { return config_.engine != nullptr ? "ibverbs gpudirect" : "ibverbs"; }
  void BeginSend(const void* data, size_t len) override;
  void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) override;
  Status ProgressSend(size_t available, bool* progressed, bool* done) override;
  Status ProgressRecv(bool* progressed, bool* done) override;
  void AddWaits(WaitSet* set, bool sending, bool receiving) override;
  Status CheckPeer() override;
  size_t sent_bytes() const override { return send_posted_; }
  size_t received_bytes() const override { return recv_moved_; }
  size_t ready_bytes() const override { return recv_ready_; }

  // For the transport. Reaps completions (files arrivals, credits, notices); returns the
  // link's sticky error if it has one.
  Status Poll();
  // Arms the completion queue and adds its channel to `set`.
  void AddChannelWait(WaitSet* set);
  // Best effort: writes `failure` into the peer's notice area. Returns false when the
  // link is already broken or not connected.
  bool PostNotice(const Status& failure);
  bool notice_done() const { return notice_state_ != NoticeState::kPosted; }

 private:
  struct Piece {
    uint32_t slot;
    uint32_t length;
    bool last;
  };
  enum class NoticeState { kNone, kPosted, kDone };
  // GPUDirect mode: device work launched and not yet known to be finished.
  struct StagedPiece {  // a send piece being copied into its staging slot
    uint64_t ticket;
    uint32_t slot;
    uint32_t length;
    bool last;
  };
  struct LaunchedPiece {  // a received piece being copied or reduced out of its slot
    uint64_t ticket;
    uint32_t length;
  };

  IbverbsLink(std::shared_ptr<SharedState> shared, int my_rank, int peer, const LinkConfig& config);
  Status Init();
  Status InitHostMemory();
  Status InitDeviceMemory();
  bool on_device() const { return config_.engine != nullptr; }
  // Posts the RDMA write of one piece from `local` into the peer's `slot`, and counts it
  // as posted (send_posted_, the write counters).
  Status PostPiece(uint64_t local, uint32_t lkey, uint32_t slot, uint32_t length, bool last);
  // GPUDirect mode: posts the writes of staged pieces whose copies have finished, and
  // retires received pieces whose kernels have finished (each frees a slot).
  Status PostStagedPieces(bool* progressed);
  Status RetireLaunchedPieces(bool* progressed);
  Status HandleCompletion(const ibv_wc& wc);
  Status HandleArrival(const ibv_wc& wc);
  Status PostReceive();
  Status PostWrite(uint64_t wr_kind, uint32_t imm, uint64_t local_addr, uint32_t lkey, uint32_t length,
                   uint64_t remote_addr, bool with_imm);
  Status ReturnCredits();
  void DrainChannel();
  void ReleaseSendRegion();
  Status Fail(const Status& s);
  std::string Who() const { return "rank " + std::to_string(peer()); }

  const std::shared_ptr<SharedState> shared_;
  const int my_rank_;
  const LinkConfig config_;
  const uint32_t send_depth_, recv_depth_;

  // Verbs resources, released in reverse order by the destructor.
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  char* ring_ = nullptr;     // slots: peers write here
  char* staging_ = nullptr;  // slots: we write from here
  size_t ring_bytes_ = 0;
  ibv_mr* ring_mr_ = nullptr;
  ibv_mr* staging_mr_ = nullptr;
  // The notice areas (host memory): the peer writes its notice into notice_in_, ours
  // leaves from notice_out_. In host mode they follow the ring's and staging's slots
  // (same registrations); in GPUDirect mode they share notice_mr_.
  char* notice_in_ = nullptr;
  char* notice_out_ = nullptr;
  uint32_t notice_in_rkey_ = 0, notice_out_lkey_ = 0;
  char* notice_host_ = nullptr;  // GPUDirect mode: both areas
  ibv_mr* notice_mr_ = nullptr;
  // GPUDirect mode: the device memory behind ring_ and staging_, the streams, and an
  // always-readable descriptor for AddWaits while device work is in flight.
  std::shared_ptr<void> device_ring_, device_staging_;
  std::unique_ptr<DeviceStream> send_stream_, recv_stream_;
  int busy_fd_ = -1;
  uint32_t psn_ = 0;
  unsigned unacked_events_ = 0;

  bool connected_ = false;
  ConnectionInfo remote_;
  Status error_;  // sticky

  // Sending.
  CreditWindow window_;
  const char* send_data_ = nullptr;
  size_t send_len_ = 0, send_posted_ = 0;
  size_t send_taken_ = 0;  // bytes posted, or (GPUDirect mode) being staged
  std::deque<StagedPiece> send_staged_;
  const MemoryRegion* send_region_ = nullptr;  // pinned: zero-copy source
  Status send_error_;                          // found by BeginSend, reported by ProgressSend
  uint64_t data_writes_posted_ = 0, data_writes_completed_ = 0;
  uint64_t message_last_write_ = 0;    // data_writes_posted_ after the message's last piece
  uint32_t send_wrs_outstanding_ = 0;  // every send work request is signaled
  bool probe_outstanding_ = false;
  NoticeState notice_state_ = NoticeState::kNone;

  // Receiving.
  std::deque<Piece> arrived_;      // pieces in the ring, in order, not yet consumed
  uint32_t arrival_sequence_ = 0;  // sequence number of the next piece to arrive
  uint32_t credit_first_ = 0;      // first freed slot not yet returned
  uint32_t credit_count_ = 0;      // how many freed slots follow it
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  size_t recv_len_ = 0, recv_moved_ = 0;
  size_t recv_ready_ = 0;  // bytes in dst; in GPUDirect mode behind recv_moved_ until kernels finish
  std::deque<LaunchedPiece> recv_launched_;
  Status recv_error_;  // found by BeginRecv, reported by ProgressRecv
};

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_IBVERBS_LINK_H_
