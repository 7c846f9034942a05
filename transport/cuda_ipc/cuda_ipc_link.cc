// CudaIpcLink (cuda_ipc_link.h): the slot protocol of cuda_ipc_transport.h over a
// control link, with the data moved by a DeviceEngine's streams.
#include "transport/cuda_ipc/cuda_ipc_link.h"

#include <poll.h>

#include <algorithm>
#include <string>

namespace tessera {

CudaIpcLink::CudaIpcLink(int peer, Parts parts) : Link(peer), parts_(std::move(parts)) {}

CudaIpcLink::~CudaIpcLink() {
  // The peer's slots are unmapped and ours freed after this: let copies and kernels
  // still in flight (after a failure) finish first, within a bound.
  const Deadline deadline = Deadline::AfterMs(2000);
  (void)parts_.send_stream->Drain(deadline, nullptr, "closing a cuda_ipc link");
  (void)parts_.recv_stream->Drain(deadline, nullptr, "closing a cuda_ipc link");
}

Status CudaIpcLink::Fail(const Status& s) const {
  return s.Annotate("cuda_ipc link to rank " + std::to_string(peer()));
}

void CudaIpcLink::BeginSend(const void* data, size_t len) {
  send_data_ = static_cast<const char*>(data);
  send_len_ = len;
  send_copied_ = 0;
  send_published_ = 0;
}

void CudaIpcLink::BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) {
  recv_dst_ = static_cast<char*>(dst);
  recv_acc_ = static_cast<const char*>(acc);
  recv_reducer_ = reducer;
  recv_len_ = len;
  recv_launched_ = 0;
  recv_ready_ = 0;
}

Status CudaIpcLink::Dispatch(const SlotMessage& m) {
  if (m.kind == SlotMessage::kFull) {
    if (m.index != fulls_seen_) {
      return InternalError("slot protocol: piece " + std::to_string(m.index) + " announced, expected " +
                           std::to_string(fulls_seen_));
    }
    ++fulls_seen_;
    fulls_.push_back(m);
    return Status::Ok();
  }
  if (m.kind == SlotMessage::kFree) {
    if (m.index != send_freed_ || send_freed_ >= send_next_) {
      return InternalError("slot protocol: piece " + std::to_string(m.index) + " freed, expected " +
                           std::to_string(send_freed_) + " of " + std::to_string(send_next_) + " sent");
    }
    ++send_freed_;
    return Status::Ok();
  }
  return InternalError("slot protocol: unknown message kind " + std::to_string(m.kind));
}

Status CudaIpcLink::Pump(bool* progressed) {
  Link& control = *parts_.control;
  for (;;) {
    bool moved = false, p = false, d = false;
    if (!control_receiving_) {
      control.BeginRecv(&in_msg_, sizeof(in_msg_), nullptr, nullptr);
      control_receiving_ = true;
    }
    TESSERA_RETURN_IF_ERROR(control.ProgressRecv(&p, &d));
    if (d) {
      control_receiving_ = false;
      TESSERA_RETURN_IF_ERROR(Dispatch(in_msg_));
      moved = true;
    }
    if (!control_sending_ && !outgoing_.empty()) {
      out_msg_ = outgoing_.front();
      outgoing_.pop_front();
      control.BeginSend(&out_msg_, sizeof(out_msg_));
      control_sending_ = true;
    }
    if (control_sending_) {
      TESSERA_RETURN_IF_ERROR(control.ProgressSend(sizeof(out_msg_), &p, &d));
      if (d) {
        control_sending_ = false;
        moved = true;
      }
    }
    if (!moved) return Status::Ok();
    *progressed = true;
  }
}

Status CudaIpcLink::ProgressSend(size_t available, bool* progressed, bool* done) {
  *progressed = false;
  Status s = Pump(progressed);
  if (!s.ok()) return Fail(s);
  // Copy pieces into the peer's free slots: a full slot, or the end of the message.
  while (send_copied_ < send_len_ && send_next_ - send_freed_ < parts_.slots) {
    const size_t piece = std::min(parts_.slot_bytes, send_len_ - send_copied_);
    if (send_copied_ + piece > available) break;
    char* slot = static_cast<char*>(parts_.outbound->data()) + (send_next_ % parts_.slots) * parts_.slot_bytes;
    s = parts_.send_stream->Copy(slot, send_data_ + send_copied_, piece);
    uint64_t ticket = 0;
    if (s.ok()) s = parts_.send_stream->Record(&ticket);
    if (!s.ok()) return Fail(s.Annotate("copying piece " + std::to_string(send_next_) + " to the peer"));
    send_flight_.push_back({send_next_, ticket, send_copied_, piece});
    ++send_next_;
    send_copied_ += piece;
    *progressed = true;
  }
  // Publish the pieces whose copies have finished, in order.
  while (!send_flight_.empty()) {
    bool finished = false;
    s = parts_.send_stream->Done(send_flight_.front().ticket, &finished);
    if (!s.ok()) return Fail(s);
    if (!finished) break;
    const InFlight& f = send_flight_.front();
    SlotMessage m;
    m.kind = SlotMessage::kFull;
    m.index = f.index;
    m.message_bytes = send_len_;
    m.offset = f.offset;
    outgoing_.push_back(m);
    send_published_ += f.bytes;
    send_flight_.pop_front();
    *progressed = true;
  }
  s = Pump(progressed);
  if (!s.ok()) return Fail(s);
  *done = send_published_ == send_len_ && outgoing_.empty() && !control_sending_;
  return Status::Ok();
}

Status CudaIpcLink::ProgressRecv(bool* progressed, bool* done) {
  *progressed = false;
  Status s = Pump(progressed);
  if (!s.ok()) return Fail(s);
  // Consume the announced pieces of this message, in order.
  while (!fulls_.empty() && recv_launched_ < recv_len_) {
    const SlotMessage m = fulls_.front();
    if (m.message_bytes != recv_len_ || m.offset != recv_launched_) {
      return Fail(InvalidUsage("message size mismatch: rank " + std::to_string(peer()) + " sent " +
                               std::to_string(m.message_bytes) + " bytes (piece at " + std::to_string(m.offset) +
                               "), this rank expected " + std::to_string(recv_len_) +
                               " (do all ranks pass the same count and datatype?)"));
    }
    const size_t piece = std::min(parts_.slot_bytes, recv_len_ - recv_launched_);
    const char* slot = static_cast<const char*>(parts_.inbound->data()) + (m.index % parts_.slots) * parts_.slot_bytes;
    if (recv_reducer_ != nullptr) {
      s = parts_.recv_stream->Reduce(*recv_reducer_, recv_dst_ + recv_launched_, recv_acc_ + recv_launched_, slot,
                                     piece / recv_reducer_->elem_size);
    } else {
      s = parts_.recv_stream->Copy(recv_dst_ + recv_launched_, slot, piece);
    }
    uint64_t ticket = 0;
    if (s.ok()) s = parts_.recv_stream->Record(&ticket);
    if (!s.ok()) return Fail(s.Annotate("consuming piece " + std::to_string(m.index)));
    recv_flight_.push_back({m.index, ticket, recv_launched_, piece});
    recv_launched_ += piece;
    fulls_.pop_front();
    *progressed = true;
  }
  // Pieces whose kernels have finished are final in dst, and their slots are free.
  while (!recv_flight_.empty()) {
    bool finished = false;
    s = parts_.recv_stream->Done(recv_flight_.front().ticket, &finished);
    if (!s.ok()) return Fail(s);
    if (!finished) break;
    SlotMessage m;
    m.kind = SlotMessage::kFree;
    m.index = recv_flight_.front().index;
    outgoing_.push_back(m);
    recv_ready_ += recv_flight_.front().bytes;
    recv_flight_.pop_front();
    *progressed = true;
  }
  s = Pump(progressed);
  if (!s.ok()) return Fail(s);
  *done = recv_ready_ == recv_len_ && outgoing_.empty() && !control_sending_;
  return Status::Ok();
}

void CudaIpcLink::AddWaits(WaitSet* set, bool sending, bool receiving) {
  parts_.control->AddWaits(set, sending, receiving);
  // An event completes without ringing anything: poll again at once while work is in
  // flight (as NCCL's proxy spins on its GPU work).
  if ((!send_flight_.empty() || !recv_flight_.empty()) && parts_.busy_fd >= 0) set->AddFd(parts_.busy_fd, POLLIN);
}

}  // namespace tessera
