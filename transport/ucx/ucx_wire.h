// What the UCX backend puts on the wire besides user data, as pure functions: the card
// a rank publishes at the rendezvous (its worker address, framed), the tags of data
// chunks and failure notices, and the notice's payload. Everything decoded here comes
// from another process, so every decoder checks bounds and answers bad bytes with
// InvalidArgument (tests/fuzz/ucx_fuzz.cc feeds them arbitrary bytes).
#ifndef TESSERA_TRANSPORT_UCX_UCX_WIRE_H_
#define TESSERA_TRANSPORT_UCX_UCX_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/call_stamp.h"
#include "base/status.h"

namespace tessera {

// --- The card ---------------------------------------------------------------------------
// "UCX1", the address's length (uint32) and its FNV-1a hash (uint64), then the address:
// UCX parses worker addresses without checking them, so only bytes that some UCX worker
// produced (whole, unchanged) may reach ucp_ep_create. An empty card is a rank without
// UCX. Addresses are at most kMaxUcxWorkerAddress bytes.
constexpr size_t kMaxUcxWorkerAddress = 1024;
std::string EncodeUcxCard(const std::string& worker_address);
// An empty `card` gives an empty address; anything else must be a whole, valid card.
Status DecodeUcxCard(const std::string& card, std::string* worker_address);

// --- Tags ---------------------------------------------------------------------------------
// bit 63      failure notice or credit (1), or data (0)
// bits 62..45 sending rank (18 bits)
// Notices and credits: bit 0 is 1 for a credit, whose bits 20..1 hold its count of
// chunks (a credit has no payload, so its send holds no buffer).
// bits 44..29 the link's message sequence number, modulo 2^16
// bits 28..21 digest of the sender's call (CallDigest)
// bit 20      last chunk of its message
// bits 19..0  chunk index within the message
constexpr int kUcxRankBits = 18;
constexpr uint64_t kUcxNoticeFlag = uint64_t{1} << 63;
constexpr uint64_t kUcxCreditFlag = 1;
constexpr uint64_t kUcxMaxCredits = (uint64_t{1} << 20) - 1;
// What a probe for one sender's credits matches: all but the count.
constexpr uint64_t kUcxCreditMatchMask = ~(kUcxMaxCredits << 1);
// What a notice matches: the flag, and not a credit.
constexpr uint64_t kUcxNoticeMatchMask = kUcxNoticeFlag | kUcxCreditFlag;
constexpr uint64_t kUcxLastFlag = uint64_t{1} << 20;
constexpr uint64_t kUcxDigestMask = uint64_t{0xFF} << 21;
constexpr uint64_t kUcxMaxChunks = uint64_t{1} << 20;
// A data receive matches every bit but the last-chunk flag and the call digest, which
// it then checks: a chunk of another call is received and reported, not left unmatched.
constexpr uint64_t kUcxDataMatchMask = ~(kUcxLastFlag | kUcxDigestMask);

uint64_t UcxDataTag(int sender, uint64_t seq, uint8_t digest, uint64_t chunk, bool last);
uint64_t UcxNoticeTag(int sender);
uint64_t UcxCreditTag(int sender, uint64_t count);  // count <= kUcxMaxCredits
uint64_t UcxCreditCount(uint64_t tag);
int UcxTagSender(uint64_t tag);
uint8_t UcxTagDigest(uint64_t tag);
// CRC-8 (polynomial x^8 + x^2 + x + 1) of the stamp's fields, byte by byte (not its
// padding): calls that differ within one of those bytes (the collective, the datatype,
// the operator, a root below 256, most nearby sequence numbers) always get different
// digests, other differences with odds 255 in 256.
uint8_t UcxCallDigest(const CallStamp& call);

// --- Failure notices ----------------------------------------------------------------------
// The failure's code (int32) and at most kMaxUcxNoticeText bytes of its message.
constexpr size_t kMaxUcxNoticeText = 1024;
constexpr size_t kMaxUcxNoticeBytes = sizeof(int32_t) + kMaxUcxNoticeText;
std::string EncodeUcxNotice(const Status& failure);
// The sender's failure as this rank reports it ("rank N failed: ..."), never OK: a code
// that is not a failure's becomes RemoteError, a payload too short to hold one says the
// reason was lost.
Status DecodeUcxNotice(int sender, const std::string& payload);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_UCX_UCX_WIRE_H_
