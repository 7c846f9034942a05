// A host board: one small message from every rank of a communicator whose ranks all
// share one host, readable by every one of them once all have posted it. An allreduce
// of a few bytes then costs one round of waiting for the slowest rank, where messages
// between pairs cost lg p rounds (collectives/board_allreduce.cc). The shared-memory
// transport keeps it: two slots per rank in the rank's own segment, used by rounds in
// turn, each with a header line (round number, size, call stamp).
//
// Why two slots suffice: a rank writes round k+2 into round k's slot only after every
// rank published round k+1, and a rank publishes k+1 only after it read round k.
#ifndef TESSERA_TRANSPORT_HOST_BOARD_H_
#define TESSERA_TRANSPORT_HOST_BOARD_H_

#include <cstddef>

#include "base/status.h"
#include "transport/exchange.h"

namespace tessera {

class HostBoard {
 public:
  virtual ~HostBoard() = default;
  // How many ranks post on it (all of the host's).
  virtual int ranks() const = 0;
  // The most bytes one round carries; the same on every rank.
  virtual size_t capacity() const = 0;
  // Where this rank writes its bytes of the next round (at most capacity()).
  virtual char* NextSlot() = 0;
  // Publishes the next round: `bytes` written at NextSlot(), under the call
  // options.stamp (zero when options.check_calls is false). Then waits, as an Exchange
  // does (options' deadline, progress policy, abort, notices, observer), until every
  // rank has published the same round, and fails naming the rank on a different call
  // (MismatchedCalls) or size (InvalidUsage). While it waits it also fails on a peer
  // that sent this rank a link message of another call (it runs another algorithm for
  // another call), so that mismatched sizes cannot hang; the shared-memory links check
  // the reverse.
  virtual Status Round(size_t bytes, const ExchangeOptions& options) = 0;
  // After a successful Round: local rank `index`'s bytes of it, valid until this rank's
  // next Round. With every rank of the communicator on the board, index = rank.
  virtual const char* Slot(int index) const = 0;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_HOST_BOARD_H_
