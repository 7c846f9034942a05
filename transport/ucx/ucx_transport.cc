#include "transport/ucx/ucx_transport.h"

#include "transport/peer_process.h"
#include "transport/ucx/fragment_reduce.h"
#include "transport/ucx/ucx_wire.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tessera {
namespace {

// How a message of `len` bytes is cut: chunks of `chunk` bytes, the last one shorter.
// Both sides use the same chunk size, so no chunk a sender sends is larger than the
// receive posted for it, except a short last chunk (see ProgressRecv).
struct Chunking {
  size_t len = 0;
  size_t chunk = 1;
  size_t count = 0;
  size_t Begin(size_t k) const { return k * chunk; }
  size_t Length(size_t k) const { return std::min(chunk, len - k * chunk); }
  size_t End(size_t k) const { return Begin(k) + Length(k); }
};

// A message of at most one chunk (every small one) is cut without a division.
Chunking ChunkingFor(size_t len, size_t chunk) {
  return Chunking{len, chunk, len <= chunk ? static_cast<size_t>(len != 0) : (len + chunk - 1) / chunk};
}

// The tag numbers at most kUcxMaxChunks chunks per message (chunk <= 2^28: no overflow).
Status CheckLength(size_t len, size_t chunk) {
  if (len < kUcxMaxChunks * chunk) return Status::Ok();
  return InvalidArgument("a message of " + std::to_string(len) + " bytes is more than the UCX transport carries (" +
                         std::to_string(kUcxMaxChunks) + " chunks of " + std::to_string(chunk) + " bytes)");
}

std::string UcsText(ucs_status_t s) { return ucs_status_string(s); }

// Longest time to spend closing endpoints and flushing notices.
constexpr int kCloseMs = 1000;
// Longest time to spend on messages nobody received and on UCX's own clean-up.
constexpr int kDrainMs = 100;
constexpr size_t kMaxDiscardBytes = 4096;
constexpr int kNoticeSendMs = 500;
constexpr int kLocalNoticeSendMs = 50;
// Progress rounds per call: enough to drain a burst, bounded so one call stays short.
constexpr int kProgressRounds = 8;
// What a chunk costs in credits: its bytes in these units, at least one (an eager
// message a receiver holds takes at least one of UCX's 8 KiB buffers).
constexpr size_t kCreditUnitBytes = 8192;
size_t CreditUnits(size_t bytes) { return std::max<size_t>(1, (bytes + kCreditUnitBytes - 1) / kCreditUnitBytes); }
// A link's credit window: `in_flight` chunks of `chunk_bytes`, in units.
size_t CreditWindow(size_t chunk_bytes, size_t in_flight) { return in_flight * CreditUnits(chunk_bytes); }
// What a receiver takes in before it hands credits back: half the window, less when
// the window holds fewer than two chunks, so that a sender waiting for a whole chunk's
// credits always gets them.
size_t GrantAt(size_t chunk_bytes, size_t in_flight) {
  const size_t window = CreditWindow(chunk_bytes, in_flight);
  return std::max<size_t>(1, std::min(window / 2, window - CreditUnits(chunk_bytes) + 1));
}

// Whether UCX_TLS (unset: all) may enable one of `names`. "^list" excludes; take it as
// "may" (worst case UCX warns about a setting it did not use).
bool TlsMayInclude(std::initializer_list<const char*> names) {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || *tls == '\0' || *tls == '^') return true;
  std::stringstream list(tls);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item == "all" || item == "sm" || item == "shm") return true;
    for (const char* n : names) {
      if (item == n) return true;
    }
  }
  return false;
}

// Sets a UCX option unless the user chose it through the environment; true if set.
bool DefaultOption(ucp_config_t* config, const char* key, const char* value,
                   std::initializer_list<const char*> user_variables) {
  for (const char* v : user_variables) {
    if (std::getenv(v) != nullptr) return false;
  }
  ucp_config_modify(config, key, value);  // an unknown key is only warned about by UCX
  return true;
}

}  // namespace

// --- The worker --------------------------------------------------------------------

struct UcxTransport::Worker {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;  // UCX's: readable after new events, once armed
  int ready_fd = -1;  // an eventfd that is always readable: "there is more to do now"
  // UnpackReduce's datatype (eager links' reducing receives); 0 when not made.
  ucp_datatype_t reduce_dt = 0;

  ~Worker() {
    if (worker != nullptr) ucp_worker_destroy(worker);
    if (reduce_dt != 0) ucp_dt_destroy(reduce_dt);
    if (context != nullptr) ucp_cleanup(context);
    if (ready_fd >= 0) close(ready_fd);
  }

  // One turn of UCX's progress engine; true if it did anything. Over TCP a turn is an
  // epoll_wait, a system call, which costs a sizeable part of a small call: the links
  // turn it once a look, and only for what they wait on.
  bool Turn() { return ucp_worker_progress(worker) != 0; }

  // Turns UCX's progress engine until it reports nothing more (bounded); true if it did
  // anything. For the slow paths: sleeping, notices, teardown.
  bool Progress() {
    bool any = false;
    for (int i = 0; i < kProgressRounds && ucp_worker_progress(worker) != 0; ++i) any = true;
    return any;
  }

  // What to sleep on: the event fd once armed. Arming needs every pending event
  // processed first; if some remain (UCS_ERR_BUSY) the sleep must not happen at all.
  void AddWaits(WaitSet* set) {
    Progress();
    const ucs_status_t s = ucp_worker_arm(worker);
    if (s == UCS_OK) {
      set->AddFd(event_fd, POLLIN);
    } else if (s == UCS_ERR_BUSY) {
      set->AddFd(ready_fd, POLLIN);
    }
    // Any other answer: add nothing, so the engine sleeps in short slices.
  }

  // Sleeps until an event or `max_ms` (for waits outside the Exchange engine).
  void Wait(int max_ms) {
    if (Progress()) return;
    if (ucp_worker_arm(worker) != UCS_OK) return;
    pollfd p{event_fd, POLLIN, 0};
    ::poll(&p, 1, std::max(0, max_ms));
  }
};

// --- A peer's endpoint ----------------------------------------------------------------

struct UcxTransport::Peer {
  ~Peer() {
    if (pidfd >= 0) close(pidfd);
  }
  int rank = -1;
  std::string address;
  ucp_ep_h ep = nullptr;
  // Set by UCX's error handler (from progress) when the endpoint fails, or by
  // CheckProcess when the peer's process has exited.
  std::atomic<int> failure{UCS_OK};
  // Requests were left behind (an exchange failed midway): close by force.
  bool abandoned = false;
  // Something was sent on the endpoint (else there is nothing to flush at close).
  bool used = false;
  // A peer on this host: its pid and a pidfd (OpenPeerPidfd; -1 elsewhere). UCX's
  // shared-memory transports may not notice its death while a FIFO is full.
  int pid = 0;
  int pidfd = -1;
  bool exited = false;
  // Why no endpoint could be made to it (set with `failure`; empty while it can be).
  std::string unreachable;

  bool failed() const { return failure.load(std::memory_order_acquire) != UCS_OK; }
  void CheckProcess() {
    if (failed() || !PeerExited(pidfd)) return;
    exited = true;
    failure.store(UCS_ERR_CONNECTION_RESET, std::memory_order_release);
  }
  Status FailureStatus() const {
    if (!unreachable.empty()) return RemoteError(unreachable);
    if (exited) return RemoteError("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") exited");
    return RemoteError("rank " + std::to_string(rank) + " is unreachable: UCX reported \"" +
                       UcsText(static_cast<ucs_status_t>(failure.load())) +
                       "\" on its endpoint (the process exited or the network failed)");
  }
};

namespace {

void OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<UcxTransport::Peer*>(arg)->failure.store(status == UCS_OK ? UCS_ERR_IO_ERROR : status,
                                                       std::memory_order_release);
}

// A chunk being sent.
struct SendOp {
  void* request = nullptr;  // null once complete
  size_t chunk = 0;
  bool done = false;
};

// A chunk being received. UCX 1.13 reports the received length and tag reliably only
// to a completion callback (not to ucp_tag_recv_request_test after an immediate
// match), so receives use one, writing here; slots never move while in use.
struct RecvSlot {
  void* request = nullptr;
  bool probing = false;   // a short last chunk, received once seen (see ProgressRecv)
  bool complete = false;  // set by the callback
  bool handled = false;   // checked (and reduced) by the link
  ucs_status_t status = UCS_OK;
  ucp_tag_recv_info_t info{};
  FragmentReduce fused;  // a reducing receive through UnpackReduce
};

// The generic datatype of an eager link's reducing receives: UCX hands over each
// fragment of a chunk as it copies it out (transport/ucx/fragment_reduce.h).
void* StartUnpack(void*, void* buffer, size_t) { return buffer; }  // the RecvSlot
size_t PackedSize(void* state) { return static_cast<RecvSlot*>(state)->fused.length; }
void* StartPack(void*, const void*, size_t) { return nullptr; }  // never sent with
size_t Pack(void*, size_t, void*, size_t) { return 0; }
void Finish(void*) {}
ucs_status_t UnpackReduce(void* state, size_t offset, const void* src, size_t length) {
  return static_cast<RecvSlot*>(state)->fused.Fragment(offset, src, length) ? UCS_OK : UCS_ERR_MESSAGE_TRUNCATED;
}

constexpr ucp_generic_dt_ops_t kUnpackReduceOps = {StartPack, StartUnpack, PackedSize, Pack, UnpackReduce, Finish};

void OnChunkReceived(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  RecvSlot* slot = static_cast<RecvSlot*>(user_data);
  slot->status = status;
  if (info != nullptr) slot->info = *info;
  slot->complete = true;
}

class UcxLink : public Link {
 public:
  // `credited`: sends wait for credits (eager links, below).
  UcxLink(int my_rank, UcxTransport::Peer* peer, UcxTransport::Worker* worker, size_t chunk_bytes, size_t in_flight,
          bool credited)
      : Link(peer->rank), my_rank_(my_rank), peer_(peer), worker_(worker), chunk_bytes_(chunk_bytes),
        in_flight_(in_flight), credited_(credited), grant_at_(GrantAt(chunk_bytes, in_flight)),
        credits_(CreditWindow(chunk_bytes, in_flight)), recv_slots_(in_flight) {}

  ~UcxLink() override {
    AbandonSend();
    AbandonRecv();
    ReleaseStaging();
  }

  const char* kind() const override { return "ucx"; }

  void SetCall(const CallStamp& call) override {
    if (call == call_) return;  // the same call's next step: same digest
    call_ = call;
    digest_ = UcxCallDigest(call);
  }

  void BeginSend(const void* data, size_t len) override {
    AbandonSend();
    send_data_ = static_cast<const char*>(data);
    send_ = ChunkingFor(len, chunk_bytes_);
    send_next_ = send_done_ = send_bytes_ = 0;
    send_seq_now_ = send_seq_++;
    send_error_ = CheckLength(len, chunk_bytes_);
  }

  void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) override {
    AbandonRecv();
    recv_dst_ = static_cast<char*>(dst);
    recv_acc_ = static_cast<const char*>(acc);
    recv_reducer_ = reducer;
    recv_ = ChunkingFor(len, chunk_bytes_);
    recv_next_ = recv_ready_ = recv_bytes_ = 0;
    recv_seq_now_ = recv_seq_++;
    recv_error_ = CheckLength(len, chunk_bytes_);
    if (recv_error_.ok() && reducer != nullptr) recv_error_ = EnsureStaging(in_flight_ * recv_.chunk);
    if (recv_error_.ok()) PostReceives();
  }

  Status ProgressSend(size_t available, bool* progressed, bool* done) override {
    *progressed = false;
    TESSERA_RETURN_IF_ERROR(send_error_);
    // Post the chunks the window, the credits and the producer allow: whole chunks only.
    bool waiting_for_credits = false;
    while (send_ops_.size() < in_flight_ && send_next_ < send_.count && send_.End(send_next_) <= available) {
      if (peer_->ep == nullptr) return send_error_ = peer_->FailureStatus();  // unreachable
      if (credited_) {
        const size_t cost = CreditUnits(send_.Length(send_next_));
        if (credits_ < cost) TakeCredits();
        if (credits_ < cost) {
          waiting_for_credits = true;
          break;
        }
        credits_ -= cost;
      }
      const size_t k = send_next_++;
      peer_->used = true;
      ucp_request_param_t param{};
      const uint64_t tag = UcxDataTag(my_rank_, send_seq_now_, digest_, k, k + 1 == send_.count);
      void* req = ucp_tag_send_nbx(peer_->ep, send_data_ + send_.Begin(k), send_.Length(k), tag, &param);
      if (UCS_PTR_IS_ERR(req)) return send_error_ = SendFailed(UCS_PTR_STATUS(req), k);
      *progressed = true;
      if (req == nullptr) {
        ChunkSent(k);
      } else {
        send_ops_.push_back(SendOp{req, k, false});
      }
    }
    // The engine turns for what this send waits on: its requests or the peer's credits
    // (an eager send done at once waits on nothing; the link's receive turns it too).
    if ((!send_ops_.empty() || waiting_for_credits) && worker_->Turn()) *progressed = true;
    for (SendOp& op : send_ops_) {
      const ucs_status_t s = ucp_request_check_status(op.request);
      if (s == UCS_INPROGRESS) continue;
      ucp_request_free(op.request);
      op.request = nullptr;
      op.done = true;
      if (s != UCS_OK) return send_error_ = SendFailed(s, op.chunk);
      ChunkSent(op.chunk);
      *progressed = true;
    }
    send_ops_.erase(std::remove_if(send_ops_.begin(), send_ops_.end(), [](const SendOp& o) { return o.done; }),
                    send_ops_.end());
    *done = send_done_ == send_.count;
    // A failed peer: fail once nothing moves any more.
    if (!*done && !*progressed && peer_->failed()) return send_error_ = peer_->FailureStatus();
    return Status::Ok();
  }

  Status ProgressRecv(bool* progressed, bool* done) override {
    Status s = ProgressRecvChunks(progressed, done);
    if (!s.ok()) SettleRecv();
    return s;
  }

  void AddWaits(WaitSet* set, bool, bool) override { worker_->AddWaits(set); }

  Status CheckPeer() override {
    peer_->CheckProcess();
    return peer_->failed() ? peer_->FailureStatus() : Status::Ok();
  }

  size_t sent_bytes() const override { return send_bytes_; }
  size_t received_bytes() const override { return recv_bytes_; }
  size_t ready_bytes() const override { return recv_ready_ == recv_.count ? recv_.len : recv_ready_ * recv_.chunk; }

 private:
  Status ProgressRecvChunks(bool* progressed, bool* done) {
    *progressed = false;
    TESSERA_RETURN_IF_ERROR(recv_error_);
    if (PostReceives()) *progressed = true;
    if (worker_->Turn()) *progressed = true;
    for (size_t k = recv_ready_; k < recv_next_; ++k) {
      RecvSlot& slot = recv_slots_[SlotOf(k)];
      if (slot.probing) TESSERA_RETURN_IF_ERROR(MatchShortLastChunk(k, &slot, progressed));
      if (!slot.complete || slot.handled) continue;
      if (slot.request != nullptr) ucp_request_free(slot.request);
      slot.request = nullptr;
      slot.handled = true;
      *progressed = true;
      TESSERA_RETURN_IF_ERROR(ChunkReceived(k, slot.status, slot.info));
    }
    while (recv_ready_ < recv_next_ && recv_slots_[SlotOf(recv_ready_)].handled) ++recv_ready_;
    GrantCredits();
    *done = recv_ready_ == recv_.count;
    if (!*done && !*progressed && peer_->failed()) return recv_error_ = peer_->FailureStatus();
    return Status::Ok();
  }

  // Posts receives for the next chunks; true if it posted any (or marked a short last
  // chunk for probing). Chunks [recv_ready_, recv_next_) are out, at most in_flight_
  // of them, so chunk k owns slot k % in_flight_ (and, when reducing, staging slot
  // k % in_flight_). BeginRecv posts the first ones at once: before the exchange's
  // send goes, so the peer's message finds its receive waiting (UCX matches it as it
  // arrives instead of queueing it as unexpected).
  //
  // A posted receive is never shorter than the chunk a sender can send for it (a
  // whole chunk, or a staging chunk), except a short last chunk landing in the
  // destination. A longer message would truncate into that receive, and UCX 1.13 can
  // then still write the rendezvous data after reporting the truncation, possibly
  // into memory the caller has freed. So that chunk is received only once it has
  // arrived and its length and last-chunk flag have been checked (ucp_tag_probe_nb).
  bool PostReceives() {
    const bool reducing = recv_reducer_ != nullptr;
    bool posted = false;
    while (recv_next_ - recv_ready_ < in_flight_ && recv_next_ < recv_.count) {
      const size_t k = recv_next_++;
      RecvSlot& slot = recv_slots_[SlotOf(k)];
      slot = RecvSlot();
      posted = true;
      if (!reducing && recv_.Length(k) < recv_.chunk) {
        slot.probing = true;
        continue;
      }
      void* buffer = Landing(k);
      if (Fused()) {
        slot.fused.dst = recv_dst_ + recv_.Begin(k);
        slot.fused.acc = recv_acc_ + recv_.Begin(k);
        slot.fused.staging = Landing(k);
        slot.fused.length = recv_.Length(k);
        slot.fused.reducer = recv_reducer_;
        buffer = &slot;
      }
      void* req = ucp_tag_recv_nbx(worker_->worker, buffer, recv_.Length(k),
                                   UcxDataTag(peer(), recv_seq_now_, 0, k, false), kUcxDataMatchMask, &RecvParam(&slot));
      Posted(&slot, req);
    }
    return posted;
  }

  // After a failed receive (a size mismatch, a dead peer), its other chunks may already
  // be matched to rendezvous data on the way, which UCX can no longer cancel and would
  // write into the destination whenever the worker progresses, perhaps after the caller
  // has freed it (seen with UCX 1.13 over tcp, even after closing the endpoint by
  // force). So settle them now, while the destination is still the caller's: cancel
  // what is not matched and let the rest arrive, bounded in time. What is still going
  // after that marks the peer abandoned (its endpoint is then closed by force, and the
  // transport never progresses again before the worker goes).
  void SettleRecv() {
    for (size_t k = recv_ready_; k < recv_next_; ++k) {
      RecvSlot& slot = recv_slots_[SlotOf(k)];
      if (slot.request != nullptr && !slot.complete) ucp_request_cancel(worker_->worker, slot.request);
    }
    const Deadline deadline = Deadline::AfterMs(kCloseMs);
    auto unsettled = [&] {
      for (size_t k = recv_ready_; k < recv_next_; ++k) {
        const RecvSlot& slot = recv_slots_[SlotOf(k)];
        if (slot.request != nullptr && !slot.complete) return true;
      }
      return false;
    };
    while (unsettled() && !deadline.Expired()) {
      if (!worker_->Progress()) worker_->Wait(1);
    }
    AbandonRecv();
  }

  // Chunk k's receive slot (and staging slot): k % in_flight_, without the division for
  // a message's first chunks (all of a small one's), as polls ask for it each look.
  size_t SlotOf(size_t k) const { return k < in_flight_ ? k : k % in_flight_; }

  // Reducing receives go through UnpackReduce (worker->reduce_dt) when there is one.
  bool Fused() const { return recv_reducer_ != nullptr && worker_->reduce_dt != 0; }

  char* Landing(size_t k) const {
    return recv_reducer_ != nullptr ? staging_ + SlotOf(k) * recv_.chunk : recv_dst_ + recv_.Begin(k);
  }

  ucp_request_param_t& RecvParam(RecvSlot* slot) {
    recv_param_ = ucp_request_param_t{};
    recv_param_.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    recv_param_.cb.recv = OnChunkReceived;
    recv_param_.user_data = slot;
    if (Fused()) {
      recv_param_.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      recv_param_.datatype = worker_->reduce_dt;
    } else if (recv_reducer_ != nullptr && staging_memh_ != nullptr) {
      recv_param_.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      recv_param_.memh = staging_memh_;
    }
    return recv_param_;
  }

  static void Posted(RecvSlot* slot, void* req) {
    if (UCS_PTR_IS_ERR(req)) {
      slot->status = UCS_PTR_STATUS(req);
      slot->complete = true;
    } else {
      slot->request = req;
    }
  }

  // Receives the short last chunk k if it has arrived and matches what this rank
  // expects; a mismatch is reported without receiving it.
  Status MatchShortLastChunk(size_t k, RecvSlot* slot, bool* progressed) {
    const uint64_t tag = UcxDataTag(peer(), recv_seq_now_, 0, k, false);
    ucp_tag_recv_info_t info{};
    if (ucp_tag_probe_nb(worker_->worker, tag, kUcxDataMatchMask, 0, &info) == nullptr) return Status::Ok();
    *progressed = true;
    slot->probing = false;
    if (UcxTagDigest(info.sender_tag) != digest_) {
      slot->complete = slot->handled = true;
      return recv_error_ = CallMismatch();
    }
    const bool last = (info.sender_tag & kUcxLastFlag) != 0;
    if (info.length != recv_.Length(k) || !last) {
      slot->complete = slot->handled = true;
      return recv_error_ = Mismatch(k, info.length, last, info.length > recv_.Length(k));
    }
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker_->worker, tag, kUcxDataMatchMask, 1, &info);
    Posted(slot, ucp_tag_msg_recv_nbx(worker_->worker, Landing(k), recv_.Length(k), msg, &RecvParam(slot)));
    return Status::Ok();
  }

  // Checks a completed chunk against what this rank expects and reduces it if needed.
  Status ChunkReceived(size_t k, ucs_status_t s, const ucp_tag_recv_info_t& info) {
    // A truncated chunk still reports its tag (UCX sets it when matching; checked against
    // the receive's own): another call's is named as such, not as a size mismatch.
    const uint64_t posted = UcxDataTag(peer(), recv_seq_now_, 0, k, false);
    const bool tagged =
        s == UCS_OK || (s == UCS_ERR_MESSAGE_TRUNCATED && (info.sender_tag & kUcxDataMatchMask) == posted);
    if (tagged && UcxTagDigest(info.sender_tag) != digest_) return recv_error_ = CallMismatch();
    if (s == UCS_ERR_MESSAGE_TRUNCATED) return recv_error_ = Mismatch(k, 0, false, true);
    if (s != UCS_OK) {
      return recv_error_ = peer_->failed() ? peer_->FailureStatus()
                                           : RemoteError("receiving chunk " + std::to_string(k) + " from rank " +
                                                         std::to_string(peer()) + " failed: " + UcsText(s));
    }
    const bool last = (info.sender_tag & kUcxLastFlag) != 0;
    if (info.length != recv_.Length(k) || last != (k + 1 == recv_.count)) {
      return recv_error_ = Mismatch(k, info.length, last, false);
    }
    if (Fused()) {
      recv_slots_[SlotOf(k)].fused.Finish();
    } else if (recv_reducer_ != nullptr) {
      const size_t at = recv_.Begin(k);
      recv_reducer_->fn(recv_dst_ + at, recv_acc_ + at, Landing(k), recv_.Length(k) / recv_reducer_->elem_size);
    }
    recv_bytes_ += recv_.Length(k);
    consumed_ += CreditUnits(recv_.Length(k));
    return Status::Ok();
  }

  // Credits. An eager chunk is taken in by the receiver's worker whether or not a
  // receive waits for it, so a receiver busy elsewhere would hold all a sender sends.
  // On eager links a sender therefore has a window of credits, in_flight_ chunks'
  // worth counted in 8 KiB units (CreditUnits: a small message costs one), and spends
  // a chunk's units to send it; the receiver hands them back (an empty message whose
  // tag holds the count) once it has taken in half a window: a receiver holds at most
  // in_flight_ chunks' bytes it did not ask for, on each link, and small messages cost
  // one credit message per few hundred rather than per few.
  //
  // Takes the credits the peer sent.
  void TakeCredits() {
    ucp_tag_recv_info_t info{};
    while (ucp_tag_message_h msg =
               ucp_tag_probe_nb(worker_->worker, UcxCreditTag(peer(), 0), kUcxCreditMatchMask, 1, &info)) {
      credits_ += static_cast<size_t>(UcxCreditCount(info.sender_tag));
      ucp_request_param_t param{};
      void* req = ucp_tag_msg_recv_nbx(worker_->worker, nullptr, 0, msg, &param);  // empty: done at once
      if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);  // released when complete
    }
  }

  // Hands back the credits of the chunks taken in once they reach grant_at_: empty
  // messages whose tags hold the count, so nothing of this link must outlive its send.
  void GrantCredits() {
    if (!credited_ || consumed_ < grant_at_ || peer_->ep == nullptr) return;
    while (consumed_ > 0) {
      const size_t count = std::min<size_t>(consumed_, kUcxMaxCredits);
      ucp_request_param_t param{};
      void* req = ucp_tag_send_nbx(peer_->ep, nullptr, 0, UcxCreditTag(my_rank_, count), &param);
      if (UCS_PTR_IS_ERR(req)) return;  // the peer failed: its link fails on its own
      if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);  // released when sent
      consumed_ -= count;
    }
  }

  void ChunkSent(size_t k) {
    ++send_done_;
    send_bytes_ += send_.Length(k);
  }

  Status SendFailed(ucs_status_t s, size_t k) {
    if (peer_->failed()) return peer_->FailureStatus();
    return RemoteError("sending chunk " + std::to_string(k) + " of " + std::to_string(send_.count) + " to rank " +
                       std::to_string(peer()) + " failed: " + UcsText(s));
  }

  Status CallMismatch() const {
    return MismatchedCallDigest(my_rank_, call_, peer(), "UCX links carry only an 8-bit digest of the call");
  }

  // What the sender's chunk k says about its message, against what this rank expects.
  // `truncated`: the chunk is longer than this rank's.
  Status Mismatch(size_t k, size_t got, bool got_last, bool truncated) const {
    std::string sent;
    if (got_last && !truncated) {
      sent = std::to_string(recv_.Begin(k) + got);
    } else if (truncated || k + 1 == recv_.count) {
      sent = "more than " + std::to_string(recv_.len);
    } else {
      sent = "a different number of";
    }
    return InvalidUsage("message size mismatch: rank " + std::to_string(peer()) + " sent " + sent +
                        " bytes, this rank expected " + std::to_string(recv_.len) +
                        " (do all ranks pass the same count and datatype?)");
  }

  // Leaves the operations of an interrupted message behind: receives are cancelled,
  // sends released (UCX frees them when they end); the endpoint is then closed by force.
  void AbandonSend() {
    for (SendOp& op : send_ops_) {
      if (op.request == nullptr) continue;
      ucp_request_free(op.request);
      peer_->abandoned = true;
    }
    send_ops_.clear();
  }
  void AbandonRecv() {
    for (size_t k = recv_ready_; k < recv_next_; ++k) {
      RecvSlot& slot = recv_slots_[SlotOf(k)];
      if (slot.request == nullptr) continue;
      if (!slot.complete) {
        ucp_request_cancel(worker_->worker, slot.request);
        peer_->abandoned = true;
      }
      ucp_request_free(slot.request);  // no callback after this
      slot.request = nullptr;
    }
    recv_next_ = recv_ready_;
  }

  // Staging for reductions, mapped through UCX so that it is registered (pinned for
  // RDMA) once rather than on every message.
  Status EnsureStaging(size_t bytes) {
    if (staging_bytes_ >= bytes) return Status::Ok();
    ReleaseStaging();
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    p.address = nullptr;
    p.length = bytes;
    p.flags = UCP_MEM_MAP_ALLOCATE;
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    if (ucp_mem_map(worker_->context, &p, &staging_memh_) == UCS_OK &&
        ucp_mem_query(staging_memh_, &attr) == UCS_OK && attr.length >= bytes) {
      staging_ = static_cast<char*>(attr.address);
    } else {
      if (staging_memh_ != nullptr) ucp_mem_unmap(worker_->context, staging_memh_);
      staging_memh_ = nullptr;
      heap_staging_.reset(new (std::nothrow) char[bytes]);  // unregistered: UCX copes
      if (!heap_staging_) return SystemError("out of memory for " + std::to_string(bytes) + " bytes of UCX staging");
      staging_ = heap_staging_.get();
    }
    staging_bytes_ = bytes;
    return Status::Ok();
  }
  void ReleaseStaging() {
    if (staging_memh_ != nullptr) ucp_mem_unmap(worker_->context, staging_memh_);
    staging_memh_ = nullptr;
    heap_staging_.reset();
    staging_ = nullptr;
    staging_bytes_ = 0;
  }

  const int my_rank_;
  UcxTransport::Peer* const peer_;
  CallStamp call_;       // of this link's messages, both ways (SetCall)
  uint8_t digest_ = UcxCallDigest(CallStamp{});  // UcxCallDigest(call_)
  UcxTransport::Worker* const worker_;
  const size_t chunk_bytes_;
  const size_t in_flight_;

  // Credits (TakeCredits), in CreditUnits: what the receiver takes in before it hands
  // credits back (GrantAt), what this rank may still send (a CreditWindow at first),
  // and what it took in and has not handed back. The same on both ends (chunk size and
  // window are agreed).
  const bool credited_;
  const size_t grant_at_;
  size_t credits_;
  size_t consumed_ = 0;

  // The active send: chunks [0, send_next_) posted, send_done_ of them complete.
  const char* send_data_ = nullptr;
  Chunking send_;
  Status send_error_;
  size_t send_next_ = 0, send_done_ = 0, send_bytes_ = 0;
  uint64_t send_seq_ = 0, send_seq_now_ = 0;
  std::vector<SendOp> send_ops_;

  // The active receive: chunks [0, recv_ready_) final, [recv_ready_, recv_next_) posted.
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  Chunking recv_;
  size_t recv_next_ = 0, recv_ready_ = 0, recv_bytes_ = 0;
  uint64_t recv_seq_ = 0, recv_seq_now_ = 0;
  std::vector<RecvSlot> recv_slots_;  // in_flight_ of them
  ucp_request_param_t recv_param_{};
  Status recv_error_;

  char* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  ucp_mem_h staging_memh_ = nullptr;
  std::unique_ptr<char[]> heap_staging_;
};

}  // namespace

// --- The transport -------------------------------------------------------------------

UcxTransport::UcxTransport() = default;

UcxTransport::~UcxTransport() {
  if (!worker_ || worker_->worker == nullptr) return;
  // An interrupted receive that could not be settled (UcxLink::SettleRecv) may still
  // be matched to rendezvous data that UCX would write into a buffer the caller may
  // have freed since, on any progress, even after its endpoint is closed by force. With
  // such a peer, close every endpoint by force and never progress again.
  bool abandoned = false;
  for (const auto& peer : peers_) abandoned = abandoned || (peer && peer->abandoned);
  CloseEndpoints(abandoned);
  if (!abandoned) {
    DiscardUnexpected();
    // Let UCX finish what closing scheduled (purging failed requests) before the
    // worker goes, bounded.
    const Deadline deadline = Deadline::AfterMs(kDrainMs);
    while (worker_->Progress() && !deadline.Expired()) {
    }
  }
  for (void* r : notice_requests_) ucp_request_free(r);
  notice_requests_.clear();
  worker_.reset();
}

void UcxTransport::DiscardUnexpected() {
  const Deadline deadline = Deadline::AfterMs(kDrainMs);
  std::vector<char> sink(kMaxDiscardBytes);
  while (!deadline.Expired()) {
    worker_->Progress();
    ucp_tag_recv_info_t info{};
    // Only small messages: they are already here (eager), whereas a large one would
    // have to be fetched from its sender, which may be gone.
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker_->worker, 0, 0, 0, &info);
    if (msg == nullptr || info.length > kMaxDiscardBytes) return;
    msg = ucp_tag_probe_nb(worker_->worker, 0, 0, 1, &info);
    if (msg == nullptr) return;
    ucp_request_param_t param{};
    void* r = ucp_tag_msg_recv_nbx(worker_->worker, sink.data(), info.length, msg, &param);
    if (!UCS_PTR_IS_PTR(r)) continue;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && !deadline.Expired()) worker_->Progress();
    if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(worker_->worker, r);
    ucp_request_free(r);
  }
}

Status UcxTransport::Create(const Options& options, int my_rank, int nranks, std::unique_ptr<UcxTransport>* out) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  TESSERA_RETURN_IF_ERROR(t->Init(options, my_rank, nranks).Annotate("UCX transport"));
  *out = std::move(t);
  return Status::Ok();
}

Status UcxTransport::Init(const Options& options, int my_rank, int nranks) {
  if (nranks < 1 || nranks > (1 << kUcxRankBits) || my_rank < 0 || my_rank >= nranks) {
    return InvalidArgument("rank " + std::to_string(my_rank) + " of " + std::to_string(nranks) +
                           " is out of range (at most " + std::to_string(1 << kUcxRankBits) + " ranks)");
  }
  if (options.chunk_bytes < 1 || options.chunks_in_flight < 1) {
    return InvalidArgument("chunk_bytes and chunks_in_flight must be positive");
  }
  options_ = options;
  options_.chunk_bytes = (options.chunk_bytes + 63) / 64 * 64;
  my_rank_ = my_rank;
  nranks_ = nranks;
  worker_ = std::make_unique<Worker>();

  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return SystemError("reading UCX's configuration (UCX_* variables) failed: " + UcsText(s));
  // Dead peers are found by keepalive on otherwise quiet endpoints: check every second
  // (UCX's default is 20 s).
  DefaultOption(config, "KEEPALIVE_INTERVAL", "1s", {"UCX_KEEPALIVE_INTERVAL"});
  // Peer error handling excludes transports that do not declare support for it, so
  // without these one host would fall back from shared memory and cma to TCP loopback.
  if (TlsMayInclude({"posix", "sysv", "mm"})) {
    DefaultOption(config, "MM_ERROR_HANDLING", "y",
                  {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING", "UCX_SYSV_ERROR_HANDLING"});
  }
  if (TlsMayInclude({"cma"})) DefaultOption(config, "MEMORY_INVALIDATE", "y", {"UCX_CMA_MEMORY_INVALIDATE"});
  const bool all_eager = options.eager && DefaultOption(config, "RNDV_THRESH", "inf", {"UCX_RNDV_THRESH"});
  // Fused only where every chunk is eager: a rendezvous into a generic datatype would
  // lose its zero copy.
  if (all_eager && ucp_dt_create_generic(&kUnpackReduceOps, nullptr, &worker_->reduce_dt) != UCS_OK) {
    worker_->reduce_dt = 0;  // reduce through staging instead
  }

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<size_t>(nranks);
  params.name = "tessera";
  s = ucp_init(&params, config, &worker_->context);
  ucp_config_release(config);
  if (s != UCS_OK) {
    worker_->context = nullptr;
    return SystemError("ucp_init failed: " + UcsText(s) + " (check UCX_TLS and UCX_NET_DEVICES)");
  }

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time drives a communicator, not always the same one.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(worker_->context, &wp, &worker_->worker);
  if (s != UCS_OK) {
    worker_->worker = nullptr;
    return SystemError("ucp_worker_create failed: " + UcsText(s));
  }
  s = ucp_worker_get_efd(worker_->worker, &worker_->event_fd);
  if (s != UCS_OK) return SystemError("ucp_worker_get_efd failed: " + UcsText(s));
  worker_->ready_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  if (worker_->ready_fd < 0) return ErrnoError("eventfd", errno);

  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  s = ucp_worker_get_address(worker_->worker, &address, &address_len);
  if (s != UCS_OK) return SystemError("ucp_worker_get_address failed: " + UcsText(s));
  address_.assign(reinterpret_cast<const char*>(address), address_len);
  ucp_worker_release_address(worker_->worker, address);
  return Status::Ok();
}

const std::string& UcxTransport::worker_address() const { return address_; }

Status UcxTransport::SetPeerAddresses(std::vector<std::string> addresses) {
  if (static_cast<int>(addresses.size()) != nranks_) {
    return InvalidArgument("UCX: " + std::to_string(addresses.size()) + " peer addresses for " +
                           std::to_string(nranks_) + " ranks");
  }
  if (!peers_.empty()) return InternalError("UCX: peer addresses set twice");
  peers_.resize(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    peers_[r] = std::make_unique<Peer>();
    peers_[r]->rank = r;
    if (r != my_rank_) peers_[r]->address = std::move(addresses[r]);
  }
  return Status::Ok();
}

void UcxTransport::WatchLocalPeers(const std::vector<LocalRank>& local) {
  for (const LocalRank& l : local) {
    if (l.rank == my_rank_ || l.rank < 0 || l.rank >= static_cast<int>(peers_.size())) continue;
    Peer* p = peers_[l.rank].get();
    if (p->pidfd >= 0) close(p->pidfd);
    p->pid = l.pid;
    p->pidfd = OpenPeerPidfd(l.pid);
  }
}

bool UcxTransport::CanConnect(int peer) const {
  return peer != my_rank_ && peer >= 0 && peer < static_cast<int>(peers_.size()) && !peers_[peer]->address.empty();
}

Status UcxTransport::EnsureEndpoint(Peer* peer) {
  if (peer->ep != nullptr) return Status::Ok();
  // A rank of this host that has exited: UCX would fail to attach its shared memory
  // (and UCX 1.13 leaks on that path), so do not ask it.
  peer->CheckProcess();
  if (peer->exited) return peer->FailureStatus();
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = reinterpret_cast<const ucp_address_t*>(peer->address.data());
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = OnEndpointError;
  p.err_handler.arg = peer;
  const ucs_status_t s = ucp_ep_create(worker_->worker, &p, &peer->ep);
  if (s != UCS_OK) {
    peer->ep = nullptr;
    const std::string what = "UCX cannot reach rank " + std::to_string(peer->rank) + ": ucp_ep_create failed: " + UcsText(s);
    // A bad address is a set-up problem. Anything else usually means the peer has gone
    // (its shared memory or socket with it); UCX says "unreachable" both for a refused
    // connection and for ranks without a transport in common.
    if (s == UCS_ERR_INVALID_PARAM || s == UCS_ERR_INVALID_ADDR || s == UCS_ERR_UNSUPPORTED) {
      return SystemError(what + " (do both ranks use the same UCX version?)");
    }
    peer->unreachable = what + (s == UCS_ERR_UNREACHABLE
                                    ? " (has the process exited? or do the ranks share no transport: UCX_TLS?)"
                                    : " (has the process exited?)");
    peer->failure.store(s, std::memory_order_release);
    return RemoteError(peer->unreachable);
  }
  return Status::Ok();
}

Status UcxTransport::Connect(int peer, const Deadline&, std::unique_ptr<Link>* out) {
  if (!CanConnect(peer)) return InternalError("UCX: no address for rank " + std::to_string(peer));
  Peer* p = peers_[peer].get();
  Status s = EnsureEndpoint(p);
  // A peer that cannot be reached still gets a link: what it sent before it exited
  // (eager chunks, a notice) may be waiting in this worker, and a receive takes that
  // before it fails; a send fails at once (the exchange then prefers the root cause the
  // peer may have sent in a notice).
  if (!s.ok() && s.code() != Code::kRemoteError) return s;
  *out = std::make_unique<UcxLink>(my_rank_, p, worker_.get(), static_cast<size_t>(options_.chunk_bytes),
                                   static_cast<size_t>(options_.chunks_in_flight), options_.eager);
  return Status::Ok();
}

void UcxTransport::PublishFailure(const Status& failure) {
  if (!notice_payload_.empty()) return;  // once
  notice_payload_ = EncodeUcxNotice(failure);
  // Every peer, linked or not: a rank whose set-up failed before it linked to anyone
  // (its endpoint to a dead rank failed) still tells the ranks that would have linked
  // to it. Creating an endpoint does not wait for the peer.
  std::vector<bool> local;  // by request: to a rank of this host
  for (const auto& peer : peers_) {
    if (!peer || peer->address.empty() || peer->failed() || !EnsureEndpoint(peer.get()).ok()) continue;
    peer->used = true;
    ucp_request_param_t param{};
    void* r = ucp_tag_send_nbx(peer->ep, notice_payload_.data(), notice_payload_.size(), UcxNoticeTag(my_rank_), &param);
    if (!UCS_PTR_IS_PTR(r)) continue;
    notice_requests_.push_back(r);
    local.push_back(peer->pid != 0);
  }
  // Best effort, bounded: push them out (they are small, so eager). A rank of this host
  // takes a notice out of shared memory at once unless it is not draining it (stopped,
  // hung, or its FIFO full of eager chunks it has not taken): wait less for those.
  const Deadline deadline = Deadline::AfterMs(kNoticeSendMs);
  const Deadline local_deadline = Deadline::AfterMs(kLocalNoticeSendMs);
  while (!deadline.Expired()) {
    worker_->Progress();
    bool pending_remote = false, pending_local = false;
    for (size_t i = 0; i < notice_requests_.size(); ++i) {
      void*& r = notice_requests_[i];
      if (r == nullptr) continue;
      if (ucp_request_check_status(r) == UCS_INPROGRESS) {
        (local[i] ? pending_local : pending_remote) = true;
      } else {
        ucp_request_free(r);
        r = nullptr;
      }
    }
    if (!pending_remote && (!pending_local || local_deadline.Expired())) break;
    worker_->Wait(1);
  }
  notice_requests_.erase(std::remove(notice_requests_.begin(), notice_requests_.end(), nullptr),
                         notice_requests_.end());
}

void UcxTransport::AddNoticeWaits(WaitSet* set) { worker_->AddWaits(set); }

Status UcxTransport::CheckNotices(int wait_ms) {
  const Deadline deadline = Deadline::AfterMs(wait_ms);
  for (;;) {
    worker_->Progress();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker_->worker, kUcxNoticeFlag, kUcxNoticeMatchMask, 1, &info);
    if (msg != nullptr) {
      const int sender = UcxTagSender(info.sender_tag);
      std::string payload(std::min(info.length, kMaxUcxNoticeBytes), '\0');
      ucp_request_param_t param{};
      void* r = ucp_tag_msg_recv_nbx(worker_->worker, &payload[0], payload.size(), msg, &param);
      ucs_status_t s = UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
      if (UCS_PTR_IS_PTR(r)) {
        const Deadline recv_deadline = Deadline::AfterMs(kNoticeSendMs);
        while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS && !recv_deadline.Expired()) worker_->Wait(1);
        if (s == UCS_INPROGRESS) ucp_request_cancel(worker_->worker, r);
        ucp_request_free(r);
      }
      if (s != UCS_OK && s != UCS_ERR_MESSAGE_TRUNCATED) payload.clear();
      return DecodeUcxNotice(sender, payload);
    }
    if (deadline.Expired()) return Status::Ok();
    worker_->Wait(std::min(deadline.RemainingMs(), 20));
  }
}

void UcxTransport::CloseEndpoints(bool all_by_force) {
  std::vector<void*> closing;
  // First by force (at once, cancelling what is in flight) the endpoints of failed
  // peers and of interrupted messages; then, flushed, those this rank sent on. One
  // never sent on has nothing to flush and is left to ucp_worker_destroy: closing it
  // could make UCX connect to a peer that has gone, and UCX 1.13 was seen to crash in
  // keepalive after such an endpoint was closed by force.
  for (int forced = 1; forced >= 0; --forced) {
    for (const auto& peer : peers_) {
      if (!peer || peer->ep == nullptr) continue;
      const bool force = all_by_force || peer->failed() || peer->abandoned;
      if (!force && !peer->used) continue;
      if (forced != force) continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = forced ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      void* r = ucp_ep_close_nbx(peer->ep, &param);
      peer->ep = nullptr;
      if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    }
  }
  // Flushing waits for the peer's acknowledgements; a peer that died meanwhile is
  // found by keepalive, but never wait longer than kCloseMs. Whatever is still open
  // then is destroyed with the worker.
  const Deadline deadline = Deadline::AfterMs(kCloseMs);
  while (!closing.empty() && !all_by_force) {
    worker_->Progress();
    for (void*& r : closing) {
      if (ucp_request_check_status(r) != UCS_INPROGRESS) {
        ucp_request_free(r);
        r = nullptr;
      }
    }
    closing.erase(std::remove(closing.begin(), closing.end(), nullptr), closing.end());
    if (closing.empty() || deadline.Expired()) break;
    worker_->Wait(1);
  }
  for (void* r : closing) ucp_request_free(r);
}

}  // namespace tessera
