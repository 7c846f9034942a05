#include "transport/ibverbs/wire_format.h"

#include <algorithm>

namespace tessera {
namespace ibverbs {
namespace {

constexpr uint32_t kSummaryMagic = 0x52495354;  // "TSIR" read as little-endian
constexpr uint16_t kSummaryVersion = 1;
constexpr uint8_t kSummaryGpuDirect = 1;  // flags: GPUDirect RDMA possible

// Little-endian writer and reader over a fixed-size byte string.
class Writer {
 public:
  explicit Writer(size_t size) : bytes_(size, '\0') {}
  void U8(uint8_t v) { bytes_[at_++] = static_cast<char>(v); }
  void U16(uint16_t v) { Put(v, 2); }
  void U32(uint32_t v) { Put(v, 4); }
  void U64(uint64_t v) { Put(v, 8); }
  void Bytes(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) U8(p[i]);
  }
  void Skip(size_t n) { at_ += n; }
  std::string Take() { return std::move(bytes_); }

 private:
  void Put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::string bytes_;
  size_t at_ = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  uint8_t U8() { return static_cast<uint8_t>(bytes_[at_++]); }
  uint16_t U16() { return static_cast<uint16_t>(Get(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Get(4)); }
  uint64_t U64() { return Get(8); }
  void Bytes(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = U8();
  }
  void Skip(size_t n) { at_ += n; }

 private:
  uint64_t Get(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(U8()) << (8 * i);
    return v;
  }
  const std::string& bytes_;
  size_t at_ = 0;
};

bool ValidLinkLayer(uint8_t v) {
  return v == static_cast<uint8_t>(LinkLayer::kInfiniBand) || v == static_cast<uint8_t>(LinkLayer::kEthernet);
}

std::string Bad(const std::string& what) { return "malformed ibverbs connection data: " + what; }

}  // namespace

const char* LinkLayerName(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::kInfiniBand:
      return "InfiniBand";
    case LinkLayer::kEthernet:
      return "Ethernet (RoCE)";
  }
  return "unknown";
}

// --- Rank summary -------------------------------------------------------------------

std::string SerializeRankSummary(const RankSummary& summary) {
  Writer w(kRankSummaryBytes);
  w.U32(kSummaryMagic);
  w.U16(kSummaryVersion);
  w.U8(static_cast<uint8_t>(summary.link_layer));
  w.U8(summary.gpu_direct ? kSummaryGpuDirect : 0);
  w.U64(summary.subnet_prefix);
  return w.Take();
}

Status ParseRankSummary(const std::string& bytes, RankSummary* out) {
  if (bytes.size() != kRankSummaryBytes) {
    return InvalidArgument("malformed ibverbs rank summary: " + std::to_string(bytes.size()) + " bytes, expected " +
                           std::to_string(kRankSummaryBytes));
  }
  Reader r(bytes);
  if (r.U32() != kSummaryMagic) return InvalidArgument("malformed ibverbs rank summary: bad magic");
  const uint16_t version = r.U16();
  if (version != kSummaryVersion) {
    return InvalidArgument("ibverbs rank summary version " + std::to_string(version) + ", this build speaks version " +
                           std::to_string(kSummaryVersion) + " (are all ranks running the same tessera?)");
  }
  const uint8_t layer = r.U8();
  if (!ValidLinkLayer(layer))
    return InvalidArgument("malformed ibverbs rank summary: link layer " + std::to_string(layer));
  const uint8_t flags = r.U8();
  if ((flags & ~kSummaryGpuDirect) != 0) {
    return InvalidArgument("malformed ibverbs rank summary: unknown flags " + std::to_string(flags));
  }
  RankSummary s;
  s.link_layer = static_cast<LinkLayer>(layer);
  s.subnet_prefix = r.U64();
  s.gpu_direct = (flags & kSummaryGpuDirect) != 0;
  *out = s;
  return Status::Ok();
}

bool SummariesCompatible(const RankSummary& a, const RankSummary& b) {
  if (a.link_layer != b.link_layer) return false;
  return a.link_layer != LinkLayer::kInfiniBand || a.subnet_prefix == b.subnet_prefix;
}

// --- Connection data ----------------------------------------------------------------

std::string SerializeConnectionInfo(const ConnectionInfo& info) {
  Writer w(kConnectionInfoBytes);
  w.U32(kConnectionMagic);
  w.U16(kConnectionVersion);
  w.U16(static_cast<uint16_t>(kConnectionInfoBytes));
  w.U32(info.rank);
  w.U32(info.peer);
  w.U8(static_cast<uint8_t>(info.link_layer));
  w.U8(info.port);
  w.U8(info.mtu);
  w.U8(info.gid_index);
  w.U16(info.lid);
  w.Skip(2);
  w.U32(info.qp_num);
  w.U32(info.psn);
  w.Bytes(info.gid.data(), info.gid.size());
  w.U64(info.ring_addr);
  w.U32(info.ring_rkey);
  w.U32(info.slots);
  w.U32(info.slot_bytes);
  w.U64(info.notice_addr);
  w.U32(info.notice_rkey);
  return w.Take();
}

Status ParseConnectionInfo(const std::string& bytes, ConnectionInfo* out) {
  // Magic and version first: a different version may well have a different length,
  // and "version 2, this build speaks 1" is the useful message then.
  if (bytes.size() < 8) return InvalidArgument(Bad(std::to_string(bytes.size()) + " bytes"));
  Reader r(bytes);
  if (r.U32() != kConnectionMagic) return InvalidArgument(Bad("bad magic"));
  const uint16_t version = r.U16();
  if (version != kConnectionVersion) {
    return InvalidArgument("ibverbs connection data version " + std::to_string(version) +
                           ", this build speaks version " + std::to_string(kConnectionVersion) +
                           " (are all ranks running the same tessera?)");
  }
  const uint16_t length = r.U16();
  if (length != kConnectionInfoBytes || bytes.size() != kConnectionInfoBytes) {
    return InvalidArgument(Bad("length field " + std::to_string(length) + ", " + std::to_string(bytes.size()) +
                               " bytes received, expected " + std::to_string(kConnectionInfoBytes)));
  }
  ConnectionInfo info;
  info.rank = r.U32();
  info.peer = r.U32();
  const uint8_t layer = r.U8();
  info.port = r.U8();
  info.mtu = r.U8();
  info.gid_index = r.U8();
  info.lid = r.U16();
  r.Skip(2);
  info.qp_num = r.U32();
  info.psn = r.U32();
  r.Bytes(info.gid.data(), info.gid.size());
  info.ring_addr = r.U64();
  info.ring_rkey = r.U32();
  info.slots = r.U32();
  info.slot_bytes = r.U32();
  info.notice_addr = r.U64();
  info.notice_rkey = r.U32();

  if (!ValidLinkLayer(layer)) return InvalidArgument(Bad("link layer " + std::to_string(layer)));
  info.link_layer = static_cast<LinkLayer>(layer);
  if (info.port == 0) return InvalidArgument(Bad("port 0"));
  if (info.mtu < 1 || info.mtu > 5) return InvalidArgument(Bad("MTU code " + std::to_string(info.mtu)));
  if (info.qp_num == 0 || info.qp_num > 0xFFFFFF)
    return InvalidArgument(Bad("QP number " + std::to_string(info.qp_num)));
  if (info.psn > 0xFFFFFF) return InvalidArgument(Bad("PSN " + std::to_string(info.psn) + " exceeds 24 bits"));
  if (info.link_layer == LinkLayer::kInfiniBand && info.lid == 0) {
    return InvalidArgument(Bad("InfiniBand port without a LID (is the subnet manager running?)"));
  }
  if (info.link_layer == LinkLayer::kEthernet &&
      std::all_of(info.gid.begin(), info.gid.end(), [](uint8_t b) { return b == 0; })) {
    return InvalidArgument(Bad("RoCE port without a GID"));
  }
  if (info.slots == 0 || info.slots > kMaxSlots || (info.slots & (info.slots - 1)) != 0) {
    return InvalidArgument(
        Bad(std::to_string(info.slots) + " ring slots (a power of two, 1 to " + std::to_string(kMaxSlots) + ")"));
  }
  if (info.slot_bytes < kMinSlotBytes || info.slot_bytes > kMaxSlotBytes || info.slot_bytes % 64 != 0) {
    return InvalidArgument(Bad("slot size " + std::to_string(info.slot_bytes)));
  }
  if (info.ring_addr == 0) return InvalidArgument(Bad("null ring address"));
  if (info.notice_addr == 0) return InvalidArgument(Bad("null notice address"));
  *out = info;
  return Status::Ok();
}

// --- Immediate data -----------------------------------------------------------------

uint32_t EncodeDataImm(bool last, uint32_t slot, uint32_t length) {
  return (static_cast<uint32_t>(ImmKind::kData) << 30) | (last ? 1u << 29 : 0u) | ((slot & 0x7F) << 22) |
         ((length - 1) & 0x3FFFFF);
}

uint32_t EncodeCreditImm(uint32_t first_sequence, uint32_t count) {
  return (static_cast<uint32_t>(ImmKind::kCredit) << 30) | ((count & 0x3FFF) << 16) | (first_sequence & 0xFFFF);
}

uint32_t EncodeNoticeImm(uint32_t code, uint32_t text_length) {
  return (static_cast<uint32_t>(ImmKind::kNotice) << 30) | ((code & 0x3F) << 24) | (text_length & 0xFFFFFF);
}

Status DecodeImm(uint32_t imm, Immediate* out) {
  Immediate d;
  switch (imm >> 30) {
    case 0:
      d.kind = ImmKind::kData;
      d.last = (imm >> 29) & 1;
      d.slot = (imm >> 22) & 0x7F;
      d.length = (imm & 0x3FFFFF) + 1;
      break;
    case 1:
      d.kind = ImmKind::kCredit;
      d.count = (imm >> 16) & 0x3FFF;
      d.first_sequence_low = static_cast<uint16_t>(imm & 0xFFFF);
      if (d.count == 0) return InvalidArgument("ibverbs credit message returning no slots");
      break;
    case 2:
      d.kind = ImmKind::kNotice;
      d.code = (imm >> 24) & 0x3F;
      d.text_length = imm & 0xFFFFFF;
      if (d.text_length > kNoticeBytes) {
        return InvalidArgument("ibverbs failure notice of " + std::to_string(d.text_length) + " bytes (at most " +
                               std::to_string(kNoticeBytes) + ")");
      }
      break;
    default:
      return InvalidArgument("ibverbs immediate of unknown kind 3");
  }
  *out = d;
  return Status::Ok();
}

}  // namespace ibverbs
}  // namespace tessera
