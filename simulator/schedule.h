// A rank's schedule: what one call of a collective algorithm makes that rank do, as the
// real algorithm (collectives/) ran it against the recording stand-in of the transport
// seam (recording_transport.h). The simulator replays it (replay.h); nothing in it is
// written by hand.
//
// A schedule is a sequence of steps, run one after the other as the algorithm runs its
// Exchanges and local copies one after the other:
//   - an exchange: messages (sends and receives) that run together. Messages to or from
//     the same peer in the same direction run in order (the Exchange engine's queues);
//     a send may be gated on a receive of the same exchange: it moves only the bytes
//     that receive has made final (Link::ready_bytes), so a ring forwards a block while
//     it arrives;
//   - a local copy of some bytes (LocalCopy in collective.h).
#ifndef TESSERA_SIMULATOR_SCHEDULE_H_
#define TESSERA_SIMULATOR_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

// One message of an exchange, 16 bytes (a ring allreduce over 4,096 ranks holds 67 million).
struct Message {
  int32_t peer = 0;
  // For a send: the index, within its exchange, of the receive it is gated on; -1 when
  // its data is all there when it starts.
  int32_t gate = -1;
  uint32_t bytes = 0;
  uint8_t is_send = 0;
  uint8_t reduces = 0;  // a receive that reduces what arrives into its destination
};

struct Step {
  enum Kind : uint8_t { kExchange, kCopy };
  Kind kind = kExchange;
  uint32_t first = 0;   // exchange: its messages are messages[first, first + count)
  uint32_t count = 0;
  uint64_t copy_bytes = 0;  // copy
};

// Where a gated send's data starts inside what its gate receive writes, when not at its
// start (Transfer::gate_offset in transport/exchange.h): the send moves byte k once the
// gate has made bytes through offset + k final. Rare (the torus's first column send),
// so kept beside the messages rather than in each.
struct GateOffset {
  uint32_t message = 0;  // index into RankSchedule::messages
  uint32_t offset = 0;
};

struct RankSchedule {
  std::vector<Step> steps;
  std::vector<Message> messages;
  std::vector<GateOffset> gate_offsets;  // by message index, ascending
  // Only when the recorder is asked for them (tests): by message, the address of the
  // data a send reads and a receive writes, in the recorder's reserved address space.
  std::vector<uintptr_t> addresses;

  uint64_t BytesSent() const;
  // The gate offset of message `index` (0 for most).
  uint32_t GateOffsetOf(uint32_t index) const;
  size_t MemoryBytes() const;  // what the vectors hold
};

// Whether the schedules of all ranks fit together: every send to a peer has a receive
// there, from this rank, of the same size, in the same order (per pair and direction),
// and every gate names a receive of the send's own exchange. InvalidArgument naming the
// first mismatch (ranks, message, sizes) otherwise.
Status CheckSchedulesMatch(const std::vector<RankSchedule>& ranks);

// "ring: rank 3: 4 step(s), 12 message(s) ..." for logs and tests: every step of one rank.
std::string DescribeSchedule(const RankSchedule& schedule);

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_SCHEDULE_H_
