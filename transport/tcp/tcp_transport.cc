#include "transport/tcp/tcp_transport.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <poll.h>

#include <cerrno>

#include <cstring>

namespace tessera {
namespace {

// A connection's first bytes (its hello, a notice's header and text) may take this
// long to arrive; the listener reads them as they come and never waits for them.
constexpr int kHelloMs = 5000;
// Connections still sending their first bytes, at most; the oldest goes first.
constexpr size_t kMaxPending = 256;

// Per-stream progress of one message in one direction.
struct StreamCursor {
  size_t chunk = 0;       // current chunk index carried by this stream
  size_t offset = 0;      // bytes of that chunk moved
  size_t header_done = 0; // stream 0 only: header bytes moved
};

class TcpLink : public Link {
 public:
  TcpLink(int my_rank, int peer, std::vector<Socket> streams, size_t chunk_bytes)
      : Link(peer), my_rank_(my_rank), streams_(std::move(streams)), chunk_(chunk_bytes) {
    send_.resize(streams_.size());
    recv_.resize(streams_.size());
    staging_.resize(streams_.size());
  }

  const char* kind() const override { return "tcp"; }

  void SetCall(const CallStamp& call) override { call_ = call; }

  void BeginSend(const void* data, size_t len) override {
    send_data_ = static_cast<const char*>(data);
    send_len_ = len;
    send_moved_ = 0;
    send_header_ = MessageHeader{len, send_seq_++, call_};
    for (size_t s = 0; s < send_.size(); ++s) send_[s] = StreamCursor{s, 0, 0};
  }

  void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) override {
    recv_dst_ = static_cast<char*>(dst);
    recv_acc_ = static_cast<const char*>(acc);
    recv_reducer_ = reducer;
    recv_len_ = len;
    recv_moved_ = 0;
    for (size_t s = 0; s < recv_.size(); ++s) recv_[s] = StreamCursor{s, 0, 0};
    if (reducer != nullptr) {
      for (auto& buf : staging_) {
        if (buf.size() < chunk_) buf.resize(chunk_);
      }
    }
  }

  Status ProgressSend(size_t available, bool* progressed, bool* done) override {
    *progressed = false;
    send_available_ = available;
    for (size_t s = 0; s < streams_.size(); ++s) {
      StreamCursor& c = send_[s];
      for (;;) {
        const size_t begin = c.chunk * chunk_;
        const bool need_header = s == 0 && HeaderDue(available);
        if (begin >= send_len_ && !need_header) break;
        const size_t end = std::min(begin + chunk_, std::min(send_len_, available));
        const size_t piece = end > begin + c.offset ? end - begin - c.offset : 0;
        if (piece == 0 && !need_header) break;  // not produced yet
        iovec iov[2];
        int n = 0;
        if (need_header) {
          iov[n++] = {reinterpret_cast<char*>(&send_header_) + c.header_done, sizeof(MessageHeader) - c.header_done};
        }
        if (piece > 0) iov[n++] = {const_cast<char*>(send_data_ + begin + c.offset), piece};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = n;
        ssize_t moved = ::sendmsg(streams_[s].fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (moved < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          if (errno == EPIPE || errno == ECONNRESET) return RemoteError("connection to rank " + std::to_string(peer()) + " lost");
          return ErrnoError("send to rank " + std::to_string(peer()), errno);
        }
        *progressed = true;
        size_t m = static_cast<size_t>(moved);
        if (need_header) {
          size_t h = std::min(m, sizeof(MessageHeader) - c.header_done);
          c.header_done += h;
          m -= h;
        }
        c.offset += m;
        send_moved_ += m;
        if (begin < send_len_ && c.offset == std::min(chunk_, send_len_ - begin)) {
          c.chunk += streams_.size();
          c.offset = 0;
        } else if (m < piece) {
          break;  // socket buffer full
        }
      }
    }
    *done = send_moved_ == send_len_ && send_[0].header_done == sizeof(MessageHeader);
    return Status::Ok();
  }

  Status ProgressRecv(bool* progressed, bool* done) override {
    *progressed = false;
    // The other streams wait for the header on stream 0 to be checked (CheckHeader).
    const size_t streams = header_checked() ? streams_.size() : 1;
    for (size_t s = 0; s < streams; ++s) {
      StreamCursor& c = recv_[s];
      for (;;) {
        const size_t begin = c.chunk * chunk_;
        const bool need_header = s == 0 && c.header_done < sizeof(MessageHeader);
        if (begin >= recv_len_ && !need_header) break;
        const size_t chunk_len = begin >= recv_len_ ? 0 : std::min(chunk_, recv_len_ - begin);
        char* target = recv_reducer_ != nullptr ? staging_[s].data() : recv_dst_ + begin;
        iovec iov[2];
        int n = 0;
        if (need_header) {
          iov[n++] = {reinterpret_cast<char*>(&recv_header_) + c.header_done, sizeof(MessageHeader) - c.header_done};
        }
        if (chunk_len > c.offset) iov[n++] = {target + c.offset, chunk_len - c.offset};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = n;
        ssize_t moved = ::recvmsg(streams_[s].fd(), &msg, MSG_DONTWAIT);
        if (moved == 0) return RemoteError("connection closed by rank " + std::to_string(peer()));
        if (moved < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          if (errno == ECONNRESET) return RemoteError("connection reset by rank " + std::to_string(peer()));
          return ErrnoError("recv from rank " + std::to_string(peer()), errno);
        }
        *progressed = true;
        size_t m = static_cast<size_t>(moved);
        if (need_header) {
          size_t h = std::min(m, sizeof(MessageHeader) - c.header_done);
          c.header_done += h;
          m -= h;
          if (c.header_done == sizeof(MessageHeader)) {
            TESSERA_RETURN_IF_ERROR(CheckHeader());
            ++recv_seq_;
          }
        }
        c.offset += m;
        recv_moved_ += m;
        if (chunk_len > 0 && c.offset == chunk_len) {
          if (recv_reducer_ != nullptr) {
            recv_reducer_->fn(recv_dst_ + begin, recv_acc_ + begin, target, chunk_len / recv_reducer_->elem_size);
          }
          c.chunk += streams_.size();
          c.offset = 0;
        } else if (!need_header || m == 0) {
          break;  // drained what the socket had
        }
      }
    }
    *done = recv_moved_ == recv_len_ && header_checked();
    return Status::Ok();
  }

  bool header_checked() const { return recv_[0].header_done == sizeof(MessageHeader); }

  // The header goes with the message's first bytes: sent alone ahead of a send that
  // waits for a receive (a ring's forwarded block), it would make a segment of its own,
  // a round trip's worth of latency for small messages.
  bool HeaderDue(size_t available) const {
    const size_t done = send_[0].header_done;
    return done < sizeof(MessageHeader) && (available > 0 || done > 0);
  }

  // The arrived header against this rank's receive, before any of the message is reduced
  // (a copy's first bytes may already be in the destination: they come in the same
  // system call as the header).
  Status CheckHeader() const {
    return CheckMessageHeader(recv_header_, my_rank_, peer(), call_, recv_len_, recv_seq_);
  }

  void AddWaits(WaitSet* set, bool sending, bool receiving) override {
    for (size_t s = 0; s < streams_.size(); ++s) {
      const size_t next = send_[s].chunk * chunk_ + send_[s].offset;
      if (sending && ((next < send_len_ && next < send_available_) || (s == 0 && HeaderDue(send_available_)))) {
        set->AddFd(streams_[s].fd(), POLLOUT);
      }
      if (receiving && ((recv_[s].chunk * chunk_ < recv_len_ && (s == 0 || header_checked())) ||
                        (s == 0 && !header_checked()))) {
        set->AddFd(streams_[s].fd(), POLLIN);
      }
    }
  }

  size_t sent_bytes() const override { return send_moved_; }
  size_t received_bytes() const override { return recv_moved_; }
  size_t ready_bytes() const override {
    // Stream s has finished every chunk before its current one; the smallest current
    // chunk start over all streams (plus, when copying, what has landed of it) bounds
    // the contiguous final prefix.
    size_t ready = recv_len_;
    for (const StreamCursor& c : recv_) {
      const size_t begin = c.chunk * chunk_;
      if (begin >= recv_len_) continue;
      ready = std::min(ready, begin + (recv_reducer_ == nullptr ? c.offset : 0));
    }
    return ready;
  }

 private:
  const int my_rank_;
  std::vector<Socket> streams_;
  const size_t chunk_;
  std::vector<StreamCursor> send_, recv_;
  std::vector<std::vector<char>> staging_;
  const char* send_data_ = nullptr;
  size_t send_len_ = 0, send_moved_ = 0, send_available_ = 0;
  CallStamp call_;  // of this link's messages, both ways
  MessageHeader send_header_{0, 0, {}};
  uint64_t send_seq_ = 0;
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  size_t recv_len_ = 0, recv_moved_ = 0;
  MessageHeader recv_header_{0, 0, {}};
  uint64_t recv_seq_ = 0;
};

}  // namespace

TcpTransport::TcpTransport(const Options& options, int my_rank, uint64_t secret, Socket listener,
                           std::vector<SocketAddress> peers)
    : options_(options), my_rank_(my_rank), secret_(secret), listener_(std::move(listener)), peers_(std::move(peers)) {
  if (options_.congestion == "system") options_.congestion.clear();
  if (!options_.congestion.empty()) {
    Socket probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const Status s = probe.fd() < 0 ? ErrnoError("socket", errno) : SetCongestionControl(probe.fd(), options_.congestion);
    if (!s.ok()) {
      congestion_note_ = s.message() + "; the system's default is used";
      options_.congestion.clear();
    }
  }
}

Status TcpTransport::AcceptOne(bool* progressed) {
  *progressed = false;
  const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd >= 0) {
    SetNoDelay(fd);
    if (pending_.size() == kMaxPending) pending_.erase(pending_.begin());
    pending_.push_back(PendingConnection{Socket(fd), std::string(), Deadline::AfterMs(kHelloMs)});
    *progressed = true;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
    return ErrnoError("accept", errno);
  }
  for (size_t i = 0; i < pending_.size();) {
    bool done = false;
    const Status notice = ReadPending(&pending_[i], &done);
    if (done) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      *progressed = true;
    } else {
      ++i;
    }
    TESSERA_RETURN_IF_ERROR(notice);
  }
  return Status::Ok();
}

// Reads what has arrived of a pending connection's first bytes, without waiting. Done
// when it is filed (a link's stream goes to the stash) or dropped (garbage, closed,
// too slow); a complete failure notice is returned as the peer's failure.
Status TcpTransport::ReadPending(PendingConnection* p, bool* done) {
  *done = true;
  constexpr size_t kHelloEnd = sizeof(ConnectHello), kHeaderEnd = kHelloEnd + sizeof(NoticeHeader);
  ConnectHello hello{};
  bool closed = false;
  for (;;) {
    // What the connection still owes: its hello; for a notice, the header, then the text.
    size_t want = kHelloEnd;
    if (p->bytes.size() >= kHelloEnd) {
      std::memcpy(&hello, p->bytes.data(), sizeof(hello));  // a notice of this job (checked)
      want = kHeaderEnd;
    }
    if (p->bytes.size() >= kHeaderEnd) {
      NoticeHeader header;
      if (!DecodeNoticeHeader(p->bytes.substr(kHelloEnd, sizeof(header)), &header).ok()) {
        closed = true;  // a header we cannot read: the reason is lost
        break;
      }
      want = kHeaderEnd + header.length;
      if (p->bytes.size() == want) return NoticeFailure(hello.rank, header, p->bytes.substr(kHeaderEnd));
    }
    char buf[kMaxNoticeBytes];
    const ssize_t n = ::recv(p->socket.fd(), buf, std::min(want - p->bytes.size(), sizeof(buf)), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed = true;
      break;
    }
    if (n < 0) break;  // nothing more for now
    p->bytes.append(buf, static_cast<size_t>(n));
    if (p->bytes.size() == kHelloEnd) {
      if (!DecodeConnectHello(p->bytes, secret_, static_cast<int>(peers_.size()), options_.streams, &hello).ok()) {
        return Status::Ok();  // not one of ours: drop it
      }
      if (hello.stream != kNoticeStream) {
        stash_[{hello.rank, hello.stream}] = std::move(p->socket);
        return Status::Ok();
      }
    }
  }
  if (p->bytes.size() < kHelloEnd) {
    *done = closed || p->deadline.Expired();  // nothing known of it yet
    return Status::Ok();
  }
  if (closed || p->deadline.Expired()) return RemoteError("rank " + std::to_string(hello.rank) + " failed: (reason lost)");
  *done = false;
  return Status::Ok();
}

Status TcpTransport::AcceptFrom(int peer, const Deadline& deadline, std::vector<Socket>* streams) {
  const int want = static_cast<int>(options_.streams);
  streams->resize(want);
  int have = 0;
  for (;;) {
    for (int k = 0; k < want; ++k) {
      auto it = stash_.find({peer, k});
      if (it != stash_.end()) {
        (*streams)[k] = std::move(it->second);
        stash_.erase(it);
        ++have;
      }
    }
    if (have == want) return Status::Ok();
    bool progressed = false;
    TESSERA_RETURN_IF_ERROR(AcceptOne(&progressed));
    if (progressed) continue;
    if (deadline.Expired()) {
      return TimeoutError("waiting for rank " + std::to_string(peer) + " to connect (" + std::to_string(have) +
                          " of " + std::to_string(want) + " streams arrived)");
    }
    PollListener(std::min(deadline.RemainingMs(), 100));
  }
}

void TcpTransport::PublishFailure(const Status& failure) {
  // Best effort, bounded: a live peer's kernel accepts within a millisecond even when
  // the peer is busy, so the bound only matters for peers cut off, which must not delay
  // the caller's error by much (a survivor returns within the timeout + 1 s, of which
  // diagnosis takes up to TESSERA_DIAGNOSIS_MS).
  const Deadline deadline = Deadline::AfterMs(250);
  const std::string notice = EncodeNotice(failure);
  // Linked peers always; on a small communicator every peer, so that a rank that failed
  // before linking to anyone (e.g. during set-up) still tells the others why.
  std::vector<int> targets = linked_peers_;
  if (peers_.size() <= 64) {
    targets.clear();
    for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
      if (r != my_rank_) targets.push_back(r);
    }
  }
  for (int peer : targets) {
    Socket s;
    if (!tessera::Connect(peers_[peer], deadline, &s, /*retry_refused=*/false).ok()) continue;
    ConnectHello hello{kTcpConnectMagic, secret_, my_rank_, kNoticeStream};
    if (SendAll(s, &hello, sizeof(hello), deadline).ok()) SendAll(s, notice.data(), notice.size(), deadline);
  }
  for (int fd : link_fds_) ::shutdown(fd, SHUT_RDWR);  // peers blocked on us see it at once
}

void TcpTransport::AddNoticeWaits(WaitSet* set) {
  if (linked_peers_.empty()) return;
  set->AddFd(listener_.fd(), POLLIN);
  for (const PendingConnection& p : pending_) set->AddFd(p.socket.fd(), POLLIN);
}

void TcpTransport::PollListener(int timeout_ms) {
  std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
  for (const PendingConnection& p : pending_) fds.push_back({p.socket.fd(), POLLIN, 0});
  // A pending connection that stays silent is dropped at its deadline: look again by then.
  ::poll(fds.data(), fds.size(), pending_.empty() ? timeout_ms : std::min(timeout_ms, 100));
}

Status TcpTransport::CheckNotices(int wait_ms) {
  const Deadline deadline = Deadline::AfterMs(wait_ms);
  for (;;) {
    bool progressed = false;
    TESSERA_RETURN_IF_ERROR(AcceptOne(&progressed));
    if (progressed) continue;
    if (deadline.Expired()) return Status::Ok();
    PollListener(deadline.RemainingMs());
  }
}

Status TcpTransport::Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) {
  std::vector<Socket> streams;
  const std::string where = "tcp connection with rank " + std::to_string(peer) + " at " + peers_[peer].ToString();
  if (my_rank_ < peer) {
    for (int k = 0; k < options_.streams; ++k) {
      Socket s;
      // The peer listens since before the rendezvous: a refusal means it is gone.
      TESSERA_RETURN_IF_ERROR(tessera::Connect(peers_[peer], deadline, &s, /*retry_refused=*/false).Annotate(where));
      ConnectHello hello{kTcpConnectMagic, secret_, my_rank_, k};
      TESSERA_RETURN_IF_ERROR(SendAll(s, &hello, sizeof(hello), deadline).Annotate(where));
      streams.push_back(std::move(s));
    }
  } else {
    TESSERA_RETURN_IF_ERROR(AcceptFrom(peer, deadline, &streams).Annotate(where));
  }
  linked_peers_.push_back(peer);
  for (const Socket& s : streams) {
    link_fds_.push_back(s.fd());
    // Checked at construction; a refusal now only leaves this stream on the default.
    if (!options_.congestion.empty()) SetCongestionControl(s.fd(), options_.congestion);
  }
  *out = std::make_unique<TcpLink>(my_rank_, peer, std::move(streams), static_cast<size_t>(options_.chunk_bytes));
  return Status::Ok();
}

}  // namespace tessera
