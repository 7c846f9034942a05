#include "transport/tcp/tcp_transport.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>

namespace tessera {
namespace {

constexpr uint64_t kConnectMagic = 0x74657373746370ull;  // "tesstcp"

struct ConnectHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t stream;
};

struct MessageHeader {
  uint64_t bytes;
  uint64_t sequence;
};

// Per-stream progress of one message in one direction.
struct StreamCursor {
  size_t chunk = 0;       // current chunk index carried by this stream
  size_t offset = 0;      // bytes of that chunk moved
  size_t header_done = 0; // stream 0 only: header bytes moved
};

class TcpLink : public Link {
 public:
  TcpLink(int peer, std::vector<Socket> streams, size_t chunk_bytes)
      : Link(peer), streams_(std::move(streams)), chunk_(chunk_bytes) {
    send_.resize(streams_.size());
    recv_.resize(streams_.size());
    staging_.resize(streams_.size());
  }

  const char* kind() const override { return "tcp"; }

  void BeginSend(const void* data, size_t len) override {
    send_data_ = static_cast<const char*>(data);
    send_len_ = len;
    send_moved_ = 0;
    send_header_ = MessageHeader{len, send_seq_++};
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

  Status ProgressSend(bool* progressed, bool* done) override {
    *progressed = false;
    for (size_t s = 0; s < streams_.size(); ++s) {
      StreamCursor& c = send_[s];
      for (;;) {
        const size_t begin = c.chunk * chunk_;
        const bool need_header = s == 0 && c.header_done < sizeof(MessageHeader);
        if (begin >= send_len_ && !need_header) break;
        const size_t piece = begin >= send_len_ ? 0 : std::min(chunk_, send_len_ - begin) - c.offset;
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
    for (size_t s = 0; s < streams_.size(); ++s) {
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
            if (recv_header_.bytes != recv_len_ || recv_header_.sequence != recv_seq_) {
              return InvalidUsage("message size mismatch: rank " + std::to_string(peer()) + " sent " +
                                  std::to_string(recv_header_.bytes) + " bytes, this rank expected " +
                                  std::to_string(recv_len_) + " (do all ranks pass the same count and datatype?)");
            }
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
    *done = recv_moved_ == recv_len_ && recv_[0].header_done == sizeof(MessageHeader);
    return Status::Ok();
  }

  void AddWaits(WaitSet* set, bool sending, bool receiving) override {
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (sending && (send_[s].chunk * chunk_ < send_len_ || (s == 0 && send_[0].header_done < sizeof(MessageHeader)))) {
        set->AddFd(streams_[s].fd(), POLLOUT);
      }
      if (receiving && (recv_[s].chunk * chunk_ < recv_len_ || (s == 0 && recv_[0].header_done < sizeof(MessageHeader)))) {
        set->AddFd(streams_[s].fd(), POLLIN);
      }
    }
  }

  size_t sent_bytes() const override { return send_moved_; }
  size_t received_bytes() const override { return recv_moved_; }

 private:
  std::vector<Socket> streams_;
  const size_t chunk_;
  std::vector<StreamCursor> send_, recv_;
  std::vector<std::vector<char>> staging_;
  const char* send_data_ = nullptr;
  size_t send_len_ = 0, send_moved_ = 0;
  MessageHeader send_header_{0, 0};
  uint64_t send_seq_ = 0;
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  size_t recv_len_ = 0, recv_moved_ = 0;
  MessageHeader recv_header_{0, 0};
  uint64_t recv_seq_ = 0;
};

}  // namespace

TcpTransport::TcpTransport(const Options& options, int my_rank, uint64_t secret, Socket listener,
                           std::vector<SocketAddress> peers)
    : options_(options), my_rank_(my_rank), secret_(secret), listener_(std::move(listener)), peers_(std::move(peers)) {}

Status TcpTransport::AcceptFrom(int peer, const Deadline& deadline, std::vector<Socket>* streams) {
  const int want = static_cast<int>(options_.streams);
  streams->resize(want);
  int have = 0;
  for (int k = 0; k < want; ++k) {
    auto it = stash_.find({peer, k});
    if (it != stash_.end()) {
      (*streams)[k] = std::move(it->second);
      stash_.erase(it);
      ++have;
    }
  }
  while (have < want) {
    Socket s;
    Status st = Accept(listener_, deadline, &s);
    if (st.code() == Code::kTimeout) {
      return TimeoutError("waiting for rank " + std::to_string(peer) + " to connect (" + std::to_string(have) +
                          " of " + std::to_string(want) + " streams arrived)");
    }
    TESSERA_RETURN_IF_ERROR(st);
    ConnectHello hello{};
    if (!RecvAll(s, &hello, sizeof(hello), Deadline::AfterMs(std::min(deadline.RemainingMs(), 5000))).ok() ||
        hello.magic != kConnectMagic || hello.secret != secret_ || hello.rank < 0 ||
        hello.rank >= static_cast<int>(peers_.size()) || hello.stream < 0 || hello.stream >= want) {
      continue;  // not one of ours: drop it
    }
    if (hello.rank == peer) {
      (*streams)[hello.stream] = std::move(s);
      ++have;
    } else {
      stash_[{hello.rank, hello.stream}] = std::move(s);
    }
  }
  return Status::Ok();
}

Status TcpTransport::Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) {
  std::vector<Socket> streams;
  const std::string where = "tcp connection with rank " + std::to_string(peer) + " at " + peers_[peer].ToString();
  if (my_rank_ < peer) {
    for (int k = 0; k < options_.streams; ++k) {
      Socket s;
      TESSERA_RETURN_IF_ERROR(tessera::Connect(peers_[peer], deadline, &s).Annotate(where));
      ConnectHello hello{kConnectMagic, secret_, my_rank_, k};
      TESSERA_RETURN_IF_ERROR(SendAll(s, &hello, sizeof(hello), deadline).Annotate(where));
      streams.push_back(std::move(s));
    }
  } else {
    TESSERA_RETURN_IF_ERROR(AcceptFrom(peer, deadline, &streams).Annotate(where));
  }
  *out = std::make_unique<TcpLink>(peer, std::move(streams), static_cast<size_t>(options_.chunk_bytes));
  return Status::Ok();
}

}  // namespace tessera
