// The rendezvous' wire (rendezvous.h), as pure functions: the bytes come from the network.
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/rendezvous.h"

namespace tessera {
namespace {

constexpr char kIdMagic[8] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', '1'};
constexpr uint64_t kJoinMagic = 0x7465737365726132ull;   // "tessera2"
constexpr uint64_t kTableMagic = 0x7465737365726154ull;  // "tesseraT"

struct RequestHeader {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  uint32_t forward_ip_be;
  uint16_t forward_port_be;
  uint16_t host_len;
  int32_t pid;
  uint16_t agreed_len;
  uint16_t cards_len;
};
static_assert(sizeof(RequestHeader) == kJoinHeaderBytes, "the request's header is part of the wire");

struct ReplyHeader {
  int32_t code;  // Code
  int32_t nranks;
  int32_t fanout;
  uint32_t parent_ip_be;
  uint16_t parent_port_be;
  uint16_t message_len;
};
static_assert(sizeof(ReplyHeader) == kJoinReplyHeaderBytes, "the answer's header is part of the wire");

struct TableRequest {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t zero;
};
static_assert(sizeof(TableRequest) == kTableRequestBytes, "the table request is part of the wire");

template <typename T>
std::string AsBytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

void EncodeUniqueId(const UniqueIdData& id, char out[kUniqueIdBytes]) {
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, kIdMagic, sizeof(kIdMagic));
  std::memcpy(out + 8, &id.root.ip_be, sizeof(id.root.ip_be));
  std::memcpy(out + 12, &id.root.port_be, sizeof(id.root.port_be));
  std::memcpy(out + 16, &id.secret, sizeof(id.secret));
  std::memcpy(out + 24, &id.root_pid, sizeof(id.root_pid));
  std::memcpy(out + 28, &id.root_rank, sizeof(id.root_rank));
  std::memcpy(out + 32, id.root_host.data(), std::min<size_t>(id.root_host.size(), kUniqueIdBytes - 33));
}

std::string EncodeJoinRequest(uint64_t secret, const JoinRequest& request) {
  const RankInfo& info = request.info;
  RequestHeader h{};
  h.magic = kJoinMagic;
  h.secret = secret;
  h.rank = request.rank;
  h.nranks = request.nranks;
  h.forward_ip_be = request.forward.ip_be;
  h.forward_port_be = request.forward.port_be;
  h.pid = info.pid;
  const std::string host = info.host.substr(0, kMaxHostBytes), agreed = info.agreed.substr(0, kMaxAgreedBytes),
                    cards = info.cards.substr(0, kMaxCardsBytes);
  h.host_len = static_cast<uint16_t>(host.size());
  h.agreed_len = static_cast<uint16_t>(agreed.size());
  h.cards_len = static_cast<uint16_t>(cards.size());
  return AsBytes(h) + host + agreed + cards;
}

Status JoinRequestBytes(const std::string& header, uint64_t secret, size_t* total) {
  RequestHeader h;
  if (header.size() < sizeof(h)) return InvalidArgument("a join request of " + std::to_string(header.size()) + " bytes");
  std::memcpy(&h, header.data(), sizeof(h));
  if (h.magic != kJoinMagic || h.secret != secret) {
    return InvalidArgument("the unique id's secret does not match this communicator's (stale or foreign id)");
  }
  if (h.host_len > kMaxHostBytes || h.agreed_len > kMaxAgreedBytes || h.cards_len > kMaxCardsBytes) {
    return InvalidArgument("a join request announcing " + std::to_string(h.host_len) + " bytes of host, " +
                           std::to_string(h.agreed_len) + " of agreed settings and " + std::to_string(h.cards_len) +
                           " of cards");
  }
  *total = sizeof(h) + h.host_len + h.agreed_len + h.cards_len;
  return Status::Ok();
}

Status DecodeJoinRequest(const std::string& bytes, uint64_t secret, JoinRequest* out) {
  size_t total = 0;
  TESSERA_RETURN_IF_ERROR(JoinRequestBytes(bytes, secret, &total));
  if (bytes.size() != total) {
    return InvalidArgument("a join request of " + std::to_string(bytes.size()) + " bytes announcing " +
                           std::to_string(total));
  }
  RequestHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.nranks < 1 || h.nranks > kMaxRendezvousRanks) {
    return InvalidUsage("rank " + std::to_string(h.rank) + " says nranks is " + std::to_string(h.nranks) +
                        ", outside [1, " + std::to_string(kMaxRendezvousRanks) + "]");
  }
  if (h.rank < 0 || h.rank >= h.nranks) {
    return InvalidUsage("rank " + std::to_string(h.rank) + " out of range for nranks " + std::to_string(h.nranks));
  }
  out->rank = h.rank;
  out->nranks = h.nranks;
  out->forward.ip_be = h.forward_ip_be;
  out->forward.port_be = h.forward_port_be;
  out->info.pid = h.pid;
  size_t at = sizeof(h);
  out->info.host.assign(bytes, at, h.host_len);
  at += h.host_len;
  out->info.agreed.assign(bytes, at, h.agreed_len);
  at += h.agreed_len;
  out->info.cards.assign(bytes, at, h.cards_len);
  return Status::Ok();
}

std::string EncodeJoinReply(const Status& status, int nranks, int fanout, const SocketAddress& parent) {
  const std::string message = status.message().substr(0, kMaxReplyMessage);
  ReplyHeader h{};
  h.code = static_cast<int32_t>(status.code());
  h.nranks = nranks;
  h.fanout = fanout;
  h.parent_ip_be = parent.ip_be;
  h.parent_port_be = parent.port_be;
  h.message_len = static_cast<uint16_t>(message.size());
  return AsBytes(h) + message;
}

size_t JoinReplyBytes(const std::string& header) {
  ReplyHeader h;
  if (header.size() < sizeof(h)) return sizeof(h);
  std::memcpy(&h, header.data(), sizeof(h));
  return sizeof(h) + std::min<size_t>(h.message_len, kMaxReplyMessage);
}

void DecodeJoinReply(const std::string& bytes, int nranks, JoinReply* out) {
  ReplyHeader h;
  *out = JoinReply();
  if (bytes.size() < sizeof(h)) {
    out->status = InternalError("an answer of " + std::to_string(bytes.size()) + " bytes");
    return;
  }
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.message_len > kMaxReplyMessage || bytes.size() != sizeof(h) + h.message_len) {
    out->status = InternalError("an answer of " + std::to_string(bytes.size()) + " bytes announcing a message of " +
                                std::to_string(h.message_len));
  } else if (h.code != 0) {
    out->status = FailureFromWire(h.code, bytes.data() + sizeof(h), h.message_len);
  } else if (h.nranks != nranks) {
    out->status = InternalError("table of the wrong size");
  } else if (h.fanout < 1) {
    out->status = InternalError("an answer with a fanout of " + std::to_string(h.fanout));
  } else {
    out->fanout = h.fanout;
    out->parent.ip_be = h.parent_ip_be;
    out->parent.port_be = h.parent_port_be;
  }
}

int TableParent(int rank, int fanout) { return rank < fanout ? -1 : rank / fanout - 1; }

std::vector<int> TableChildren(int rank, int nranks, int fanout) {
  std::vector<int> children;
  const int64_t first = static_cast<int64_t>(fanout) * (rank + 1);
  for (int64_t c = first; c < first + fanout && c < nranks; ++c) children.push_back(static_cast<int>(c));
  return children;
}

std::string EncodeTableRequest(uint64_t secret, int rank) { return AsBytes(TableRequest{kTableMagic, secret, rank, 0}); }

Status DecodeTableRequest(const std::string& bytes, uint64_t secret, int* rank) {
  TableRequest t;
  if (bytes.size() != sizeof(t)) return InvalidArgument("a table request of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&t, bytes.data(), sizeof(t));
  if (t.magic != kTableMagic || t.secret != secret || t.zero != 0) return InvalidArgument("not a table request of this communicator");
  *rank = t.rank;
  return Status::Ok();
}

Status DecodeUniqueId(const char in[kUniqueIdBytes], UniqueIdData* out) {
  if (std::memcmp(in, kIdMagic, sizeof(kIdMagic)) != 0) {
    return InvalidArgument("commId is not a tessera unique id (bad magic); create it with tesseraGetUniqueId");
  }
  std::memcpy(&out->root.ip_be, in + 8, sizeof(out->root.ip_be));
  std::memcpy(&out->root.port_be, in + 12, sizeof(out->root.port_be));
  std::memcpy(&out->secret, in + 16, sizeof(out->secret));
  std::memcpy(&out->root_pid, in + 24, sizeof(out->root_pid));
  std::memcpy(&out->root_rank, in + 28, sizeof(out->root_rank));
  out->root_host.assign(in + 32, strnlen(in + 32, kUniqueIdBytes - 33));
  if (out->root.port() == 0) return InvalidArgument("commId has no rendezvous port");
  return Status::Ok();
}

uint64_t RandomSecret() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(NowMicros()) * 0x9E3779B97F4A7C15ull;
  }
  return v;
}

}  // namespace tessera
