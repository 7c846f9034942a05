#include "transport/tcp/tcp_wire.h"

#include <algorithm>
#include <cstring>

namespace tessera {

Status DecodeConnectHello(const std::string& bytes, uint64_t secret, int nranks, int64_t streams, ConnectHello* out) {
  ConnectHello h;
  if (bytes.size() != sizeof(h)) return InvalidArgument("a hello of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kTcpConnectMagic || h.secret != secret) return InvalidArgument("not a connection of this job");
  if (h.rank < 0 || h.rank >= nranks) return InvalidArgument("rank " + std::to_string(h.rank) + " out of range");
  if (h.stream != kNoticeStream && (h.stream < 0 || h.stream >= streams)) {
    return InvalidArgument("stream " + std::to_string(h.stream) + " out of range");
  }
  *out = h;
  return Status::Ok();
}

std::string EncodeNotice(const Status& failure) {
  const std::string text = failure.message().substr(0, kMaxNoticeBytes);
  const NoticeHeader h{static_cast<uint32_t>(failure.code()), static_cast<uint32_t>(text.size())};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + text;
}

Status DecodeNoticeHeader(const std::string& bytes, NoticeHeader* out) {
  NoticeHeader h;
  if (bytes.size() != sizeof(h)) return InvalidArgument("a notice header of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.length > kMaxNoticeBytes) return InvalidArgument("a notice of " + std::to_string(h.length) + " bytes");
  *out = h;
  return Status::Ok();
}

Status NoticeFailure(int rank, const NoticeHeader& header, const std::string& text) {
  return PeerFailure(rank, FailureFromWire(header.code, text.data(), std::min<size_t>(text.size(), kMaxNoticeBytes)));
}

Status CheckMessageHeader(const MessageHeader& arrived, int my_rank, int peer, const CallStamp& my_call,
                          uint64_t expected_bytes, uint64_t expected_sequence) {
  if (arrived.call != my_call) return MismatchedCalls(my_rank, my_call, peer, arrived.call);
  if (arrived.bytes != expected_bytes || arrived.sequence != expected_sequence) {
    return InvalidUsage("message size mismatch: rank " + std::to_string(peer) + " sent " +
                        std::to_string(arrived.bytes) + " bytes, this rank expected " +
                        std::to_string(expected_bytes) + " (do all ranks pass the same count and datatype?)");
  }
  return Status::Ok();
}

}  // namespace tessera
