// How an ibverbs link cuts a message into ring pieces, and how the receiver checks the
// pieces it gets against the message it expects. Pure: tested alone
// (message_pieces_test.cc); the link (ibverbs_link.cc) calls these.
//
// A piece is at most one ring slot. A send gated on data still being produced
// (available < length) sends only pieces of at least kMinPartialPiece that end on a
// kPieceAlignment boundary, so every piece holds whole elements of any datatype and a
// trickle of data does not burn a slot per few bytes. The message's final piece is
// flagged "last"; a receiver that expects another length sees the mismatch from that
// flag.
#ifndef TESSERA_TRANSPORT_IBVERBS_MESSAGE_PIECES_H_
#define TESSERA_TRANSPORT_IBVERBS_MESSAGE_PIECES_H_

#include <cstddef>

#include "base/status.h"

namespace tessera {
namespace ibverbs {

constexpr size_t kPieceAlignment = 64;  // the largest element size divides it
constexpr size_t kMinPartialPiece = 64 << 10;

// The length of the next piece a sender may write now, or 0 to wait for more data.
// `posted` bytes of the `len`-byte message are already written; the first `available`
// bytes exist (available >= len: all of them).
size_t NextPieceLength(size_t posted, size_t len, size_t available, size_t slot_bytes);

// Checks a piece of `piece_length` bytes (`last`: the sender's final piece) arriving
// after `received` of `expected` bytes. InvalidUsage "message size mismatch: rank
// <peer> sent N bytes (or more than N), this rank expected M" when they disagree.
Status CheckArrivingPiece(size_t received, size_t expected, size_t piece_length, bool last, int peer);

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_MESSAGE_PIECES_H_
