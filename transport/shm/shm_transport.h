// Shared-memory transport between ranks on one host.
//
// Each rank owns one segment holding its doorbell and one inbound channel per local
// peer, at most TESSERA_SHM_SEGMENT_BYTES of them (ShapeFor: with many local ranks the
// rings shrink, so a host's segments grow with its ranks, not with their square). Only
// the channels of connected pairs are ever touched: on hosts of up to 15 ranks
// (TESSERA_SHM_PREFAULT_BYTES) both of a pair's channels are mapped whole when the
// pair connects, on larger hosts page by page as messages reach them. A channel is a
// ring of fixed-size slots: the sender copies a piece of its message into the next free
// slot and advances `head`; the receiver copies or reduces straight out of the slot
// into its destination and advances `tail`. Slots are reused,
// so they stay in the shared cache and a message costs one copy in and one pass out.
// Both sides ring the other's doorbell after moving a counter, so a sleeping rank
// wakes at once (futex) and an idle rank spins no core. A slot's first line is its
// header: the message's length, the piece's offset and, in a message's first slot, the
// sender's call stamp (Link::SetCall), which the receiver compares with its own before
// it consumes the slot.
//
// Single copy: a message whose receiver copies it (Link::set_peer_copies), from
// TESSERA_SHM_SINGLE_COPY_BYTES up to a ring's bytes, puts in each slot only the address
// of its piece in the sender's buffer; the receiver reads the piece from there with
// process_vm_readv (into its destination, or into the slot where it reduces after all),
// and the send is done once every slot is freed. Larger messages keep the slots, where
// both ranks copy at once and the ring stays in cache. Connect checks that this process
// may read the peer's memory (CanReadPeer); where not, the link uses slots only.
//
// Segments are unlinked as soon as every local peer has mapped them, so nothing is left
// in /dev/shm whatever happens to the processes afterwards. A dead peer is noticed
// through a pidfd while waiting.
#ifndef TESSERA_TRANSPORT_SHM_SHM_TRANSPORT_H_
#define TESSERA_TRANSPORT_SHM_SHM_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "transport/plugin.h"
#include "transport/transport.h"

namespace tessera {

class ShmTransport : public Transport {
 public:
  // Defaults: the settings table's (TESSERA_SHM_SLOT_BYTES, TESSERA_SHM_SLOTS,
  // TESSERA_SHM_SEGMENT_BYTES, TESSERA_SHM_BOARD_BYTES, TESSERA_SHM_PREFAULT_BYTES).
  struct Options {
    int64_t slot_bytes = SettingDefaults::shm_slot_bytes;
    int64_t slots = SettingDefaults::shm_slots;
    int64_t segment_bytes = SettingDefaults::shm_segment_bytes;
    int64_t board_bytes = SettingDefaults::shm_board_bytes;
    // Where segments are at most this many bytes, Connect maps the two channels of the
    // pair whole (TESSERA_SHM_PREFAULT_BYTES).
    int64_t prefault_bytes = SettingDefaults::shm_prefault_bytes;
    // Messages of at least this many bytes go by single copy where the link can
    // (TESSERA_SHM_SINGLE_COPY_BYTES; 0: never).
    int64_t single_copy_bytes = SettingDefaults::shm_single_copy_bytes;
  };
  // The rings of a host of `local_ranks` ranks: options' slots and slot size where the
  // channels of one segment fit in segment_bytes, else fewer slots (at least 2), else
  // smaller ones (multiples of 64, at least 4 KiB). The same on every rank of a host.
  struct RingShape {
    size_t slot_bytes;
    size_t slots;
  };
  static RingShape ShapeFor(const Options& options, size_t local_ranks);
  // A rank on this host (the caller included) and its segment.
  struct Member {
    int rank;
    int pid;
    std::string segment;  // its segment's name
  };

  // A segment name unique on this host, to advertise before the segment exists.
  static std::string NewSegmentName();

  // Creates this rank's segment, maps every local peer's, and unlinks its own once all
  // have mapped it. `local` lists the ranks of this host in rank order.
  static Status Create(const Options& options, int my_rank, const std::vector<Member>& local,
                       const Deadline& deadline, std::unique_ptr<ShmTransport>* out);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  bool CanConnect(int peer) const override;
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;
  // Failure notices live in each rank's segment header (set once, never cleared), and
  // PublishFailure rings every local peer's doorbell; CheckNotices returns the earliest
  // failure published by any local peer, not only by those this rank is waiting for.
  void PublishFailure(const Status& failure) override;
  Status CheckNotices(int wait_ms) override;
  // The host board of this host's ranks (after the channels in each segment), unless
  // TESSERA_SHM_BOARD_BYTES is 0.
  HostBoard* board() override { return board_.get(); }

  struct Mapping;  // one mapped segment (defined in the .cc)

 private:
  ShmTransport() = default;
  Status Init(const Options& options, int my_rank, const std::vector<Member>& local, const Deadline& deadline);
  int LocalIndex(int rank) const;

  Options options_;
  int my_rank_ = -1;
  int my_index_ = -1;
  std::vector<Member> local_;
  std::vector<std::unique_ptr<Mapping>> maps_;  // indexed like local_
  std::vector<int> pidfds_;                      // indexed like local_, -1 for self
  std::string own_name_;
  bool own_unlinked_ = true;
  std::unique_ptr<HostBoard> board_;  // uses maps_ and pidfds_: declared after them
};

// The ranks of this host with the segment each published as its card of `what`'s
// backend (cards by rank, as FinishContext has them). InvalidArgument naming a local
// rank that published none.
Status MembersFromCards(const FinishContext& ctx, const char* what, std::vector<ShmTransport::Member>* members);

// The plugin (transport/plugin.h): the card is the segment's name; no transport with one
// rank on the host. Its settings that every rank must agree on (base/settings.h) are
// TESSERA_SHM_SLOT_BYTES, TESSERA_SHM_SLOTS, TESSERA_SHM_SEGMENT_BYTES and
// TESSERA_SHM_BOARD_BYTES: each rank maps its peers' segments by their layout.
Status OpenShmTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_SHM_SHM_TRANSPORT_H_
