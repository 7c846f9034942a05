#include "transport/shm/shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "transport/host_board.h"
#include "transport/peer_process.h"
#include "transport/shm/doorbell.h"
#include "transport/wait_loop.h"

namespace tessera {
namespace {

constexpr uint64_t kSegmentMagic = 0x74657373736d3031ull;  // "tesssm01"
constexpr size_t kLine = 64;

struct SegmentHeader {
  std::atomic<uint64_t> magic;  // written last, with release, once the segment is ready
  uint64_t slot_bytes;
  uint64_t slots;
  uint64_t channels;
  uint64_t board_bytes;  // of each of the two board slots after the channels (0: none)
  uint64_t owner_address;  // where the owner maps this segment (CanReadPeer)
  alignas(kLine) Doorbell doorbell;
  // Set (with a reason) when the owner's communicator broke, so local peers blocked on
  // it fail at once with the root cause instead of timing out.
  alignas(kLine) std::atomic<uint32_t> failed;
  int32_t failure_code;
  int64_t failed_us;  // NowMicros() (monotonic: comparable between the host's ranks)
  char failure[512];
  // Then, one flag per local rank: that rank has mapped this segment. They sit in the
  // header's pages, so set-up touches a host's segments n times, not each channel's
  // page n^2 times.
};
using AttachedFlag = std::atomic<uint32_t>;

struct ChannelHeader {
  alignas(kLine) std::atomic<uint64_t> head;  // slots published by the sender
  alignas(kLine) std::atomic<uint64_t> tail;  // slots released by the receiver
};

// The first line of a slot. `published` is written last, with release: the slot's
// number in the channel plus one once it holds data, so the receiver polls the line it
// then reads (not `head`). A piece of up to kInlineBytes travels in the line itself
// (`inline_bytes`), so a small message crosses between cores as one line, not two: a
// second line's trip between cores far apart costs a large part of a small call. A
// message's first slot carries the sender's call
// (Link::SetCall): its digest, which the receiver compares with its own, and the whole
// stamp, read only when the digests differ, in the line after an inline piece's header
// and in its own line after a larger one's (SenderCall).
constexpr size_t kInlineBytes = 32;
struct SlotHeader {
  std::atomic<uint64_t> published;
  uint64_t message_bytes;
  uint64_t offset;
  uint64_t call_digest;
  union {
    CallStamp call;  // pieces of more than kInlineBytes
    char inline_bytes[kInlineBytes];
  };
};
static_assert(sizeof(SlotHeader) <= kLine, "a slot's header fits its first line");

// Whether a piece of `piece` bytes travels in its slot's first line (Ring::payload).
bool InlinePiece(uint64_t piece) { return piece <= kInlineBytes; }

// A single-copy piece (TESSERA_SHM_SINGLE_COPY_BYTES) sets this bit of its header's
// `offset` and carries, in its slot's second line, where its bytes are in the sender's
// memory (SingleCopyPiece) instead of the bytes; the receiver reads them with
// process_vm_readv. Its size is the sender's: all that is left of the message where
// all of it is there, one system call; a slot's bytes where a gated send forwards what
// is still arriving.
constexpr uint64_t kSingleCopyBit = uint64_t{1} << 63;
struct SingleCopyPiece {
  uint64_t address;
  uint64_t bytes;
};
uint64_t PieceOffset(const SlotHeader* h) { return h->offset & ~kSingleCopyBit; }
bool IsSingleCopy(const SlotHeader* h) { return (h->offset & kSingleCopyBit) != 0; }
// The second line of the slot headed by `h`: a larger piece's bytes, or a single-copy
// piece's address.
char* SecondLine(SlotHeader* h) { return reinterpret_cast<char*>(h) + kLine; }

// A stamp's digest: equal stamps give equal digests, and stamps that differ in any
// field differ in their digest but for chances of one in 2^64.
uint64_t DigestOf(const CallStamp& c) {
  const uint64_t fields = uint64_t{c.seq} | uint64_t{c.kind} << 32 | uint64_t{c.type} << 40 |
                          uint64_t{c.op} << 48 | uint64_t{c.flags} << 56;
  uint64_t d = c.count * 0x9e3779b97f4a7c15ull;
  d = (d ^ (d >> 31) ^ fields) * 0xbf58476d1ce4e5b9ull;
  d = (d ^ (d >> 29) ^ static_cast<uint32_t>(c.root)) * 0x94d049bb133111ebull;
  return d ^ (d >> 32);
}

// Where a message of `message_bytes` holds the sender's whole stamp in its first slot
// `h`: in the slot's line after the header when the piece is inline. The size is the
// sender's (a receiver passes h->message_bytes), so a receiver expecting another size
// still finds the stamp.
CallStamp* SenderCall(SlotHeader* h, uint64_t message_bytes, size_t slot_bytes) {
  char* after_header = reinterpret_cast<char*>(h) + kLine;
  return InlinePiece(std::min<uint64_t>(message_bytes, slot_bytes)) ? reinterpret_cast<CallStamp*>(after_header)
                                                                     : &h->call;
}

// The first line of a board slot (transport/host_board.h): the owner writes the bytes,
// then `bytes` and `call`, then releases `round`.
struct BoardSlotHeader {
  std::atomic<uint64_t> round;
  uint64_t bytes;
  CallStamp call;
};
static_assert(sizeof(BoardSlotHeader) <= kLine, "a board slot's header fits its first line");
// Where a board slot's bytes begin: in the header's line, right after it (8-aligned, as
// every element type needs), and on through the kLine + board_bytes the slot has.
constexpr size_t kBoardPayloadOffset = (sizeof(BoardSlotHeader) + 7) / 8 * 8;

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
size_t HeaderBytes(size_t channels) {
  return RoundUp(sizeof(SegmentHeader) + channels * sizeof(AttachedFlag), 4096);
}
size_t SlotStride(size_t slot_bytes) { return kLine + slot_bytes; }
size_t ChannelStride(size_t slot_bytes, size_t slots) { return sizeof(ChannelHeader) + slots * SlotStride(slot_bytes); }
size_t BoardOffset(size_t channels, size_t slot_bytes, size_t slots) {
  return HeaderBytes(channels) + channels * ChannelStride(slot_bytes, slots);
}
size_t SegmentBytes(size_t channels, size_t slot_bytes, size_t slots, size_t board_bytes) {
  return BoardOffset(channels, slot_bytes, slots) + (board_bytes > 0 ? 2 * (kLine + board_bytes) : 0);
}

// The failure that rank `rank` published in its segment header `h` (its code, "rank N
// failed: <reason>"); call once h->failed is seen set.
Status PublishedFailure(const SegmentHeader* h, int rank) {
  // The peer's memory: a code that is no failure code (0 would read as success) is
  // RemoteError, and the text is read at most to the end of its array.
  char reason[sizeof(h->failure)];
  std::memcpy(reason, h->failure, sizeof(reason));
  return PeerFailure(rank, FailureFromWire(h->failure_code, reason, sizeof(reason)));
}

// Whether local rank `rank` (process `pid`, `pidfd`), owner of segment header `h`, has
// published a failure or exited: the slow check of a peer a rank waits for.
Status CheckLocalPeer(const SegmentHeader* h, int rank, int pid, int pidfd) {
  if (h->failed.load(std::memory_order_acquire) != 0) return PublishedFailure(h, rank);
  if (PeerExited(pidfd)) return RemoteError("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") exited");
  return Status::Ok();
}

// Whether this process can read the memory of local peer `pid`, owner of the segment
// headed by `h` (single copy): reads the header's owner_address through the owner's own
// mapping. Fails where ptrace rules forbid it (another user, Yama's ptrace_scope, a
// seccomp filter) or the pid is of another pid namespace.
bool CanReadPeer(int pid, const SegmentHeader* h) {
  const uintptr_t field = reinterpret_cast<uintptr_t>(&h->owner_address) - reinterpret_cast<uintptr_t>(h);
  uint64_t seen = 0;
  iovec local{&seen, sizeof(seen)};
  iovec remote{reinterpret_cast<void*>(h->owner_address + field), sizeof(seen)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(seen)) &&
         seen == h->owner_address;
}

}  // namespace

struct ShmTransport::Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, bytes);
  }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base); }
  // Whether local rank `index` has mapped this segment.
  AttachedFlag* attached(size_t index) const {
    return reinterpret_cast<AttachedFlag*>(static_cast<char*>(base) + sizeof(SegmentHeader)) + index;
  }
  ChannelHeader* channel(size_t index) const {
    const SegmentHeader* h = header();
    return reinterpret_cast<ChannelHeader*>(static_cast<char*>(base) + HeaderBytes(h->channels) +
                                            index * ChannelStride(h->slot_bytes, h->slots));
  }
  // The board slot of rounds of this parity (the segment has one: board_bytes > 0); its
  // bytes follow the header line.
  BoardSlotHeader* board_slot(uint64_t parity) const {
    const SegmentHeader* h = header();
    return reinterpret_cast<BoardSlotHeader*>(static_cast<char*>(base) +
                                              BoardOffset(h->channels, h->slot_bytes, h->slots) +
                                              parity * (kLine + h->board_bytes));
  }
};

namespace {

// One direction's ring, as seen by one side.
struct Ring {
  ChannelHeader* ch = nullptr;
  char* slots = nullptr;
  size_t slot_bytes = 0;
  size_t nslots = 0;
  SlotHeader* slot_at(size_t index) const { return reinterpret_cast<SlotHeader*>(slots + index * SlotStride(slot_bytes)); }
  SlotHeader* slot_header(uint64_t n) const { return slot_at(n % nslots); }
  // Where the piece of `piece` bytes of the slot headed by `h` is: in its first line
  // when small enough.
  static char* payload(SlotHeader* h, size_t piece) { return InlinePiece(piece) ? h->inline_bytes : SecondLine(h); }
  // The index after `index`, round the ring (links keep their slots' indices: a division
  // per poll delayed seeing the peer's message).
  size_t next(size_t index) const { return index + 1 == nslots ? 0 : index + 1; }
};

// Maps the pages of `ring`'s slots into this process, writable, allocating those not yet
// allocated (MADV_POPULATE_WRITE, kernels from 5.14), then reads one byte of each page,
// which on virtual machines that shadow page tables is what maps it there. A message's
// first touch of a page costs about 10 us on such machines, paid by the calls at every
// new size otherwise (docs/performance.md#first-touch). Reads only bytes inside the
// range and drops them: a peer may be writing its channel meanwhile, and such a read is
// a touch, not a use, so ThreadSanitizer (whose tests run ranks as threads) is told not
// to watch it. Best effort: a kernel without MADV_POPULATE_WRITE, or a full /dev/shm,
// leaves the pages to be faulted in by the messages that first reach them, and nothing
// is read.
__attribute__((no_sanitize("thread"))) void Prefault(const Ring& ring) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(ring.slots);
  const uintptr_t hi = lo + ring.nslots * SlotStride(ring.slot_bytes);
  if (lo >= hi || page == 0) return;
  const uintptr_t first = lo / page * page;
#ifdef MADV_POPULATE_WRITE
  if (madvise(reinterpret_cast<void*>(first), hi - first, MADV_POPULATE_WRITE) != 0) return;
  for (uintptr_t a = first; a < hi; a += page) (void)*reinterpret_cast<const volatile char*>(std::max(a, lo));
#endif
}

Ring RingOf(const ShmTransport::Mapping& m, size_t channel) {
  Ring r;
  r.ch = m.channel(channel);
  r.slots = reinterpret_cast<char*>(r.ch) + sizeof(ChannelHeader);
  r.slot_bytes = m.header()->slot_bytes;
  r.nslots = m.header()->slots;
  return r;
}

// Whether `m`'s owner, found by a rank in call `mine`, is in another call of the same
// sequence number on its board (it chose the board, this rank links: the calls
// differ in size). Its latest round's header is stable: the owner writes the next
// one's only after every rank, this one too, posted on the board.
Status CheckBoardCall(const ShmTransport::Mapping& m, int my_rank, const CallStamp& mine, int peer) {
  if (m.header()->board_bytes == 0 || mine.seq == 0) return Status::Ok();
  const BoardSlotHeader* a = m.board_slot(0);
  const BoardSlotHeader* b = m.board_slot(1);
  const BoardSlotHeader* latest =
      a->round.load(std::memory_order_acquire) > b->round.load(std::memory_order_acquire) ? a : b;
  if (latest->round.load(std::memory_order_acquire) == 0) return Status::Ok();
  const CallStamp theirs = latest->call;
  if (theirs.seq == mine.seq && theirs != mine) return MismatchedCalls(my_rank, mine, peer, theirs);
  return Status::Ok();
}

class ShmLink : public Link {
 public:
  // Messages of at least `single_copy_bytes` are sent by single copy (0: none).
  ShmLink(int my_rank, int peer, int peer_pid, int pidfd, Ring out, Ring in, Doorbell* mine,
          const ShmTransport::Mapping* theirs, size_t single_copy_bytes)
      : Link(peer), my_rank_(my_rank), peer_pid_(peer_pid), pidfd_(pidfd), out_(out), in_(in), mine_(mine),
        peer_map_(theirs), peer_header_(theirs->header()), theirs_(&peer_header_->doorbell),
        single_copy_bytes_(single_copy_bytes) {
    // Both sides start from the counters as they are (fresh segments hold zero).
    send_head_ = out_.ch->head.load(std::memory_order_relaxed);
    send_tail_ = out_.ch->tail.load(std::memory_order_relaxed);
    recv_tail_ = in_.ch->tail.load(std::memory_order_relaxed);
    send_index_ = send_head_ % out_.nslots;
    recv_index_ = recv_tail_ % in_.nslots;
  }

  const char* kind() const override { return "shm"; }

  void SetCall(const CallStamp& call) override {
    call_ = call;
    call_digest_ = DigestOf(call);
  }

  void BeginSend(const void* data, size_t len) override {
    send_data_ = static_cast<const char*>(data);
    send_len_ = len;
    send_off_ = 0;
    // Messages larger than the ring go through slots: there both ranks copy at once,
    // and the slots stay in cache, where a single copy of megabytes pins every page.
    send_single_ = single_copy_bytes_ > 0 && peer_copies() && len >= single_copy_bytes_ && len > kInlineBytes &&
                   len <= out_.nslots * out_.slot_bytes;
  }

  void BeginRecv(void* dst, size_t len, const void* acc, const Reducer* reducer) override {
    recv_dst_ = static_cast<char*>(dst);
    recv_acc_ = static_cast<const char*>(acc);
    recv_reducer_ = reducer;
    recv_len_ = len;
    recv_off_ = 0;
  }

  Status ProgressSend(size_t available, bool* progressed, bool* done) override {
    *progressed = false;
    // The receiver's tail is read only when the ring looks full (a line it writes).
    if (send_head_ - send_tail_ >= out_.nslots) send_tail_ = out_.ch->tail.load(std::memory_order_acquire);
    // A full slot, or the end of the message: never a sliver of a gated message.
    size_t piece = std::min(out_.slot_bytes, send_len_ - send_off_);
    if (send_single_ && available == send_len_) piece = send_len_ - send_off_;
    if (piece > 0 && send_head_ - send_tail_ < out_.nslots && send_off_ + piece <= available) {
      // The header's line last, its stores back to back: the receiver polls that line,
      // and a store to another line between two of them (a miss) lets the receiver's
      // poll take the line back, so the next store fetches it again.
      SlotHeader* h = out_.slot_at(send_index_);
      if (send_single_) {
        const SingleCopyPiece where{reinterpret_cast<uintptr_t>(send_data_ + send_off_), piece};
        std::memcpy(SecondLine(h), &where, sizeof(where));
      } else {
        std::memcpy(Ring::payload(h, piece), send_data_ + send_off_, piece);
      }
      if (send_off_ == 0) *SenderCall(h, send_len_, out_.slot_bytes) = call_;
      h->message_bytes = send_len_;
      h->offset = send_off_ | (send_single_ ? kSingleCopyBit : 0);
      if (send_off_ == 0) h->call_digest = call_digest_;
      h->published.store(send_head_ + 1, std::memory_order_release);
      out_.ch->head.store(++send_head_, std::memory_order_release);
      send_index_ = out_.next(send_index_);
      ring_pending_ = true;
      send_off_ += piece;
      *progressed = true;
    }
    // A single-copy message's buffer is the receiver's to read until it has freed the
    // slot of every piece.
    if (send_single_ && send_off_ == send_len_ && send_tail_ != send_head_) {
      send_tail_ = out_.ch->tail.load(std::memory_order_acquire);
      *progressed |= send_tail_ == send_head_;
    }
    *done = send_off_ == send_len_ && (!send_single_ || send_tail_ == send_head_);
    return Status::Ok();
  }

  Status ProgressRecv(bool* progressed, bool* done) override {
    *progressed = false;
    SlotHeader* h = in_.slot_at(recv_index_);
    if (h->published.load(std::memory_order_acquire) == recv_tail_ + 1) {
      if (recv_off_ == 0 && PieceOffset(h) == 0 && h->call_digest != call_digest_) {
        return MismatchedCalls(my_rank_, call_, peer(), *SenderCall(h, h->message_bytes, in_.slot_bytes));  // before anything is consumed
      }
      if (h->message_bytes != recv_len_ || PieceOffset(h) != recv_off_) {
        return InvalidUsage("message size mismatch: rank " + std::to_string(peer()) + " sent " +
                            std::to_string(h->message_bytes) + " bytes (piece at " + std::to_string(PieceOffset(h)) +
                            "), this rank expected " + std::to_string(recv_len_) +
                            " (do all ranks pass the same count and datatype?)");
      }
      size_t piece = std::min(in_.slot_bytes, recv_len_ - recv_off_);
      const char* src = Ring::payload(h, piece);
      if (IsSingleCopy(h)) {
        TESSERA_RETURN_IF_ERROR(ReadPiece(h, &piece));
      } else if (recv_reducer_ != nullptr) {
        recv_reducer_->fn(recv_dst_ + recv_off_, recv_acc_ + recv_off_, src, piece / recv_reducer_->elem_size);
      } else {
        std::memcpy(recv_dst_ + recv_off_, src, piece);
      }
      in_.ch->tail.store(++recv_tail_, std::memory_order_release);
      recv_index_ = in_.next(recv_index_);
      ring_pending_ = true;
      recv_off_ += piece;
      *progressed = true;
    }
    *done = recv_off_ == recv_len_;
    return Status::Ok();
  }

  void AddWaits(WaitSet* set, bool, bool) override { mine_->AddTo(set); }

  // Reads single-copy piece `h` from the sender's memory, setting *piece to its size:
  // straight into the destination, or a slot's bytes at a time into the slot (this
  // rank's until it frees it) to reduce from there.
  Status ReadPiece(SlotHeader* h, size_t* piece) {
    SingleCopyPiece from;
    std::memcpy(&from, SecondLine(h), sizeof(from));
    if (from.bytes == 0 || from.bytes > recv_len_ - recv_off_) {
      return InvalidUsage("shm: rank " + std::to_string(peer()) + " sent a single-copy piece of " +
                          std::to_string(from.bytes) + " bytes at offset " + std::to_string(recv_off_) +
                          " of a message of " + std::to_string(recv_len_));
    }
    *piece = from.bytes;
    if (recv_reducer_ == nullptr) return ReadPeer(from.address, recv_dst_ + recv_off_, from.bytes);
    for (size_t done = 0; done < from.bytes;) {
      const size_t n = std::min<size_t>(in_.slot_bytes, from.bytes - done);
      TESSERA_RETURN_IF_ERROR(ReadPeer(from.address + done, SecondLine(h), n));
      recv_reducer_->fn(recv_dst_ + recv_off_ + done, recv_acc_ + recv_off_ + done, SecondLine(h),
                        n / recv_reducer_->elem_size);
      done += n;
    }
    return Status::Ok();
  }

  // Copies `n` bytes at `address` in the sender's memory to `to`.
  Status ReadPeer(uint64_t address, char* to, size_t n) {
    iovec local{to, n};
    iovec remote{reinterpret_cast<void*>(address), n};
    const ssize_t got = process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(n)) return Status::Ok();
    const std::string what = "shm: reading " + std::to_string(n) + " bytes of rank " + std::to_string(peer()) +
                             "'s buffer (pid " + std::to_string(peer_pid_) + ") by single copy";
    if (got >= 0) return RemoteError(what + " read " + std::to_string(got) + " bytes");
    return ErrnoError(what, errno);
  }

  // One ring for what both directions published since the last: rung at once, its
  // fence waited for the slot's line to reach the peer's core (on 2 ranks, a tenth of
  // an 8-byte allreduce).
  void Flush() override {
    if (!ring_pending_) return;
    ring_pending_ = false;
    theirs_->Ring();
  }

  Status CheckPeer() override {
    TESSERA_RETURN_IF_ERROR(CheckLocalPeer(peer_header_, peer(), peer_pid_, pidfd_));
    return CheckBoardCall(*peer_map_, my_rank_, call_, peer());
  }

  size_t sent_bytes() const override { return send_off_; }
  size_t received_bytes() const override { return recv_off_; }
  size_t ready_bytes() const override { return recv_off_; }

 private:
  const int my_rank_;
  const int peer_pid_;
  const int pidfd_;  // owned by the transport
  Ring out_, in_;
  Doorbell* mine_;
  const ShmTransport::Mapping* peer_map_;
  SegmentHeader* peer_header_;
  Doorbell* theirs_;
  uint64_t send_head_ = 0, recv_tail_ = 0;
  uint64_t send_tail_ = 0;  // the receiver's tail as last read
  size_t send_index_ = 0, recv_index_ = 0;  // send_head_ and recv_tail_'s slots (mod the slots)
  CallStamp call_;  // of this link's messages, both ways
  uint64_t call_digest_ = DigestOf(CallStamp{});
  bool ring_pending_ = false;  // published a slot or freed one since the last Flush
  const size_t single_copy_bytes_;
  const char* send_data_ = nullptr;
  size_t send_len_ = 0, send_off_ = 0;
  bool send_single_ = false;  // the active send goes by single copy
  char* recv_dst_ = nullptr;
  const char* recv_acc_ = nullptr;
  const Reducer* recv_reducer_ = nullptr;
  size_t recv_len_ = 0, recv_off_ = 0;
};

// The host board (transport/host_board.h) over every local rank's segment: a rank
// posts into its own segment's board slot and reads everyone's.
class ShmBoard : public HostBoard, public Waitable {
 public:
  ShmBoard(std::vector<const ShmTransport::Mapping*> maps, std::vector<ShmTransport::Member> members,
           std::vector<int> pidfds, size_t my_index)
      : maps_(std::move(maps)), members_(std::move(members)), pidfds_(std::move(pidfds)), my_(my_index),
        capacity_(maps_[my_]->header()->board_bytes) {
    for (const ShmTransport::Mapping* m : maps_) {
      for (uint64_t parity = 0; parity < 2; ++parity) slots_.push_back(m->board_slot(parity));
    }
  }

  int ranks() const override { return static_cast<int>(maps_.size()); }
  size_t capacity() const override { return capacity_; }
  char* NextSlot() override { return Payload(my_, round_ + 1); }
  Status Round(size_t bytes, const ExchangeOptions& options) override;
  const char* Slot(int index) const override { return Payload(static_cast<size_t>(index), round_); }

  bool Done() const override { return next_ == maps_.size(); }
  Status Progress(bool* moved) override;
  void AddWaits(WaitSet* set) override { maps_[my_]->header()->doorbell.AddTo(set); }
  void Flush() override {
    if (!ring_pending_) return;
    ring_pending_ = false;
    for (size_t i = 0; i < maps_.size(); ++i) {
      if (i != my_) maps_[i]->header()->doorbell.Ring();
    }
  }
  Status CheckPeers() override;
  void WaitingPeers(std::vector<int>* peers) const override {
    for (size_t i = next_; i < maps_.size(); ++i) {
      if (!Posted(i)) peers->push_back(members_[i].rank);
    }
  }
  std::string PendingSummary() const override {
    std::vector<int> peers;
    WaitingPeers(&peers);
    std::string out = "waiting on the host board (round " + std::to_string(round_) + ", " + std::to_string(bytes_) +
                      " bytes) for rank(s) ";
    for (size_t i = 0; i < peers.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(peers[i]);
    return out;
  }

 private:
  BoardSlotHeader* Header(size_t i, uint64_t round) const { return slots_[2 * i + (round & 1)]; }
  // The bytes start in the header's line, after it (kBoardPayloadOffset), so that a
  // round of up to 24 bytes reads one line of each peer's.
  char* Payload(size_t i, uint64_t round) const {
    return reinterpret_cast<char*>(Header(i, round)) + kBoardPayloadOffset;
  }
  bool Posted(size_t i) const { return Header(i, round_)->round.load(std::memory_order_acquire) == round_; }
  // A link message from local rank i that this rank has not taken, of another call.
  Status CheckInbound(size_t i) const;

  std::vector<const ShmTransport::Mapping*> maps_;  // by local index
  // Local rank i's slot of rounds of parity q at 2i + q, found once: each round looks
  // at every rank's a few times, and finding one reads its segment's header.
  std::vector<BoardSlotHeader*> slots_;
  std::vector<ShmTransport::Member> members_;
  std::vector<int> pidfds_;  // owned by the transport
  const size_t my_;
  const size_t capacity_;
  uint64_t round_ = 0;   // the round of the latest Round
  size_t next_ = 0;      // the ranks before it have posted round_, checked
  CallStamp call_;       // of this round
  size_t bytes_ = 0;
  bool ring_pending_ = false;  // posted since the peers' doorbells were last rung
};

Status ShmBoard::Round(size_t bytes, const ExchangeOptions& options) {
  if (bytes > capacity_) {
    return InternalError("host board round of " + std::to_string(bytes) + " bytes, more than its " +
                         std::to_string(capacity_));
  }
  ++round_;
  call_ = options.check_calls && options.stamp != nullptr ? *options.stamp : CallStamp{};
  bytes_ = bytes;
  BoardSlotHeader* own = Header(my_, round_);
  own->bytes = bytes;
  own->call = call_;
  own->round.store(round_, std::memory_order_release);
  ring_pending_ = true;  // rung by Flush, from the wait (as a link's doorbell)
  next_ = 0;
  return WaitFor(this, options);
}

Status ShmBoard::Progress(bool* moved) {
  *moved = false;
  for (; next_ < maps_.size(); ++next_) {
    if (next_ == my_) continue;  // this rank's own post, made by Round
    if (!Posted(next_)) return Status::Ok();
    const BoardSlotHeader* h = Header(next_, round_);
    const int rank = members_[next_].rank;
    if (h->call != call_) return MismatchedCalls(members_[my_].rank, call_, rank, h->call);
    if (h->bytes != bytes_) {
      return InvalidUsage("message size mismatch: rank " + std::to_string(rank) + " posted " +
                          std::to_string(h->bytes) + " bytes on the host board, this rank " + std::to_string(bytes_) +
                          " (do all ranks pass the same count and datatype?)");
    }
    *moved = true;
  }
  return Status::Ok();
}

Status ShmBoard::CheckPeers() {
  for (size_t i = next_; i < maps_.size(); ++i) {
    if (i == my_ || Posted(i)) continue;
    TESSERA_RETURN_IF_ERROR(CheckLocalPeer(maps_[i]->header(), members_[i].rank, members_[i].pid, pidfds_[i]));
    TESSERA_RETURN_IF_ERROR(CheckInbound(i));
  }
  return Status::Ok();
}

Status ShmBoard::CheckInbound(size_t i) const {
  if (call_.seq == 0) return Status::Ok();
  const Ring in = RingOf(*maps_[my_], i);
  const uint64_t tail = in.ch->tail.load(std::memory_order_acquire);
  if (in.ch->head.load(std::memory_order_acquire) == tail) return Status::Ok();
  SlotHeader* h = in.slot_header(tail);
  if (PieceOffset(h) != 0 || h->call_digest == DigestOf(call_)) return Status::Ok();
  return MismatchedCalls(members_[my_].rank, call_, members_[i].rank, *SenderCall(h, h->message_bytes, in.slot_bytes));
}

Status MapSegment(int fd, size_t bytes, const std::string& name, ShmTransport::Mapping* m) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return ErrnoError("mmap " + name, errno);
  m->base = p;
  m->bytes = bytes;
  return Status::Ok();
}

}  // namespace

std::string ShmTransport::NewSegmentName() {
  static std::atomic<uint64_t> counter{0};
  return "/tessera-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(NowMicros() % 1000000);
}

ShmTransport::RingShape ShmTransport::ShapeFor(const Options& options, size_t local_ranks) {
  constexpr size_t kMinSlotBytes = 4096;
  const size_t want = static_cast<size_t>(options.slot_bytes), slots = static_cast<size_t>(options.slots);
  const size_t budget = static_cast<size_t>(options.segment_bytes) - HeaderBytes(local_ranks);
  const size_t share = budget / std::max<size_t>(local_ranks, 1);
  const size_t per_channel = share > sizeof(ChannelHeader) ? share - sizeof(ChannelHeader) : 0;
  const size_t fit = per_channel / SlotStride(want);
  if (fit >= 2) return RingShape{want, std::min(slots, fit)};
  const size_t smaller = per_channel / 2 > kLine ? (per_channel / 2 - kLine) / kLine * kLine : 0;
  return RingShape{std::min(want, std::max(kMinSlotBytes, smaller)), 2};
}

Status ShmTransport::Create(const Options& options, int my_rank, const std::vector<Member>& local,
                            const Deadline& deadline, std::unique_ptr<ShmTransport>* out) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  TESSERA_RETURN_IF_ERROR(t->Init(options, my_rank, local, deadline).Annotate("shared-memory transport"));
  *out = std::move(t);
  return Status::Ok();
}

Status ShmTransport::Init(const Options& options, int my_rank, const std::vector<Member>& local,
                          const Deadline& deadline) {
  options_ = options;
  my_rank_ = my_rank;
  local_ = local;
  my_index_ = LocalIndex(my_rank);
  if (my_index_ < 0) return InternalError("this rank is not in its own host's rank list");
  const size_t n = local.size();
  const RingShape shape = ShapeFor(options, n);
  const size_t board_bytes = static_cast<size_t>(options.board_bytes);
  const size_t bytes = SegmentBytes(n, shape.slot_bytes, shape.slots, board_bytes);
  maps_.resize(n);
  pidfds_.assign(n, -1);

  // 1. Create and initialise our own segment.
  own_name_ = local[my_index_].segment;
  int fd = shm_open(own_name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("shm_open " + own_name_, errno);
  own_unlinked_ = false;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    return ErrnoError("ftruncate " + own_name_ + " to " + std::to_string(bytes) + " bytes (is /dev/shm full?)", e);
  }
  maps_[my_index_] = std::make_unique<Mapping>();
  Status s = MapSegment(fd, bytes, own_name_, maps_[my_index_].get());
  close(fd);
  TESSERA_RETURN_IF_ERROR(s);
  SegmentHeader* own = maps_[my_index_]->header();
  own->slot_bytes = shape.slot_bytes;
  own->slots = shape.slots;
  own->channels = n;
  own->board_bytes = board_bytes;
  own->owner_address = reinterpret_cast<uintptr_t>(own);
  own->magic.store(kSegmentMagic, std::memory_order_release);

  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) != my_index_) pidfds_[i] = OpenPeerPidfd(local[i].pid);
  }
  // Names every local peer that has exited while this rank still needs it (its segment
  // is not mapped yet, or it has not mapped ours), removing the names of their segments
  // in case they died holding one; "" when there are none. A peer that finished its
  // part of set-up and exited is no concern of ours.
  auto dead_peers = [&]() {
    std::string dead;
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(i) == my_index_) continue;
      const bool needed = !maps_[i] || maps_[my_index_]->attached(i)->load(std::memory_order_acquire) == 0;
      if (!needed || !PeerExited(pidfds_[i])) continue;
      shm_unlink(local[i].segment.c_str());
      dead += (dead.empty() ? "rank " : ", rank ") + std::to_string(local[i].rank) + " (pid " +
              std::to_string(local[i].pid) + ")";
    }
    return dead;
  };

  // 2. Map every local peer's segment (it may not exist yet: retry until the deadline).
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == my_index_) continue;
    const Member& peer = local[i];
    for (;;) {
      int pfd = shm_open(peer.segment.c_str(), O_RDWR | O_CLOEXEC, 0600);
      if (pfd >= 0) {
        struct stat st;
        if (fstat(pfd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) {
          maps_[i] = std::make_unique<Mapping>();
          s = MapSegment(pfd, bytes, peer.segment, maps_[i].get());
          close(pfd);
          TESSERA_RETURN_IF_ERROR(s);
          if (maps_[i]->header()->magic.load(std::memory_order_acquire) == kSegmentMagic) break;
          maps_[i].reset();
        } else {
          close(pfd);
        }
      } else if (errno != ENOENT) {
        return ErrnoError("shm_open " + peer.segment + " of rank " + std::to_string(peer.rank), errno);
      }
      if (std::string dead = dead_peers(); !dead.empty()) {
        return RemoteError(dead + " exited during shared-memory set-up (waiting for rank " +
                           std::to_string(peer.rank) + "'s segment)");
      }
      if (deadline.Expired()) {
        return TimeoutError("timed out waiting for the shared memory of rank " + std::to_string(peer.rank));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    SegmentHeader* h = maps_[i]->header();
    if (h->slot_bytes != shape.slot_bytes || h->slots != shape.slots || h->channels != n ||
        h->board_bytes != board_bytes) {
      return InvalidUsage("rank " + std::to_string(peer.rank) + " laid out its shared memory differently");
    }
    maps_[i]->attached(my_index_)->store(1, std::memory_order_release);
  }

  // 3. Once every peer has mapped our segment, remove its name: the memory lives on
  //    while mapped, and no process death can leave it behind. A peer that mapped it
  //    and has exited since is fine; one that died before mapping it fails set-up.
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == my_index_) continue;
    while (maps_[my_index_]->attached(i)->load(std::memory_order_acquire) == 0) {
      if (PeerExited(pidfds_[i])) {
        return RemoteError(dead_peers() + " exited during shared-memory set-up (before mapping this rank's segment)");
      }
      if (deadline.Expired()) {
        return TimeoutError("timed out waiting for rank " + std::to_string(local[i].rank) +
                            " to map this rank's shared memory");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  shm_unlink(own_name_.c_str());
  own_unlinked_ = true;
  if (board_bytes > 0) {
    std::vector<const Mapping*> maps;
    for (const auto& m : maps_) maps.push_back(m.get());
    board_ = std::make_unique<ShmBoard>(std::move(maps), local_, pidfds_, static_cast<size_t>(my_index_));
  }
  return Status::Ok();
}

ShmTransport::~ShmTransport() {
  if (!own_unlinked_) shm_unlink(own_name_.c_str());
  // A local peer that died before removing its segment's name (after every peer had
  // mapped the segment, so set-up did not fail on it) left the name in /dev/shm. Its
  // owner is gone and its name is in its card: remove it (ENOENT when it was removed).
  for (size_t i = 0; i < pidfds_.size(); ++i) {
    if (static_cast<int>(i) != my_index_ && PeerExited(pidfds_[i])) shm_unlink(local_[i].segment.c_str());
  }
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

void ShmTransport::PublishFailure(const Status& failure) {
  if (my_index_ < 0 || !maps_[my_index_]) return;
  SegmentHeader* own = maps_[my_index_]->header();
  if (own->failed.load(std::memory_order_acquire) != 0) return;
  own->failure_code = static_cast<int32_t>(failure.code());
  own->failed_us = NowMicros();
  std::strncpy(own->failure, failure.message().c_str(), sizeof(own->failure) - 1);
  own->failed.store(1, std::memory_order_release);
  for (size_t i = 0; i < maps_.size(); ++i) {
    if (static_cast<int>(i) != my_index_ && maps_[i]) maps_[i]->header()->doorbell.Ring();
  }
}

// The first failure published on this host is the root cause; the later ones are
// usually its echoes ("rank 3 failed: ... rank 2 failed: ..."), which may also have
// been cut to fit.
Status ShmTransport::CheckNotices(int) {
  const SegmentHeader* first = nullptr;
  int first_rank = -1;
  for (size_t i = 0; i < maps_.size(); ++i) {
    if (static_cast<int>(i) == my_index_ || !maps_[i]) continue;
    const SegmentHeader* h = maps_[i]->header();
    if (h->failed.load(std::memory_order_acquire) == 0) continue;
    if (first == nullptr || h->failed_us < first->failed_us) {
      first = h;
      first_rank = local_[i].rank;
    }
  }
  return first == nullptr ? Status::Ok() : PublishedFailure(first, first_rank);
}

int ShmTransport::LocalIndex(int rank) const {
  for (size_t i = 0; i < local_.size(); ++i) {
    if (local_[i].rank == rank) return static_cast<int>(i);
  }
  return -1;
}

bool ShmTransport::CanConnect(int peer) const { return peer != my_rank_ && LocalIndex(peer) >= 0; }

Status ShmTransport::Connect(int peer, const Deadline&, std::unique_ptr<Link>* out) {
  const int pi = LocalIndex(peer);
  if (pi < 0 || pi == my_index_) return InternalError("shm: rank " + std::to_string(peer) + " is not a local peer");
  // We send into the peer's segment on the channel indexed by us, and receive in ours
  // on the channel indexed by the peer.
  Ring out_ring = RingOf(*maps_[pi], my_index_);
  Ring in_ring = RingOf(*maps_[my_index_], pi);
  if (maps_[pi]->bytes <= static_cast<size_t>(options_.prefault_bytes)) {
    Prefault(out_ring);
    Prefault(in_ring);
  }
  const bool single_copy = options_.single_copy_bytes > 0 && CanReadPeer(local_[pi].pid, maps_[pi]->header());
  *out = std::make_unique<ShmLink>(my_rank_, peer, local_[pi].pid, pidfds_[pi], out_ring, in_ring,
                                   &maps_[my_index_]->header()->doorbell, maps_[pi].get(),
                                   single_copy ? static_cast<size_t>(options_.single_copy_bytes) : 0);
  return Status::Ok();
}

}  // namespace tessera
