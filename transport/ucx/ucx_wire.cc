#include "transport/ucx/ucx_wire.h"

#include <cstddef>
#include <cstring>

#include "base/hash.h"

namespace tessera {
namespace {

constexpr char kCardMagic[4] = {'U', 'C', 'X', '1'};
constexpr size_t kCardHeader = sizeof(kCardMagic) + sizeof(uint32_t) + sizeof(uint64_t);

constexpr int kRankShift = 45;
constexpr int kSeqShift = 29;
constexpr uint64_t kSeqMask = (uint64_t{1} << 16) - 1;
constexpr int kDigestShift = 21;

// CRC-8 (polynomial x^8 + x^2 + x + 1, initial value 0) is linear: the CRC of a
// message is the XOR over its bytes of the CRC of that byte followed by as many zero
// bytes as follow it in the message. at[k][b] is the CRC of byte b followed by k zero
// bytes, so a stamp's digest is independent lookups rather than a chain of them.
constexpr size_t kDigestBytes = 20;  // the stamp's fields (CallStamp: its first 20 bytes)
struct Crc8Tables {
  uint8_t at[kDigestBytes][256] = {};
  constexpr Crc8Tables() {
    for (int i = 0; i < 256; ++i) {
      uint8_t c = static_cast<uint8_t>(i);
      for (int b = 0; b < 8; ++b) c = static_cast<uint8_t>((c & 0x80) ? (c << 1) ^ 0x07 : c << 1);
      at[0][i] = c;
    }
    for (size_t k = 1; k < kDigestBytes; ++k) {
      for (int i = 0; i < 256; ++i) at[k][i] = at[0][at[k - 1][i]];
    }
  }
};
constexpr Crc8Tables kCrc8;

}  // namespace

std::string EncodeUcxCard(const std::string& worker_address) {
  const uint32_t length = static_cast<uint32_t>(worker_address.size());
  const uint64_t hash = Fnv1a(worker_address);
  std::string card(kCardMagic, sizeof(kCardMagic));
  card.append(reinterpret_cast<const char*>(&length), sizeof(length));
  card.append(reinterpret_cast<const char*>(&hash), sizeof(hash));
  return card + worker_address;
}

Status DecodeUcxCard(const std::string& card, std::string* worker_address) {
  worker_address->clear();
  if (card.empty()) return Status::Ok();
  if (card.size() < kCardHeader || std::memcmp(card.data(), kCardMagic, sizeof(kCardMagic)) != 0) {
    return InvalidArgument("not a UCX card (" + std::to_string(card.size()) + " bytes)");
  }
  uint32_t length = 0;
  uint64_t hash = 0;
  std::memcpy(&length, card.data() + sizeof(kCardMagic), sizeof(length));
  std::memcpy(&hash, card.data() + sizeof(kCardMagic) + sizeof(length), sizeof(hash));
  if (length == 0 || length > kMaxUcxWorkerAddress || card.size() - kCardHeader != length) {
    return InvalidArgument("a UCX card says its worker address has " + std::to_string(length) + " bytes, and " +
                           std::to_string(card.size() - kCardHeader) + " follow (at most " +
                           std::to_string(kMaxUcxWorkerAddress) + ")");
  }
  std::string address = card.substr(kCardHeader);
  if (Fnv1a(address) != hash) return InvalidArgument("a UCX card's worker address does not match its hash");
  *worker_address = std::move(address);
  return Status::Ok();
}

uint64_t UcxDataTag(int sender, uint64_t seq, uint8_t digest, uint64_t chunk, bool last) {
  return (static_cast<uint64_t>(sender) << kRankShift) | ((seq & kSeqMask) << kSeqShift) |
         (static_cast<uint64_t>(digest) << kDigestShift) | (last ? kUcxLastFlag : 0) | chunk;
}

uint64_t UcxNoticeTag(int sender) { return kUcxNoticeFlag | (static_cast<uint64_t>(sender) << kRankShift); }

uint64_t UcxCreditTag(int sender, uint64_t count) {
  return UcxNoticeTag(sender) | ((count & kUcxMaxCredits) << 1) | kUcxCreditFlag;
}

uint64_t UcxCreditCount(uint64_t tag) { return (tag >> 1) & kUcxMaxCredits; }

int UcxTagSender(uint64_t tag) {
  return static_cast<int>((tag >> kRankShift) & ((uint64_t{1} << kUcxRankBits) - 1));
}

uint8_t UcxTagDigest(uint64_t tag) { return static_cast<uint8_t>((tag & kUcxDigestMask) >> kDigestShift); }

// The fields in the CRC's order, each little-endian, are the stamp's first 20 bytes.
static_assert(offsetof(CallStamp, count) == 0 && offsetof(CallStamp, seq) == 8 && offsetof(CallStamp, kind) == 12 &&
                  offsetof(CallStamp, type) == 13 && offsetof(CallStamp, op) == 14 &&
                  offsetof(CallStamp, flags) == 15 && offsetof(CallStamp, root) == 16,
              "CallStamp's fields lie in the digest's order");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the digest reads the stamp's fields as little-endian");

uint8_t UcxCallDigest(const CallStamp& call) {
  uint8_t bytes[kDigestBytes];
  std::memcpy(bytes, &call, kDigestBytes);
  uint8_t crc = 0;
#pragma GCC unroll 20
  for (size_t i = 0; i < kDigestBytes; ++i) crc ^= kCrc8.at[kDigestBytes - 1 - i][bytes[i]];
  return crc;
}

std::string EncodeUcxNotice(const Status& failure) {
  const int32_t code = static_cast<int32_t>(failure.code());
  std::string payload(reinterpret_cast<const char*>(&code), sizeof(code));
  return payload + failure.message().substr(0, kMaxUcxNoticeText);
}

Status DecodeUcxNotice(int sender, const std::string& payload) {
  int32_t code = 0;
  if (payload.size() < sizeof(code)) return PeerFailure(sender, RemoteError("(reason lost)"));
  std::memcpy(&code, payload.data(), sizeof(code));
  const size_t text_bytes = std::min(payload.size() - sizeof(code), kMaxUcxNoticeText);
  return PeerFailure(sender, FailureFromWire(code, payload.data() + sizeof(code), text_bytes));
}

}  // namespace tessera
