// The transport seam. Algorithms (collectives/) see only Links: one per peer, each able
// to carry one message at a time in each direction. A message is sent from a buffer and
// received either as a copy into a buffer or as a reduction (dst = acc op incoming), so
// a transport can reduce straight out of its own staging memory (a shared-memory slot,
// a socket buffer) without an extra copy. Which transport backs a Link (shm, tcp, ucx,
// ibverbs; cuda_ipc for device-resident calls) is decided per peer by the LinkTable;
// algorithms never know.
//
// Links are driven by the Exchange engine (transport/exchange.h) without blocking:
// Begin* starts a message, Progress* moves as much as it can right now, and AddWaits
// tells the engine what to sleep on when nothing moves. Messages carry the stamp of the
// call they belong to where the wire has room (SetCall), so ranks in different calls
// fail instead of hanging or corrupting data.
#ifndef TESSERA_TRANSPORT_TRANSPORT_H_
#define TESSERA_TRANSPORT_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <poll.h>

#include "base/call_stamp.h"
#include "base/deadline.h"
#include "base/status.h"
#include "base/types.h"
#include "elementwise/reducer.h"

namespace tessera {

// What a rank with stalled links sleeps on: sockets and/or one wake-up word in shared
// memory that peers bump and futex-wake when they publish data for this rank (the
// shared-memory transport's doorbell, transport/shm/doorbell.h). `sleepers` counts the
// ranks asleep on `bell`, so a peer wakes them only when someone sleeps.
class WaitSet {
 public:
  void AddFd(int fd, short events) { fds_.push_back(pollfd{fd, events, 0}); }
  void AddWakeWord(std::atomic<uint32_t>* bell, std::atomic<uint32_t>* sleepers) {
    bell_ = bell;
    sleepers_ = sleepers;
  }
  void Clear() {
    fds_.clear();
    bell_ = nullptr;
    sleepers_ = nullptr;
  }

  // The protocol: token = Announce(); re-check for progress; if none, Sleep(token, us);
  // always Retire() afterwards. Announcing before the re-check makes a ring that
  // happens in between wake the sleep (no lost wake-up).
  uint32_t Announce();
  void Sleep(uint32_t token, int64_t max_us);
  void Retire();

 private:
  std::vector<pollfd> fds_;
  std::atomic<uint32_t>* bell_ = nullptr;
  std::atomic<uint32_t>* sleepers_ = nullptr;
};

class Link;
class HostBoard;

// A way to reach peers (shm, tcp, ...). The LinkTable asks each transport, in priority
// order, whether it can reach a peer, and lets the first that can create the Link.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool CanConnect(int peer) const = 0;
  // Blocks until the link to `peer` is set up on both sides, or the deadline.
  virtual Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) = 0;

  // Failure propagation. When this rank's communicator breaks, PublishFailure tells the
  // peers this transport links to why (best effort, bounded time), so that they fail at
  // once with the root cause instead of timing out on this rank.
  virtual void PublishFailure(const Status& failure) { (void)failure; }
  // Adds what a rank waiting in an exchange should also wake for (incoming notices).
  virtual void AddNoticeWaits(WaitSet* set) { (void)set; }
  // A peer's published failure (its code, "rank N failed: <reason>") if one has
  // arrived, waiting up to wait_ms for it; else OK.
  virtual Status CheckNotices(int wait_ms) { (void)wait_ms; return Status::Ok(); }

  // A board of every rank on this host that the transport reaches (host_board.h), or
  // null (the shared-memory transport keeps one).
  virtual HostBoard* board() { return nullptr; }
};

class Link {
 public:
  explicit Link(int peer) : peer_(peer) {}
  virtual ~Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int peer() const { return peer_; }
  virtual const char* kind() const = 0;  // "shm", "tcp", ...

  // Whether the peer takes the next message begun with BeginSend as a copy (a receive
  // without reducer), not a reduction: the algorithm's hint, which the Exchange engine
  // sets before each BeginSend (Transfer::ToCopy). A transport may then let the
  // receiver read the sender's buffer itself (shm's single copy), the send done only
  // once it has; a reducing receiver is fed faster through staging memory.
  void set_peer_copies(bool copies) { peer_copies_ = copies; }

  // The call that the messages begun from now on belong to (base/call_stamp.h): the
  // collective's stamp, all zero outside collectives or with TESSERA_CHECK_CALLS=0; the
  // Exchange engine sets it before it begins a link's messages, and it holds for both
  // directions. A link whose wire has room sends it with every message and, when a
  // message's header arrives, compares the sender's with its own before any of the
  // message is reduced into the destination (a copy's first bytes may already be there
  // where they come with the header): on a difference the receive fails with
  // MismatchedCalls (InvalidUsage naming both ranks and both calls). shm and tcp carry
  // the whole stamp; ucx an 8-bit digest in its tags (MismatchedCallDigest: the error
  // names this rank's call only); ibverbs and cuda_ipc nothing (this default ignores it).
  // The cost is a few stores per message and a 24-byte compare per received message.
  virtual void SetCall(const CallStamp& call) { (void)call; }

  // Start a message. At most one send and one receive are active per link; the peer
  // must post the matching operation with the same length (mismatches are detected and
  // reported where the wire format allows). Zero-length messages are not sent at all.
  virtual void BeginSend(const void* data, size_t len) = 0;
  // dst = incoming when reducer is null, else dst = reducer(acc, incoming).
  virtual void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) = 0;

  // Move the active message forward without blocking. *progressed is set when anything
  // moved, *done when the message is complete (its buffer may then be reused). A send
  // moves only the first `available` bytes of its message (the rest is still being
  // produced, e.g. received from another peer), so a ring can forward a block chunk by
  // chunk while it arrives.
  virtual Status ProgressSend(size_t available, bool* progressed, bool* done) = 0;
  virtual Status ProgressRecv(bool* progressed, bool* done) = 0;

  // What to sleep on while the active send and/or receive cannot move.
  virtual void AddWaits(WaitSet* set, bool sending, bool receiving) = 0;

  // Wakes the peer if it sleeps on what ProgressSend/ProgressRecv made visible since the
  // last Flush. A link may leave that wake-up until Flush (shm's doorbell costs a full
  // fence, next to free once the data's stores have left the core), so whoever drives
  // the progress calls flushes before it sleeps and before it stops driving them.
  virtual void Flush() {}

  // A slow check that the peer process is still alive, for links whose medium does not
  // report a dead peer by itself. Called by the engine while it sleeps.
  virtual Status CheckPeer() { return Status::Ok(); }

  // Bytes of the active message moved so far, for error messages.
  virtual size_t sent_bytes() const = 0;
  virtual size_t received_bytes() const = 0;
  // Length of the prefix of the active receive's destination that holds final data
  // (received, and reduced when reducing). May lag received_bytes().
  virtual size_t ready_bytes() const = 0;

 protected:
  bool peer_copies() const { return peer_copies_; }

 private:
  const int peer_;
  bool peer_copies_ = false;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_TRANSPORT_H_
