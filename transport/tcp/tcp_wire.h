// The TCP transport's wire, as pure functions of the bytes (they come from the network:
// anything may connect to a rank's listener). What arrives first on every connection to
// the listener is a ConnectHello: either a stream of a new link, or (stream ==
// kNoticeStream) a failure notice, followed by its 8-byte header {code, text length} and
// the text. Each message on a link's stream 0 starts with a MessageHeader.
#ifndef TESSERA_TRANSPORT_TCP_TCP_WIRE_H_
#define TESSERA_TRANSPORT_TCP_TCP_WIRE_H_

#include <cstdint>
#include <string>

#include "base/call_stamp.h"
#include "base/status.h"

namespace tessera {

constexpr uint64_t kTcpConnectMagic = 0x74657373746370ull;  // "tesstcp"
constexpr int32_t kNoticeStream = -1;
constexpr uint32_t kMaxNoticeBytes = 1024;

struct ConnectHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t stream;
};
static_assert(sizeof(ConnectHello) == 24, "ConnectHello travels as 24 bytes");

// InvalidArgument unless `bytes` is exactly a hello of this job (magic, secret) from a
// rank in [0, nranks) for a stream in [0, streams) or a notice. Such connections are
// dropped unanswered.
Status DecodeConnectHello(const std::string& bytes, uint64_t secret, int nranks, int64_t streams, ConnectHello* out);

// A failure notice's header: its Status code and the length of the text that follows.
struct NoticeHeader {
  uint32_t code;
  uint32_t length;
};
static_assert(sizeof(NoticeHeader) == 8, "NoticeHeader travels as 8 bytes");
// The header, text cut to kMaxNoticeBytes.
std::string EncodeNotice(const Status& failure);
// InvalidArgument when `bytes` is not a header or announces more than kMaxNoticeBytes.
Status DecodeNoticeHeader(const std::string& bytes, NoticeHeader* out);
// The failure that rank `rank` reported: always an error ("rank N failed: <text>"), with
// its code when that is a failure code, else RemoteError.
Status NoticeFailure(int rank, const NoticeHeader& header, const std::string& text);

// Before each message on stream 0.
struct MessageHeader {
  uint64_t bytes;
  uint64_t sequence;  // the link's message number in this direction
  CallStamp call;     // the sender's call (Link::SetCall)
};
static_assert(sizeof(MessageHeader) == 40, "MessageHeader travels as 40 bytes");
// An arrived header against this rank's receive (its call, expected size and sequence
// number): OK, MismatchedCalls naming both ranks' calls, or InvalidUsage for a size or
// sequence mismatch. Any bytes give one of these.
Status CheckMessageHeader(const MessageHeader& arrived, int my_rank, int peer, const CallStamp& my_call,
                          uint64_t expected_bytes, uint64_t expected_sequence);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_TCP_TCP_WIRE_H_
