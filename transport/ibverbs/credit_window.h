// CreditWindow: the sender's accounting of one direction of an ibverbs link, whose
// receiver owns a ring of `slots` registered slots. Every piece of a message is written
// into the next slot in ring order (sequence number s goes to slot s % slots); the
// receiver frees slots as it consumes them and returns them as credits. A slot may be
// written again only after the receiver freed it, so the sender never has more than
// `slots` pieces in flight.
//
// Returns may arrive for any freed slots in any order (each slot at most once); because
// the ring is reused in order, the window only advances over the oldest in-flight slots
// once they are all back. Sequence numbers are 32-bit and wrap; on the wire credits
// carry only their low 16 bits, which ExpandSequence turns back into a full sequence
// number (unambiguous because at most kMaxSlots < 2^15 slots are in flight).
//
// Pure logic, no verbs: tested alone (credit_window_test.cc). Not thread-safe.
#ifndef TESSERA_TRANSPORT_IBVERBS_CREDIT_WINDOW_H_
#define TESSERA_TRANSPORT_IBVERBS_CREDIT_WINDOW_H_

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tessera {
namespace ibverbs {

class CreditWindow {
 public:
  // `slots`: a power of two from 1 to 2^15, so that slot indexes stay in ring order
  // across the wrap of the 32-bit sequence numbers. `first_sequence` is the sequence number of the first Acquire (tests
  // start near 2^32 to exercise wrap-around).
  explicit CreditWindow(uint32_t slots, uint32_t first_sequence = 0);

  uint32_t slots() const { return slots_; }
  // Pieces written whose slot is not yet reusable (from the oldest unreturned one on).
  uint32_t in_flight() const { return next_ - oldest_; }
  uint32_t credits() const { return slots_ - in_flight(); }
  bool CanAcquire() const { return in_flight() < slots_; }

  // Takes the next slot. Precondition: CanAcquire(). Returns its sequence number; the
  // slot index is sequence % slots().
  uint32_t Acquire();

  // The receiver freed the `count` consecutive slots starting at sequence `first`.
  // InternalError (a protocol violation by the peer) if any of them is not in flight
  // or was already returned; nothing changes then.
  Status Return(uint32_t first, uint32_t count);

  // The in-flight sequence number whose low 16 bits are `low` (the first such one
  // counting from the oldest in flight). The result is in flight only if `low` names
  // an in-flight slot; Return checks that.
  uint32_t ExpandSequence(uint16_t low) const;

  uint32_t oldest() const { return oldest_; }  // oldest sequence not yet reusable
  uint32_t next() const { return next_; }      // what Acquire returns next

 private:
  const uint32_t slots_;
  uint32_t oldest_;
  uint32_t next_;
  std::vector<bool> returned_;  // by slot index: freed, waiting for older slots
};

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_CREDIT_WINDOW_H_
