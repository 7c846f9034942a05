// Receives from any source (dist.recv without src), as Gloo offers them, over a mailbox
// in the group's c10d store.
//
// tessera matches every receive with a named peer, in issue order, and has no probe. So a
// rank that may receive from any source needs to learn who sent to it: with the setting
// TESSERA_TORCH_ANY_SOURCE=1 (on every rank), each send also appends its source rank to
// the destination's mailbox in the store (two store round trips a send, on the sender's
// thread: the price of the feature, which is why it is off by default). An any-source
// receive then walks its mailbox: entries of sources whose messages specific receives
// have claimed are passed over, and the first one left names the peer to receive from.
//
// Order: a source's entries are in the order of its sends, so the walk never names a
// peer whose messages are all claimed. A specific receive claims its source's oldest
// unwalked entry at once, even if it was posted after an any-source receive that walks
// later: that receive then takes another peer's message (or waits for one), which is a
// valid match, and never one that would leave the specific receive without a message.
// Tags are not matched (tessera matches sends and receives in order).
//
// Keys: tessera/mailbox/<rank>/count and tessera/mailbox/<rank>/<n>; an any-source
// receive deletes the entries it walks past. Entries that only specific receives took
// stay until the next any-source receive of that rank walks over them.
#ifndef TESSERA_PYTORCH_ANY_SOURCE_H_
#define TESSERA_PYTORCH_ANY_SOURCE_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "pytorch/torch_api.h"

namespace tessera_torch {

class AnySourceMailbox {
 public:
  // Whether TESSERA_TORCH_ANY_SOURCE=1 is set in this process.
  static bool Enabled();

  AnySourceMailbox(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  // A send to `destination` was posted (called in the order of this rank's sends).
  void Announce(int destination);
  // A receive from `source` was posted: it claims one of source's entries.
  void Claim(int source);
  // The source of the next message no receive has claimed, waiting for the store (its
  // timeout) until there is one. Called by any-source receives, one at a time, in the
  // order they were posted.
  int NextSource();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  std::mutex mu_;
  uint64_t cursor_ = 0;           // the next entry of this rank's mailbox to walk
  std::vector<uint64_t> claimed_;  // per source: claimed by specific receives, not walked yet
};

}  // namespace tessera_torch

#endif  // TESSERA_PYTORCH_ANY_SOURCE_H_
