// CallStamp: which call of a communicator something belongs to. In a correct program
// every rank has the same stamp at the same collective sequence number, so
// - links whose wire format has room carry the sender's stamp on every message, and a
//   receiver whose own stamp differs fails before any data lands (mismatched calls:
//   another collective, count, datatype, operator or root; transport/transport.h);
// - a rank's status for diagnosis names its current call by its stamp.
// A plain 24-byte value: it travels as it is between ranks of one build.
#ifndef TESSERA_BASE_CALL_STAMP_H_
#define TESSERA_BASE_CALL_STAMP_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/types.h"

namespace tessera {

struct CallStamp {
  uint64_t count = 0;  // the call's count argument (elements)
  uint32_t seq = 0;    // the communicator's collective sequence number: 1, 2, ...; 0 = none
  uint8_t kind = 0;    // OpKind
  uint8_t type = 0;    // DataType
  uint8_t op = 0;      // RedOp of a reduction; kNumRedOps for a PreMulSum operator; else 0
  uint8_t flags = 0;   // kStampCreation or kStampParts, else 0
  int32_t root = 0;    // rooted collectives (broadcast, reduce, gather, scatter); else 0
};
static_assert(sizeof(CallStamp) == 24, "CallStamp travels as 24 bytes");

// flags: not a call but the communicator's creation (diagnosis only; never on a wire).
constexpr uint8_t kStampCreation = 1;
// flags: a tesseraAllReduceParts call (its ranks must all call it: in deterministic mode
// it runs differently from tesseraAllReduce).
constexpr uint8_t kStampParts = 2;

inline bool operator==(const CallStamp& a, const CallStamp& b) {
  return a.count == b.count && a.seq == b.seq && a.kind == b.kind && a.type == b.type && a.op == b.op &&
         a.flags == b.flags && a.root == b.root;
}
inline bool operator!=(const CallStamp& a, const CallStamp& b) { return !(a == b); }

// "allreduce #73 (16777216 x float32 = 64 MiB, sum)"; "broadcast #2 (8 x int32 = 32 B,
// root 1)"; a send/receive group (seq 0, kind send or recv, count = bytes sent):
// "sends/receives (4 KiB sent)"; any other stamp with seq 0: "no collective". Any bytes give a readable text (stamps
// come from the network).
std::string DescribeCall(const CallStamp& stamp);

// The failure of a receive whose sender's call differs from the receiver's: InvalidUsage
// "mismatched calls: rank 2 called allreduce #5 (1024 x float32 = 4 KiB, sum) but rank 3
// called allreduce #5 (2048 x float32 = 8 KiB, sum)", the lower rank first, so that the
// same pair reads the same whichever rank detects it. A side in no collective (a send or
// receive) reads "rank 3 was in no collective (a send or receive)". `theirs` may be any
// bytes (it comes from the network).
Status MismatchedCalls(int rank, const CallStamp& mine, int peer, const CallStamp& theirs);
// The same failure where the wire carries only a digest of the sender's call (`how`
// says which, e.g. "the ucx transport carries an 8-bit digest of the call"): "mismatched
// calls: rank 3 called allreduce #5 (...) but rank 2 sent a message of another call (<how>)".
Status MismatchedCallDigest(int rank, const CallStamp& mine, int peer, const std::string& how);

// "64 MiB", "1.5 KiB", "8 B".
std::string DescribeBytes(uint64_t bytes);

}  // namespace tessera

#endif  // TESSERA_BASE_CALL_STAMP_H_
