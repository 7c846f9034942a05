#include "transport/ibverbs/message_pieces.h"

#include <algorithm>
#include <string>

namespace tessera {
namespace ibverbs {

size_t NextPieceLength(size_t posted, size_t len, size_t available, size_t slot_bytes) {
  if (posted >= len) return 0;
  // Whole alignment units only, until the message is all there.
  const size_t ready = available >= len ? len : available / kPieceAlignment * kPieceAlignment;
  if (ready <= posted) return 0;
  const size_t piece = std::min(slot_bytes, ready - posted);
  const bool last = posted + piece == len;
  if (!last && piece < slot_bytes && piece < kMinPartialPiece) return 0;
  return piece;
}

Status CheckArrivingPiece(size_t received, size_t expected, size_t piece_length, bool last, int peer) {
  const size_t remaining = expected > received ? expected - received : 0;
  const bool too_long = piece_length > remaining;
  const bool ends_early = last && piece_length < remaining;
  const bool goes_on = !last && piece_length == remaining;
  if (!too_long && !ends_early && !goes_on) return Status::Ok();
  const std::string sent = last ? std::to_string(received + piece_length) : "more than " + std::to_string(expected);
  return InvalidUsage("message size mismatch: rank " + std::to_string(peer) + " sent " + sent +
                      " bytes, this rank expected " + std::to_string(expected) +
                      " (do all ranks pass the same count and datatype?)");
}

}  // namespace ibverbs
}  // namespace tessera
