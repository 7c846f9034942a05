// UCX transport: links over UCP (Unified Communication X), the portable path to RDMA.
// On an InfiniBand or RoCE cluster UCX moves the data with RDMA; on one host it uses
// shared memory (posix/sysv) and cross-memory attach (cma); otherwise TCP.
//
// Each transport (one per communicator rank) owns a UCP context and one worker, driven
// by one thread at a time (UCS_THREAD_MODE_SERIALIZED). Its worker address is published
// at the rendezvous; endpoints to peers are created from their addresses on first use
// (Connect), with peer error handling, so a peer that dies fails the endpoint instead
// of hanging it.
//
// A message travels as tagged sends of `chunk_bytes` chunks (the same on every rank).
// The tag names the sending rank, the link's message sequence number, the chunk index
// and whether the chunk is the last, so chunks match their own receive whatever order
// they complete in, and a sender and receiver that disagree on the length are caught
// (InvalidUsage naming the sender) from the chunk lengths and the last-chunk flag. It
// also carries an 8-bit digest of the sender's call stamp (Link::SetCall), which
// receives do not match on but check before a chunk is reduced: a chunk of another
// call fails the receive (mismatched calls) instead of waiting for a match that never
// comes; the tag has no room for the whole stamp, so the error names this rank's call
// only. Limits that follow from the tag: 2^18 ranks, 2^20 chunks per message. No
// receive is ever posted shorter than what the sender may send for it (a short last
// chunk is received only once probed), so UCX never truncates into user memory. A
// few chunks per direction are in flight at once (`chunks_in_flight`). Received chunks
// land directly in the destination; when reducing they land in a staging chunk (memory
// mapped with ucp_mem_map, so registered once for zero-copy) and are reduced into the
// destination as they complete, or, on eager links, are reduced fragment by fragment
// as UCX copies them out (transport/ucx/fragment_reduce.h). ready_bytes() is the
// completed contiguous prefix, so a gated sender forwards a block chunk by chunk while
// it arrives.
//
// User buffers are sent contiguously (UCP_DATATYPE_CONTIG). With RDMA, UCX chooses
// eager or rendezvous per chunk; its rendezvous protocol is the zero-copy path (RDMA
// read/write from and into user memory, registered through UCX's registration cache).
// Registering each user buffer ourselves would cost a registration per call that the
// cache already avoids. Without RDMA (`Options::eager`) every chunk goes eager: through
// shared memory or TCP UCX's rendezvous saves one copy but adds a round trip per chunk
// and leaves the receiver to copy and reduce alone, while eager chunks are copied by
// the sender as the receiver reduces the previous ones, so the two overlap. Eager chunks are taken in by the receiver's worker
// whether or not it waits for them, so eager links limit them with credits: a sender
// spends a chunk's bytes in 8 KiB units (at least one) from a window of
// `chunks_in_flight` chunks, and the receiver hands them back (a tagged count) each
// half window it takes in (for 8-byte messages, one credit message per 256).
//
// Waiting: while it polls, a link turns UCX's progress engine once a look, and a send
// only when it waits on something (its requests, or credits): over TCP a turn is an
// epoll_wait. The engine then sleeps on the worker's event fd (ucp_worker_get_efd,
// armed with ucp_worker_arm), so an idle rank spins no core. Failures: an endpoint
// error (UCX reports a dead peer through the error handler, within about a second
// thanks to a short keepalive interval) becomes RemoteError naming the peer;
// PublishFailure sends peers a failure notice as a tagged message.
//
// After a failed receive, its chunks already matched to rendezvous data are let arrive
// (bounded, about a second) before the failure is returned, while the destination is
// still the caller's. What could not be settled then marks the peer abandoned: the
// transport then closes every endpoint by force and never progresses the worker again,
// because UCX would still write that data into a buffer the caller may have freed. The
// communicator therefore must not use the transport again after a failure, except to
// publish it and to destroy it. Destruction is bounded in time (about a second),
// whatever state the peers are in.
#ifndef TESSERA_TRANSPORT_UCX_UCX_TRANSPORT_H_
#define TESSERA_TRANSPORT_UCX_UCX_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "transport/plugin.h"
#include "transport/transport.h"

namespace tessera {

class UcxTransport : public Transport {
 public:
  // Defaults: the settings table's (TESSERA_UCX_CHUNK_BYTES, TESSERA_UCX_CHUNKS_IN_FLIGHT).
  struct Options {
    // Pipelining unit (rounded up to a multiple of 64); the same on all ranks.
    int64_t chunk_bytes = SettingDefaults::ucx_chunk_bytes;
    // Per link and direction.
    int64_t chunks_in_flight = SettingDefaults::ucx_chunks_in_flight;
    // Every chunk eager (UCX_RNDV_THRESH=inf, unless the user set UCX_RNDV_THRESH): for
    // hosts without RDMA, where UCX's rendezvous costs a handshake per chunk to save a
    // copy the eager path overlaps. Off: UCX's own threshold.
    bool eager = false;
  };

  // Creates the UCP context and worker. UCX reads its own UCX_* environment variables
  // (UCX_TLS, UCX_NET_DEVICES, ...); on top of them, unless the user set them, the
  // transport shortens the keepalive interval (dead-peer detection), lets the
  // shared-memory transports take part in peer error handling, and with
  // `options.eager` raises the rendezvous threshold out of reach. Fails with SystemError
  // if UCX cannot start (the caller may then go without UCX).
  static Status Create(const Options& options, int my_rank, int nranks, std::unique_ptr<UcxTransport>* out);
  ~UcxTransport() override;

  // This rank's worker address: opaque bytes, a few hundred at most, to publish at the
  // rendezvous. Valid from Create on.
  const std::string& worker_address() const;

  // Every rank's worker address, indexed by rank (this rank's own entry is ignored; an
  // empty entry marks a rank without UCX, which CanConnect then refuses). Call once,
  // after the rendezvous and before the first Connect.
  Status SetPeerAddresses(std::vector<std::string> addresses);
  // The ranks of this host with their pids (after SetPeerAddresses): a link to one of
  // them fails as soon as its process has exited (checked by CheckPeer), which UCX's
  // shared-memory transports may not report while a FIFO to it is full.
  void WatchLocalPeers(const std::vector<LocalRank>& local);

  const char* name() const override { return "ucx"; }
  // True for any other rank whose address is known.
  bool CanConnect(int peer) const override;
  // Creates the endpoint (wire-up completes in the background with the first message,
  // so this does not wait for the peer) and the link. Fails if the address is unusable.
  // A peer UCX cannot reach (it exited) still gets a link whose sends fail at once and
  // whose receives take what the peer sent before going, then fail.
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;

  // Failure notices are tagged messages to every peer with an address (best effort,
  // bounded: half a second, 50 ms for ranks of this host, which take a notice at once
  // unless they are not draining their shared memory: stopped, hung, or full of eager
  // chunks they have not taken).
  void PublishFailure(const Status& failure) override;
  void AddNoticeWaits(WaitSet* set) override;
  Status CheckNotices(int wait_ms) override;

  // Defined in the .cc: the context and worker, and one peer's endpoint.
  struct Worker;
  struct Peer;

 private:
  UcxTransport();
  Status Init(const Options& options, int my_rank, int nranks);
  Status EnsureEndpoint(Peer* peer);
  // Closes every endpoint (by force when its peer failed, or all of them by force and
  // without progressing the worker), bounded in time.
  void CloseEndpoints(bool all_by_force);
  // Receives and drops messages nobody asked for (a failed exchange's, a notice), so
  // the worker goes away clean; bounded in time.
  void DiscardUnexpected();

  Options options_;
  int my_rank_ = -1;
  int nranks_ = 0;
  std::unique_ptr<Worker> worker_;
  std::string address_;                       // this worker's address
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; empty until SetPeerAddresses
  std::string notice_payload_;                // our failure notice: outlives its sends
  std::vector<void*> notice_requests_;
};

// The plugin (transport/plugin.h): the card is the worker address. Its settings that
// every rank must agree on (base/settings.h) are TESSERA_UCX_CHUNK_BYTES and
// TESSERA_UCX_CHUNKS_IN_FLIGHT: both ends of a link size the credit window from them
// (UcxLink::GrantCredits). In auto, UCX opens only on a host with an RDMA device that
// ibverbs could not open: elsewhere UCX would run over TCP, which tessera's own TCP
// does faster.
Status OpenUcxTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_UCX_UCX_TRANSPORT_H_
