// TCP transport between ranks on different hosts (or any ranks, with
// TESSERA_TRANSPORT=tcp).
//
// A link is `streams` non-blocking connections. A message is cut into chunks of
// `chunk_bytes`; chunk k travels on stream k % streams, so a large message keeps every
// stream busy while a small one uses stream 0 alone. Stream 0 carries a 40-byte header
// (length, sequence number, the sender's call stamp) before each message, sent in the
// same system call as the first chunk, so mismatched calls and a size mismatch between
// sender and receiver are reported, not silently absorbed. Received chunks land directly in the destination, or, when reducing, in a
// per-stream staging chunk that is reduced into the destination once complete.
//
// Connections are made lazily, the first time a peer is needed: the lower rank
// connects, the higher accepts (stashing connections from other peers until wanted).
#ifndef TESSERA_TRANSPORT_TCP_TCP_TRANSPORT_H_
#define TESSERA_TRANSPORT_TCP_TCP_TRANSPORT_H_

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/settings.h"
#include "base/socket.h"
#include "transport/plugin.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace tessera {

class TcpTransport : public Transport {
 public:
  // Defaults: the settings table's (TESSERA_TCP_STREAMS, TESSERA_TCP_CHUNK_BYTES,
  // TESSERA_TCP_CONGESTION).
  struct Options {
    int64_t streams = SettingDefaults::tcp_streams;
    int64_t chunk_bytes = SettingDefaults::tcp_chunk_bytes;
    // TCP congestion control of the link sockets; "system" keeps the kernel's default.
    std::string congestion = SettingDefaults::tcp_congestion;
  };

  // `listener` was opened before the rendezvous (its address is in every RankInfo);
  // `peers` holds every rank's listening address, indexed by rank. Checks once that the
  // kernel accepts options.congestion; if not, links keep the system's default and
  // congestion_note() says why.
  TcpTransport(const Options& options, int my_rank, uint64_t secret, Socket listener,
               std::vector<SocketAddress> peers);

  // Empty, or why the asked-for congestion control is not used.
  const std::string& congestion_note() const { return congestion_note_; }

  const char* name() const override { return "tcp"; }
  bool CanConnect(int peer) const override { return peer != my_rank_; }
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;

  // Failure notices travel on a fresh connection to each linked peer's listener, after
  // which this rank's link sockets are shut down.
  void PublishFailure(const Status& failure) override;
  void AddNoticeWaits(WaitSet* set) override;
  Status CheckNotices(int wait_ms) override;

 private:
  // A connection to the listener whose first bytes are still arriving (tcp_wire.h).
  struct PendingConnection {
    Socket socket;
    std::string bytes;  // what arrived so far
    Deadline deadline;  // dropped when still incomplete by then
  };

  Status AcceptFrom(int peer, const Deadline& deadline, std::vector<Socket>* streams);
  // Never blocks: accepts a connection if one waits, and reads what has arrived on the
  // pending ones, filing each complete one: a stream of a link goes to the stash, a
  // failure notice becomes the returned error. A client that sends garbage is dropped;
  // one that stalls holds nothing up and is dropped after a while. Sets *progressed
  // when a connection came or was filed or dropped.
  Status AcceptOne(bool* progressed);
  Status ReadPending(PendingConnection* p, bool* done);
  // Sleeps until the listener or a pending connection is readable, or timeout_ms.
  void PollListener(int timeout_ms);

  Options options_;
  std::string congestion_note_;
  const int my_rank_;
  const uint64_t secret_;
  Socket listener_;
  const std::vector<SocketAddress> peers_;
  std::vector<PendingConnection> pending_;
  std::map<std::pair<int, int>, Socket> stash_;  // (rank, stream) accepted before wanted
  std::vector<int> linked_peers_;                 // peers with a link, in connection order
  std::vector<int> link_fds_;                     // their sockets (owned by the links)
};

// The plugin (transport/plugin.h): Open opens the listener (TESSERA_SOCKET_IFNAME), the
// card is its address. Its settings that every rank must agree on (base/settings.h)
// are TESSERA_TCP_STREAMS and TESSERA_TCP_CHUNK_BYTES: both ends stripe a message the
// same way. TCP is the registry's control transport.
Status OpenTcpTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_TCP_TCP_TRANSPORT_H_
