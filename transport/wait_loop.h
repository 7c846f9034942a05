// The wait of every blocking transport operation: the Exchange engine's transfers
// (exchange.h) and a host board's round (host_board.h). It moves what it waits for
// without blocking, polls as the progress policy says for its budget after the last
// progress, then sleeps on what the waitable names (futex doorbell, sockets) until
// something can move, the deadline passes, the communicator is aborted, a peer
// publishes a failure or dies. Failures name the peers; a peer's published failure is
// preferred to the symptom it caused.
#ifndef TESSERA_TRANSPORT_WAIT_LOOP_H_
#define TESSERA_TRANSPORT_WAIT_LOOP_H_

#include <string>
#include <vector>

#include "transport/exchange.h"

namespace tessera {

// What a wait drives.
class Waitable {
 public:
  virtual ~Waitable() = default;
  // Whether everything waited for is done.
  virtual bool Done() const = 0;
  // One pass that moves what it can without blocking; *moved when anything moved.
  virtual Status Progress(bool* moved) = 0;
  // What to sleep on while nothing moves.
  virtual void AddWaits(WaitSet* set) = 0;
  // Wakes the peers that sleep on what Progress published (Link::Flush): called now and
  // then while polling, before sleeping, and when the wait ends.
  virtual void Flush() {}
  // The slow checks of the peers still waited for (alive, no published failure).
  virtual Status CheckPeers() = 0;
  // The ranks still waited for (for the observer), and what is pending, in words (for
  // the timeout and abort errors).
  virtual void WaitingPeers(std::vector<int>* peers) const = 0;
  virtual std::string PendingSummary() const = 0;
};

// Runs `w` until it is done or fails. On a failure the observer (if any) learns whom
// this rank was waiting on, so that a rank still finishing an earlier call when a peer
// died shows whom it waited for (diagnosis then does not blame it for being behind; it
// may never have slept, and so never told).
Status WaitFor(Waitable* w, const ExchangeOptions& options);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_WAIT_LOOP_H_
