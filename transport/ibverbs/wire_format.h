// What ibverbs ranks tell each other, byte for byte: the summary a rank publishes at the
// rendezvous (can it do RDMA, over which link layer), the connection data two ranks
// swap when they connect a queue pair, and the 32-bit immediate that travels with every
// RDMA write or send on a link. All pure: serialization, parsing and validation are
// tested without a device.
//
// Multi-byte fields are little-endian on the wire (explicitly, byte by byte), so a
// mixed-endian job still parses; the immediate is converted with htonl/ntohl by the
// caller, as the verbs API hands it over in network order.
#ifndef TESSERA_TRANSPORT_IBVERBS_WIRE_FORMAT_H_
#define TESSERA_TRANSPORT_IBVERBS_WIRE_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace tessera {
namespace ibverbs {

// How a port carries RDMA. Values are the wire encoding (not ibverbs' IBV_LINK_LAYER_*).
enum class LinkLayer : uint8_t {
  kInfiniBand = 1,
  kEthernet = 2,  // RoCE
};

const char* LinkLayerName(LinkLayer layer);  // "InfiniBand", "Ethernet (RoCE)"

using Gid = std::array<uint8_t, 16>;

// --- Rank summary: published once per rank at the rendezvous -----------------------
// A rank without a usable device publishes nothing (an empty string); two ranks connect
// over ibverbs only if both published summaries with the same link layer (and, on
// InfiniBand, the same subnet prefix, i.e. the upper 64 bits of the GID).
struct RankSummary {
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  uint64_t subnet_prefix = 0;  // InfiniBand only; 0 on Ethernet
  // The rank can register CUDA device memory with its NIC (GPUDirect RDMA: a CUDA
  // driver, and dma-buf support or the nvidia-peermem module). Bit 0 of the flags byte.
  bool gpu_direct = false;
};

constexpr size_t kRankSummaryBytes = 16;

std::string SerializeRankSummary(const RankSummary& summary);
// InvalidArgument naming what is wrong (size, magic, version, link layer).
Status ParseRankSummary(const std::string& bytes, RankSummary* out);
// Whether ranks with these summaries can reach each other with RDMA.
bool SummariesCompatible(const RankSummary& a, const RankSummary& b);

// --- Connection data: swapped by two ranks connecting one RC queue pair --------------
// Everything the peer needs to move its queue pair to RTR/RTS and write into our ring.
struct ConnectionInfo {
  uint32_t rank = 0;  // who sent this
  uint32_t peer = 0;  // whom it is meant for
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  uint8_t port = 1;        // physical port number on the sender's device
  uint8_t mtu = 3;         // the port's active MTU, as enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint8_t gid_index = 0;   // the sender's GID table index (informational)
  uint16_t lid = 0;        // InfiniBand local identifier (0 on Ethernet)
  uint32_t qp_num = 0;     // 24 bits
  uint32_t psn = 0;        // initial packet sequence number, 24 bits
  Gid gid{};               // the sender's GID (needed on Ethernet and across IB subnets)
  uint64_t ring_addr = 0;  // the sender's receive ring of slots (host or, with GPUDirect, device memory)
  uint32_t ring_rkey = 0;
  uint32_t slots = 0;       // number of slots in the ring
  uint32_t slot_bytes = 0;  // bytes per slot
  uint64_t notice_addr = 0;  // the sender's notice area (kNoticeBytes of host memory)
  uint32_t notice_rkey = 0;
};

// The wire struct: 4 magic + 2 version + 2 length + fields, 80 bytes. Version 2 named
// the notice area apart from the ring (which may be device memory), in what version 1
// kept as 12 reserved bytes.
constexpr uint32_t kConnectionMagic = 0x42495354;  // "TSIB" read as little-endian
constexpr uint16_t kConnectionVersion = 2;
constexpr size_t kConnectionInfoBytes = 80;

// Limits of the ring geometry that the immediate can describe.
constexpr uint32_t kMaxSlots = 128;           // 7 bits of slot index; slots are a power of two
constexpr uint32_t kMaxSlotBytes = 4u << 20;  // 22 bits of (length - 1)
constexpr uint32_t kMinSlotBytes = 4096;      // one page; also a multiple of 64
// The notice area, where a failing peer writes its failure notice.
constexpr uint32_t kNoticeBytes = 1024;

std::string SerializeConnectionInfo(const ConnectionInfo& info);
// Validates size, magic, version, length field and every field's range (24-bit QP
// number and PSN, MTU enum, link layer, ring geometry, a LID on InfiniBand, a GID on
// Ethernet, a ring address and a notice address). InvalidArgument naming the first problem.
Status ParseConnectionInfo(const std::string& bytes, ConnectionInfo* out);

// --- Immediate data -----------------------------------------------------------------
// bits 31..30  kind: 0 data, 1 credit, 2 notice
// data:    bit 29 last piece of its message; bits 28..22 ring slot; bits 21..0 length-1
// credit:  bits 29..16 number of slots freed; bits 15..0 low 16 bits of the first
//          freed slot's sequence number (the freed slots are consecutive)
// notice:  bits 29..24 Status code; bits 23..0 length of the text in the notice area
enum class ImmKind : uint8_t { kData = 0, kCredit = 1, kNotice = 2 };

struct Immediate {
  ImmKind kind = ImmKind::kData;
  // data
  bool last = false;
  uint32_t slot = 0;
  uint32_t length = 0;  // 1 ... kMaxSlotBytes
  // credit
  uint16_t first_sequence_low = 0;
  uint32_t count = 0;  // 1 ... 2^14 - 1
  // notice
  uint32_t code = 0;
  uint32_t text_length = 0;
};

// Preconditions (checked by callers, asserted by tests): slot < kMaxSlots,
// 1 <= length <= kMaxSlotBytes; 1 <= count < 2^14; code < 64, text_length <= kNoticeBytes.
uint32_t EncodeDataImm(bool last, uint32_t slot, uint32_t length);
uint32_t EncodeCreditImm(uint32_t first_sequence, uint32_t count);
uint32_t EncodeNoticeImm(uint32_t code, uint32_t text_length);
// InvalidArgument for kind 3 or a notice longer than kNoticeBytes.
Status DecodeImm(uint32_t imm, Immediate* out);

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_WIRE_FORMAT_H_
