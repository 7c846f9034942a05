#include "transport/ibverbs/ibverbs_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessera {
namespace ibverbs {
namespace {

// What a work request was, kept in its wr_id.
enum WorkKind : uint64_t {
  kWrReceive = 1,  // a posted receive, consumed by the peer's write-with-immediate or send
  kWrData = 2,     // RDMA write with immediate of a message piece
  kWrCredit = 3,   // zero-byte send with immediate returning slots
  kWrProbe = 4,    // zero-byte RDMA write checking that the peer still answers
  kWrNotice = 5,   // RDMA write with immediate of a failure notice
};

const char* WorkName(uint64_t kind) {
  switch (kind) {
    case kWrReceive:
      return "receive";
    case kWrData:
      return "RDMA write";
    case kWrCredit:
      return "credit return";
    case kWrProbe:
      return "liveness probe";
    case kWrNotice:
      return "failure notice";
  }
  return "work request";
}

// Send work requests kept free for a probe and a notice, which must always fit.
constexpr uint32_t kReservedSendWrs = 2;
// Completions reaped per ibv_poll_cq call; channel events acknowledged per batch.
constexpr int kPollBatch = 16;
constexpr unsigned kAckBatch = 64;

std::string CompletionFailure(const ibv_wc& wc) {
  std::string why;
  switch (wc.status) {
    case IBV_WC_RETRY_EXC_ERR:
      why = "no answer (transport retries exhausted: the peer process, its NIC or the path to it is gone)";
      break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      why = "the peer had no receive posted (receiver-not-ready retries exhausted)";
      break;
    case IBV_WC_REM_ACCESS_ERR:
      why = "the peer refused the RDMA write (remote access error: its ring is gone or its key is stale)";
      break;
    case IBV_WC_WR_FLUSH_ERR:
      why = "the queue pair is in the error state (work request flushed)";
      break;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
      why = "the peer's queue pair failed the request";
      break;
    default:
      why = ibv_wc_status_str(wc.status);
      break;
  }
  char vendor[32];
  std::snprintf(vendor, sizeof(vendor), "0x%x", wc.vendor_err);
  return why + " [" + ibv_wc_status_str(wc.status) + ", vendor error " + vendor + "]";
}

char* AllocatePages(size_t bytes) {
  void* p = nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  if (posix_memalign(&p, page > 0 ? static_cast<size_t>(page) : 4096, bytes) != 0) return nullptr;
  std::memset(p, 0, bytes);
  return static_cast<char*>(p);
}

}  // namespace

IbverbsLink::IbverbsLink(std::shared_ptr<SharedState> shared, int my_rank, int peer, const LinkConfig& config)
    : Link(peer),
      shared_(std::move(shared)),
      my_rank_(my_rank),
      config_(config),
      send_depth_(2 * config.slots + kReservedSendWrs + 2),
      recv_depth_(2 * config.slots + 2),
      window_(config.slots) {}

Status IbverbsLink::Create(std::shared_ptr<SharedState> shared, int my_rank, int peer, const LinkConfig& config,
                           std::unique_ptr<IbverbsLink>* out) {
  std::unique_ptr<IbverbsLink> link(new IbverbsLink(std::move(shared), my_rank, peer, config));
  link->shared_->links.push_back(link.get());  // the destructor removes it, on failure too
  TESSERA_RETURN_IF_ERROR(link->Init().Annotate("setting up the ibverbs link with rank " + std::to_string(peer)));
  *out = std::move(link);
  return Status::Ok();
}

Status IbverbsLink::Init() {
  ibv_context* ctx = shared_->device->context();
  ibv_pd* pd = shared_->device->pd();
  channel_ = ibv_create_comp_channel(ctx);
  if (channel_ == nullptr) return ErrnoError("ibv_create_comp_channel", errno);
  const int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoError("making the completion channel non-blocking", errno);
  }
  cq_ = ibv_create_cq(ctx, static_cast<int>(send_depth_ + recv_depth_), nullptr, channel_, 0);
  if (cq_ == nullptr) return ErrnoError("ibv_create_cq", errno);
  TESSERA_RETURN_IF_ERROR(CreateRcQueuePair(pd, cq_, send_depth_, recv_depth_, &qp_));

  TESSERA_RETURN_IF_ERROR(on_device() ? InitDeviceMemory() : InitHostMemory());

  LocalPort local{shared_->device->port(), shared_->device->gid_index(), shared_->device->gid()};
  ibv_qp_attr attr;
  int mask = 0;
  InitTransition(local, &attr, &mask);
  TESSERA_RETURN_IF_ERROR(ModifyQueuePair(qp_, "INIT", &attr, mask));
  // Receives can be posted in INIT, before the peer can write: none of its writes can
  // then find the queue without a receive.
  for (uint32_t i = 0; i < recv_depth_; ++i) TESSERA_RETURN_IF_ERROR(PostReceive());
  psn_ = RandomPsn();
  return Status::Ok();
}

// Host mode: ring and staging in page-aligned host memory, each followed by its notice
// area under the same registration.
Status IbverbsLink::InitHostMemory() {
  ibv_pd* pd = shared_->device->pd();
  const size_t slots_bytes = static_cast<size_t>(config_.slots) * config_.slot_bytes;
  ring_bytes_ = slots_bytes + kNoticeBytes;
  ring_ = AllocatePages(ring_bytes_);
  staging_ = AllocatePages(ring_bytes_);
  if (ring_ == nullptr || staging_ == nullptr) {
    return SystemError("cannot allocate 2 x " + std::to_string(ring_bytes_) + " bytes of ring memory");
  }
  const std::string limit_hint = " (is the locked-memory limit, ulimit -l, large enough?)";
  ring_mr_ = ibv_reg_mr(pd, ring_, ring_bytes_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (ring_mr_ == nullptr) return ErrnoError("ibv_reg_mr of the receive ring" + limit_hint, errno);
  staging_mr_ = ibv_reg_mr(pd, staging_, ring_bytes_, IBV_ACCESS_LOCAL_WRITE);
  if (staging_mr_ == nullptr) return ErrnoError("ibv_reg_mr of the staging ring" + limit_hint, errno);
  notice_in_ = ring_ + slots_bytes;
  notice_out_ = staging_ + slots_bytes;
  notice_in_rkey_ = ring_mr_->rkey;
  notice_out_lkey_ = staging_mr_->lkey;
  return Status::Ok();
}

// GPUDirect mode: ring and staging in device memory registered through GPUDirect RDMA,
// the notice areas in host memory of their own.
Status IbverbsLink::InitDeviceMemory() {
  if (shared_->cuda == nullptr) {
    return InvalidUsage("an ibverbs link on device memory needs GPUDirect RDMA, and this rank has no CUDA driver");
  }
  ibv_pd* pd = shared_->device->pd();
  DeviceEngine* engine = config_.engine;
  ring_bytes_ = static_cast<size_t>(config_.slots) * config_.slot_bytes;
  TESSERA_RETURN_IF_ERROR(engine->Allocate(ring_bytes_, &device_ring_).Annotate("device memory for the receive ring"));
  TESSERA_RETURN_IF_ERROR(engine->Allocate(ring_bytes_, &device_staging_).Annotate("device memory for staging"));
  ring_ = static_cast<char*>(device_ring_.get());
  staging_ = static_cast<char*>(device_staging_.get());
  DeviceRegistrationPath path = DeviceRegistrationPath::kDmaBuf;  // dma-buf or peer memory: either serves
  TESSERA_RETURN_IF_ERROR(RegisterDeviceMemory(pd, *shared_->cuda, ring_, ring_bytes_,
                                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &ring_mr_, &path)
                              .Annotate("registering the device receive ring"));
  TESSERA_RETURN_IF_ERROR(
      RegisterDeviceMemory(pd, *shared_->cuda, staging_, ring_bytes_, IBV_ACCESS_LOCAL_WRITE, &staging_mr_, &path)
          .Annotate("registering the device staging ring"));
  notice_host_ = AllocatePages(2 * kNoticeBytes);
  if (notice_host_ == nullptr) return SystemError("cannot allocate the notice areas");
  notice_mr_ = ibv_reg_mr(pd, notice_host_, 2 * kNoticeBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (notice_mr_ == nullptr) return ErrnoError("ibv_reg_mr of the notice areas", errno);
  notice_in_ = notice_host_;
  notice_out_ = notice_host_ + kNoticeBytes;
  notice_in_rkey_ = notice_mr_->rkey;
  notice_out_lkey_ = notice_mr_->lkey;
  TESSERA_RETURN_IF_ERROR(engine->CreateStream(&send_stream_).Annotate("device stream for sends"));
  TESSERA_RETURN_IF_ERROR(engine->CreateStream(&recv_stream_).Annotate("device stream for receives"));
  busy_fd_ = eventfd(1, EFD_CLOEXEC);  // never read: stays readable
  if (busy_fd_ < 0) return ErrnoError("eventfd", errno);
  return Status::Ok();
}

IbverbsLink::~IbverbsLink() {
  auto& links = shared_->links;
  links.erase(std::remove(links.begin(), links.end(), this), links.end());
  ReleaseSendRegion();
  // GPUDirect mode: copies and kernels still in flight (after a failure) read the ring
  // and staging; let them finish, within a bound, before that memory goes.
  const Deadline deadline = Deadline::AfterMs(2000);
  if (send_stream_) (void)send_stream_->Drain(deadline, nullptr, "closing an ibverbs gpudirect link");
  if (recv_stream_) (void)recv_stream_->Drain(deadline, nullptr, "closing an ibverbs gpudirect link");
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (ring_mr_ != nullptr) ibv_dereg_mr(ring_mr_);
  if (staging_mr_ != nullptr) ibv_dereg_mr(staging_mr_);
  if (notice_mr_ != nullptr) ibv_dereg_mr(notice_mr_);
  if (cq_ != nullptr) {
    if (channel_ != nullptr) DrainChannel();
    if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
    ibv_destroy_cq(cq_);
  }
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (busy_fd_ >= 0) close(busy_fd_);
  if (!on_device()) {
    std::free(ring_);
    std::free(staging_);
  }
  std::free(notice_host_);
  // device_ring_ and device_staging_ are released after this, once deregistered.
}

ConnectionInfo IbverbsLink::LocalInfo() const {
  const VerbsDevice& d = *shared_->device;
  ConnectionInfo info;
  info.rank = static_cast<uint32_t>(my_rank_);
  info.peer = static_cast<uint32_t>(peer());
  info.link_layer = d.link_layer();
  info.port = static_cast<uint8_t>(d.port().port);
  info.mtu = d.port().active_mtu;
  info.gid_index = static_cast<uint8_t>(d.gid_index() < 0 ? 0 : d.gid_index());
  info.lid = d.port().lid;
  info.qp_num = qp_->qp_num;
  info.psn = psn_;
  info.gid = d.gid();
  info.ring_addr = reinterpret_cast<uint64_t>(ring_);
  info.ring_rkey = ring_mr_->rkey;
  info.slots = config_.slots;
  info.slot_bytes = config_.slot_bytes;
  info.notice_addr = reinterpret_cast<uint64_t>(notice_in_);
  info.notice_rkey = notice_in_rkey_;
  return info;
}

Status IbverbsLink::ConnectTo(const ConnectionInfo& remote) {
  if (remote.rank != static_cast<uint32_t>(peer()) || remote.peer != static_cast<uint32_t>(my_rank_)) {
    return InvalidUsage("connection data from rank " + std::to_string(remote.rank) + " for rank " +
                        std::to_string(remote.peer) + " arrived on the link between ranks " + std::to_string(my_rank_) +
                        " and " + std::to_string(peer()));
  }
  if (remote.slots != config_.slots || remote.slot_bytes != config_.slot_bytes) {
    return InvalidUsage("ibverbs ring settings differ: rank " + std::to_string(peer()) + " uses " +
                        std::to_string(remote.slots) + " slots of " + std::to_string(remote.slot_bytes) +
                        " bytes, this rank " + std::to_string(config_.slots) + " of " +
                        std::to_string(config_.slot_bytes));
  }
  LocalPort local{shared_->device->port(), shared_->device->gid_index(), shared_->device->gid()};
  ibv_qp_attr attr;
  int mask = 0;
  TESSERA_RETURN_IF_ERROR(RtrTransition(local, remote, config_.tuning, &attr, &mask));
  TESSERA_RETURN_IF_ERROR(ModifyQueuePair(qp_, "RTR", &attr, mask));
  RtsTransition(psn_, config_.tuning, &attr, &mask);
  TESSERA_RETURN_IF_ERROR(ModifyQueuePair(qp_, "RTS", &attr, mask));
  remote_ = remote;
  connected_ = true;
  return Status::Ok();
}

// --- Work requests --------------------------------------------------------------------

Status IbverbsLink::PostReceive() {
  ibv_recv_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = kWrReceive;
  wr.sg_list = nullptr;  // writes land in the ring; the receive only carries the immediate
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad)) return ErrnoError("ibv_post_recv", rc);
  return Status::Ok();
}

Status IbverbsLink::PostWrite(uint64_t wr_kind, uint32_t imm, uint64_t local_addr, uint32_t lkey, uint32_t length,
                              uint64_t remote_addr, bool with_imm) {
  ibv_sge sge{local_addr, length, lkey};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_kind;
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.send_flags = IBV_SEND_SIGNALED;  // every send is counted back (send_wrs_outstanding_)
  if (wr_kind == kWrCredit) {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
  } else {
    wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = wr_kind == kWrNotice ? remote_.notice_rkey : remote_.ring_rkey;
  }
  if (with_imm) wr.imm_data = htonl(imm);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) {
    return ErrnoError(std::string("ibv_post_send (") + WorkName(wr_kind) + ") to " + Who(), rc);
  }
  ++send_wrs_outstanding_;
  return Status::Ok();
}

Status IbverbsLink::ReturnCredits() {
  if (credit_count_ == 0 || !connected_ || send_wrs_outstanding_ + kReservedSendWrs >= send_depth_) {
    return Status::Ok();  // nothing to return, or no room now: the next Poll tries again
  }
  TESSERA_RETURN_IF_ERROR(PostWrite(kWrCredit, EncodeCreditImm(credit_first_, credit_count_), 0, 0, 0, 0, true));
  credit_first_ += credit_count_;
  credit_count_ = 0;
  return Status::Ok();
}

bool IbverbsLink::PostNotice(const Status& failure) {
  if (!connected_ || !error_.ok() || notice_state_ != NoticeState::kNone) return false;
  const std::string text = failure.message().substr(0, kNoticeBytes);
  std::memcpy(notice_out_, text.data(), text.size());
  Status s = PostWrite(kWrNotice, EncodeNoticeImm(static_cast<uint32_t>(failure.code()), text.size()),
                       reinterpret_cast<uint64_t>(notice_out_), notice_out_lkey_, static_cast<uint32_t>(text.size()),
                       remote_.notice_addr, true);
  if (!s.ok()) return false;
  notice_state_ = NoticeState::kPosted;
  return true;
}

// --- Completions ----------------------------------------------------------------------

Status IbverbsLink::Fail(const Status& s) {
  if (error_.ok()) error_ = s;
  return error_;
}

void IbverbsLink::DrainChannel() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(channel_, &cq, &context) == 0) {  // non-blocking: stops at EAGAIN
    if (++unacked_events_ >= kAckBatch) {
      ibv_ack_cq_events(cq_, unacked_events_);
      unacked_events_ = 0;
    }
  }
}

Status IbverbsLink::Poll() {
  if (!error_.ok()) return error_;
  DrainChannel();
  ibv_wc wc[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(cq_, kPollBatch, wc);
    if (n < 0) return Fail(SystemError("ibv_poll_cq failed on the ibverbs link with " + Who()));
    for (int i = 0; i < n; ++i) {
      Status s = HandleCompletion(wc[i]);
      if (!s.ok()) return Fail(s);
    }
    if (n < kPollBatch) break;
  }
  Status s = ReturnCredits();
  return s.ok() ? s : Fail(s);
}

Status IbverbsLink::HandleCompletion(const ibv_wc& wc) {
  const uint64_t kind = wc.wr_id;
  // Book-keeping first: a failed work request is finished too.
  if (kind != kWrReceive && send_wrs_outstanding_ > 0) --send_wrs_outstanding_;
  if (kind == kWrProbe) probe_outstanding_ = false;
  if (kind == kWrNotice) notice_state_ = NoticeState::kDone;
  if (wc.status != IBV_WC_SUCCESS) {
    return RemoteError("ibverbs link with " + Who() + ": " + WorkName(kind) + " failed: " + CompletionFailure(wc));
  }
  switch (kind) {
    case kWrReceive:
      return HandleArrival(wc);
    case kWrData:
      ++data_writes_completed_;
      break;
    default:
      break;
  }
  return Status::Ok();
}

Status IbverbsLink::HandleArrival(const ibv_wc& wc) {
  TESSERA_RETURN_IF_ERROR(PostReceive());  // replace the receive just consumed
  if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
    return InternalError("ibverbs protocol error: a message without immediate data from " + Who());
  }
  Immediate imm;
  TESSERA_RETURN_IF_ERROR(DecodeImm(ntohl(wc.imm_data), &imm).Annotate("ibverbs protocol error from " + Who()));
  switch (imm.kind) {
    case ImmKind::kData: {
      const uint32_t expected = arrival_sequence_ & (config_.slots - 1);
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || imm.slot != expected || imm.length > config_.slot_bytes ||
          arrived_.size() >= config_.slots) {
        return InternalError("ibverbs protocol error: " + Who() + " wrote " + std::to_string(imm.length) +
                             " bytes into slot " + std::to_string(imm.slot) + ", expected slot " +
                             std::to_string(expected) + " with " + std::to_string(arrived_.size()) + " pending");
      }
      arrived_.push_back(Piece{imm.slot, imm.length, imm.last});
      ++arrival_sequence_;
      return Status::Ok();
    }
    case ImmKind::kCredit:
      return window_.Return(window_.ExpandSequence(imm.first_sequence_low), imm.count)
          .Annotate("ibverbs protocol error from " + Who());
    case ImmKind::kNotice: {
      shared_->notices.push_back(
          PeerFailure(peer(), FailureFromWire(imm.code, notice_in_, std::min<uint32_t>(imm.text_length, kNoticeBytes))));
      return RemoteError(Who() + " stopped after a failure (it sent a failure notice over ibverbs)");
    }
  }
  return Status::Ok();
}

// --- Link -------------------------------------------------------------------------------

void IbverbsLink::ReleaseSendRegion() {
  if (send_region_ != nullptr) shared_->cache->Unpin(send_region_);
  send_region_ = nullptr;
}

void IbverbsLink::BeginSend(const void* data, size_t len) {
  ReleaseSendRegion();
  send_data_ = static_cast<const char*>(data);
  send_len_ = len;
  send_posted_ = 0;
  send_taken_ = 0;
  message_last_write_ = data_writes_posted_;
  // Zero copy when the buffer is registered: explicitly, or on the fly if allowed (a
  // failed registration just means copying through the staging ring).
  send_error_ = Status::Ok();
  send_region_ = shared_->cache->PinIfCached(data, len);
  if (send_region_ != nullptr) return;
  if (on_device()) {
    // Copied through the device staging slots by the engine, which reaches only device
    // memory. Buffers are not registered on the fly here: a device address seen once
    // may be freed and handed out again before the cache could know.
    if (len > 0 && !config_.engine->IsDeviceMemory(data, len)) {
      send_error_ = InvalidUsage("the ibverbs gpudirect link to " + Who() + " sends device memory only");
    }
    return;
  }
  const bool device = shared_->cuda != nullptr && shared_->cuda->IsDeviceMemory(data);
  if (config_.register_user_buffers || device) {
    Status s = shared_->cache->Pin(data, len, &send_region_);
    if (!s.ok()) send_region_ = nullptr;
    // Host memory can still go through the staging ring; device memory cannot.
    if (!s.ok() && device) {
      send_error_ = s.Annotate("sending device memory to " + Who() + " over ibverbs needs GPUDirect RDMA");
    }
  }
}

void IbverbsLink::BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) {
  recv_dst_ = static_cast<char*>(dst);
  recv_acc_ = static_cast<const char*>(acc);
  recv_reducer_ = reducer;
  recv_len_ = len;
  recv_moved_ = 0;
  recv_ready_ = 0;
  recv_error_ = Status::Ok();
  if (on_device()) {
    // The engine's kernels move pieces out of the device ring: device memory only, and a
    // reducer that names its type and operator (the kernel to launch).
    if (len > 0 && (!config_.engine->IsDeviceMemory(dst, len) ||
                    (acc != nullptr && acc != dst && !config_.engine->IsDeviceMemory(acc, len)))) {
      recv_error_ = InvalidUsage("the ibverbs gpudirect link from " + Who() + " receives into device memory only");
    } else if (reducer != nullptr && !reducer->typed) {
      recv_error_ = InvalidUsage("the ibverbs gpudirect link from " + Who() + " needs a typed reducer");
    }
    return;
  }
  // Pieces are copied out of the ring by the CPU, which cannot write device memory.
  if (shared_->cuda != nullptr && shared_->cuda->IsDeviceMemory(dst)) {
    recv_error_ = InvalidUsage("the ibverbs link receives into host memory only; a device buffer needs staging");
  }
}

Status IbverbsLink::PostPiece(uint64_t local, uint32_t lkey, uint32_t slot, uint32_t length, bool last) {
  const uint64_t remote = remote_.ring_addr + static_cast<uint64_t>(slot) * config_.slot_bytes;
  Status s = PostWrite(kWrData, EncodeDataImm(last, slot, length), local, lkey, length, remote, true);
  if (!s.ok()) return Fail(s);
  send_posted_ += length;
  ++data_writes_posted_;
  message_last_write_ = data_writes_posted_;
  return Status::Ok();
}

Status IbverbsLink::PostStagedPieces(bool* progressed) {
  while (!send_staged_.empty()) {
    const StagedPiece piece = send_staged_.front();
    bool copied = false;
    Status s = send_stream_->Done(piece.ticket, &copied);
    if (!s.ok()) return Fail(s.Annotate("staging a piece for " + Who() + " in device memory"));
    if (!copied || send_wrs_outstanding_ + kReservedSendWrs >= send_depth_) break;
    const uint64_t local = reinterpret_cast<uint64_t>(staging_ + static_cast<size_t>(piece.slot) * config_.slot_bytes);
    TESSERA_RETURN_IF_ERROR(PostPiece(local, staging_mr_->lkey, piece.slot, piece.length, piece.last));
    send_staged_.pop_front();
    *progressed = true;
  }
  return Status::Ok();
}

Status IbverbsLink::ProgressSend(size_t available, bool* progressed, bool* done) {
  *progressed = false;
  *done = false;
  TESSERA_RETURN_IF_ERROR(Poll());
  if (!send_error_.ok()) return send_error_;
  if (on_device()) TESSERA_RETURN_IF_ERROR(PostStagedPieces(progressed));
  const size_t slot_bytes = config_.slot_bytes;
  for (;;) {
    const size_t piece = NextPieceLength(send_taken_, send_len_, available, slot_bytes);
    if (piece == 0) break;
    const bool last = send_taken_ + piece == send_len_;
    if (!window_.CanAcquire()) break;  // the peer's ring is full
    // A staging slot is reused only once the write that last read it completed.
    if (data_writes_posted_ + send_staged_.size() - data_writes_completed_ >= config_.slots) break;
    if (send_wrs_outstanding_ + kReservedSendWrs >= send_depth_) break;
    const uint32_t slot = window_.next() & (config_.slots - 1);
    char* stage = staging_ + static_cast<size_t>(slot) * slot_bytes;
    if (send_region_ == nullptr && on_device()) {
      // Device staging: the copy runs on the send stream; PostStagedPieces posts the
      // write when it has finished.
      uint64_t ticket = 0;
      Status s = send_stream_->Copy(stage, send_data_ + send_taken_, piece);
      if (s.ok()) s = send_stream_->Record(&ticket);
      if (!s.ok()) return Fail(s.Annotate("staging a piece for " + Who() + " in device memory"));
      send_staged_.push_back(StagedPiece{ticket, slot, static_cast<uint32_t>(piece), last});
      window_.Acquire();
      send_taken_ += piece;
      *progressed = true;
      continue;
    }
    uint64_t local = 0;
    uint32_t lkey = 0;
    if (send_region_ != nullptr) {
      local = reinterpret_cast<uint64_t>(send_data_ + send_taken_);
      lkey = send_region_->lkey;
    } else {
      std::memcpy(stage, send_data_ + send_taken_, piece);
      local = reinterpret_cast<uint64_t>(stage);
      lkey = staging_mr_->lkey;
    }
    TESSERA_RETURN_IF_ERROR(PostPiece(local, lkey, slot, static_cast<uint32_t>(piece), last));
    window_.Acquire();
    send_taken_ += piece;
    *progressed = true;
  }
  if (on_device()) TESSERA_RETURN_IF_ERROR(PostStagedPieces(progressed));  // copies that finished at once
  // A staged message is done once posted (the staging ring holds its data); a zero-copy
  // one once its writes completed, as the NIC reads the user's buffer until then.
  *done = send_posted_ == send_len_ && (send_region_ == nullptr || data_writes_completed_ >= message_last_write_);
  if (*done) ReleaseSendRegion();
  return Status::Ok();
}

Status IbverbsLink::RetireLaunchedPieces(bool* progressed) {
  while (!recv_launched_.empty()) {
    bool finished = false;
    Status s = recv_stream_->Done(recv_launched_.front().ticket, &finished);
    if (!s.ok()) return Fail(s.Annotate("moving a piece from " + Who() + " out of the device ring"));
    if (!finished) break;
    recv_ready_ += recv_launched_.front().length;
    recv_launched_.pop_front();
    ++credit_count_;  // the kernel has read the slot: it may be written again
    *progressed = true;
  }
  return Status::Ok();
}

Status IbverbsLink::ProgressRecv(bool* progressed, bool* done) {
  *progressed = false;
  *done = false;
  TESSERA_RETURN_IF_ERROR(Poll());
  if (!recv_error_.ok()) return recv_error_;
  if (on_device() && recv_moved_ < recv_len_ && !arrived_.empty()) {
    // What the NIC wrote must be visible to the kernels launched below.
    Status s = config_.engine->FlushRemoteWrites();
    if (!s.ok()) return Fail(s.Annotate("flushing GPUDirect writes from " + Who()));
  }
  while (recv_moved_ < recv_len_ && !arrived_.empty()) {
    const Piece p = arrived_.front();
    Status fits = CheckArrivingPiece(recv_moved_, recv_len_, p.length, p.last, peer());
    if (!fits.ok()) return Fail(fits);
    if (recv_reducer_ != nullptr && p.length % recv_reducer_->elem_size != 0) {
      return Fail(InvalidUsage("message from " + Who() + " is not a whole number of " +
                               std::to_string(recv_reducer_->elem_size) + "-byte elements"));
    }
    const char* src = ring_ + static_cast<size_t>(p.slot) * config_.slot_bytes;
    char* dst = recv_dst_ + recv_moved_;
    if (on_device()) {
      // Launched on the receive stream; the slot is freed when the kernel has finished.
      Status s = recv_reducer_ != nullptr ? recv_stream_->Reduce(*recv_reducer_, dst, recv_acc_ + recv_moved_, src,
                                                                 p.length / recv_reducer_->elem_size)
                                          : recv_stream_->Copy(dst, src, p.length);
      uint64_t ticket = 0;
      if (s.ok()) s = recv_stream_->Record(&ticket);
      if (!s.ok()) return Fail(s.Annotate("moving a piece from " + Who() + " out of the device ring"));
      recv_launched_.push_back(LaunchedPiece{ticket, p.length});
    } else {
      if (recv_reducer_ != nullptr) {
        recv_reducer_->fn(dst, recv_acc_ + recv_moved_, src, p.length / recv_reducer_->elem_size);
      } else {
        std::memcpy(dst, src, p.length);
      }
      recv_ready_ += p.length;
      ++credit_count_;  // slots are consumed in ring order, so the freed ones are consecutive
    }
    recv_moved_ += p.length;
    arrived_.pop_front();
    *progressed = true;
  }
  if (on_device()) TESSERA_RETURN_IF_ERROR(RetireLaunchedPieces(progressed));
  Status s = ReturnCredits();
  if (!s.ok()) return Fail(s);
  *done = recv_ready_ == recv_len_;
  return Status::Ok();
}

void IbverbsLink::AddChannelWait(WaitSet* set) {
  // Armed before the engine's last progress check, so a completion arriving after that
  // check still wakes the channel.
  if (ibv_req_notify_cq(cq_, 0) == 0) set->AddFd(channel_->fd, POLLIN);
}

void IbverbsLink::AddWaits(WaitSet* set, bool sending, bool receiving) {
  (void)sending;
  (void)receiving;
  AddChannelWait(set);  // arrivals, credits and send completions all come through the queue
  // Device work signals nothing: poll while some is in flight.
  if (busy_fd_ >= 0 && (!send_staged_.empty() || !recv_launched_.empty())) set->AddFd(busy_fd_, POLLIN);
}

Status IbverbsLink::CheckPeer() {
  TESSERA_RETURN_IF_ERROR(Poll());
  if (connected_ && !probe_outstanding_ && send_wrs_outstanding_ < send_depth_) {
    Status s = PostWrite(kWrProbe, 0, 0, 0, 0, remote_.ring_addr, false);
    if (!s.ok()) return Fail(s);
    probe_outstanding_ = true;
  }
  return Status::Ok();
}

}  // namespace ibverbs
}  // namespace tessera
