// What ibverbs ranks exchange: round trips of the rank summary, the connection data and
// the immediates, and rejection of other versions, lengths and out-of-range fields.
#include "transport/ibverbs/wire_format.h"

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

ConnectionInfo SampleInfo() {
  ConnectionInfo i;
  i.rank = 3;
  i.peer = 70000;
  i.link_layer = LinkLayer::kEthernet;
  i.port = 2;
  i.mtu = 5;
  i.gid_index = 3;
  i.lid = 0;
  i.qp_num = 0xABCDEF;
  i.psn = 0x123456;
  for (int k = 0; k < 16; ++k) i.gid[k] = static_cast<uint8_t>(0xF0 + k);
  i.ring_addr = 0x00007F1234567000ull;
  i.ring_rkey = 0xDEADBEEF;
  i.slots = 16;
  i.slot_bytes = 1 << 20;
  i.notice_addr = 0x0000561200001000ull;
  i.notice_rkey = 0x0BADCAFE;
  return i;
}

// Offsets of the wire struct, as documented in wire_format.h.
constexpr size_t kVersionOffset = 4;
constexpr size_t kLengthOffset = 6;
constexpr size_t kQpNumOffset = 24;
constexpr size_t kSlotsOffset = 60;
constexpr size_t kNoticeAddrOffset = 68;

void PutU32(std::string* s, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) (*s)[at + k] = static_cast<char>(v >> (8 * k));
}

TEST(ConnectionInfoTest, RoundTripsEveryField) {
  const ConnectionInfo in = SampleInfo();
  const std::string bytes = SerializeConnectionInfo(in);
  ASSERT_EQ(bytes.size(), kConnectionInfoBytes);
  ConnectionInfo out;
  ASSERT_TRUE(ParseConnectionInfo(bytes, &out).ok());
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.peer, in.peer);
  EXPECT_EQ(out.link_layer, in.link_layer);
  EXPECT_EQ(out.port, in.port);
  EXPECT_EQ(out.mtu, in.mtu);
  EXPECT_EQ(out.gid_index, in.gid_index);
  EXPECT_EQ(out.lid, in.lid);
  EXPECT_EQ(out.qp_num, in.qp_num);
  EXPECT_EQ(out.psn, in.psn);
  EXPECT_EQ(out.gid, in.gid);
  EXPECT_EQ(out.ring_addr, in.ring_addr);
  EXPECT_EQ(out.ring_rkey, in.ring_rkey);
  EXPECT_EQ(out.slots, in.slots);
  EXPECT_EQ(out.slot_bytes, in.slot_bytes);
  EXPECT_EQ(out.notice_addr, in.notice_addr);
  EXPECT_EQ(out.notice_rkey, in.notice_rkey);
}

TEST(ConnectionInfoTest, IsLittleEndianWithMagicVersionAndLength) {
  const std::string bytes = SerializeConnectionInfo(SampleInfo());
  EXPECT_EQ(bytes.substr(0, 4), "TSIB");
  EXPECT_EQ(static_cast<uint8_t>(bytes[kVersionOffset]), kConnectionVersion);
  EXPECT_EQ(static_cast<uint8_t>(bytes[kLengthOffset]), kConnectionInfoBytes);
  EXPECT_EQ(static_cast<uint8_t>(bytes[kQpNumOffset]), 0xEF);  // low byte first
  EXPECT_EQ(static_cast<uint8_t>(bytes[kQpNumOffset + 2]), 0xAB);
  // Version 2: the notice area's address and key fill what version 1 kept reserved,
  // up to the last byte.
  EXPECT_EQ(static_cast<uint8_t>(bytes[kNoticeAddrOffset]), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(bytes[kNoticeAddrOffset + 1]), 0x10);
  EXPECT_EQ(static_cast<uint8_t>(bytes[kConnectionInfoBytes - 1]), 0x0B);
}

TEST(ConnectionInfoTest, RejectsOtherVersionsNamingBoth) {
  std::string bytes = SerializeConnectionInfo(SampleInfo());
  bytes[kVersionOffset] = 1;  // the version before the notice area had its own address
  ConnectionInfo out;
  Status s = ParseConnectionInfo(bytes, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("version 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("speaks version 2"), std::string::npos) << s.message();
  bytes[kVersionOffset] = 3;
  // A newer version is refused even when it is longer.
  bytes.append(16, '\0');
  EXPECT_NE(ParseConnectionInfo(bytes, &out).message().find("version 3"), std::string::npos);
}

TEST(ConnectionInfoTest, RejectsWrongLengths) {
  const std::string good = SerializeConnectionInfo(SampleInfo());
  ConnectionInfo out;
  EXPECT_EQ(ParseConnectionInfo("", &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseConnectionInfo(good.substr(0, 7), &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseConnectionInfo(good.substr(0, kConnectionInfoBytes - 1), &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseConnectionInfo(good + "x", &out).code(), Code::kInvalidArgument);
  std::string bad_length_field = good;
  bad_length_field[kLengthOffset] = 79;
  Status s = ParseConnectionInfo(bad_length_field, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("length field 79"), std::string::npos) << s.message();
}

TEST(ConnectionInfoTest, RejectsBadMagic) {
  std::string bytes = SerializeConnectionInfo(SampleInfo());
  bytes[0] = 'X';
  ConnectionInfo out;
  EXPECT_NE(ParseConnectionInfo(bytes, &out).message().find("bad magic"), std::string::npos);
}

TEST(ConnectionInfoTest, RejectsFieldsOutOfRange) {
  struct Case {
    const char* what;
    void (*mutate)(ConnectionInfo*);
  };
  const Case cases[] = {
      {"QP number", [](ConnectionInfo* i) { i->qp_num = 0x1000000; }},
      {"QP number", [](ConnectionInfo* i) { i->qp_num = 0; }},
      {"PSN", [](ConnectionInfo* i) { i->psn = 0x1000000; }},
      {"MTU", [](ConnectionInfo* i) { i->mtu = 6; }},
      {"MTU", [](ConnectionInfo* i) { i->mtu = 0; }},
      {"port 0", [](ConnectionInfo* i) { i->port = 0; }},
      {"ring slots", [](ConnectionInfo* i) { i->slots = 0; }},
      {"ring slots", [](ConnectionInfo* i) { i->slots = 256; }},
      {"ring slots", [](ConnectionInfo* i) { i->slots = 12; }},  // not a power of two
      {"slot size", [](ConnectionInfo* i) { i->slot_bytes = 100; }},
      {"slot size", [](ConnectionInfo* i) { i->slot_bytes = (4u << 20) + 64; }},
      {"slot size", [](ConnectionInfo* i) { i->slot_bytes = 4096 + 32; }},
      {"null ring", [](ConnectionInfo* i) { i->ring_addr = 0; }},
      {"null notice", [](ConnectionInfo* i) { i->notice_addr = 0; }},
      {"without a GID", [](ConnectionInfo* i) { i->gid = Gid{}; }},
      {"without a LID", [](ConnectionInfo* i) { i->link_layer = LinkLayer::kInfiniBand; }},
  };
  for (const Case& c : cases) {
    ConnectionInfo info = SampleInfo();
    c.mutate(&info);
    ConnectionInfo out;
    Status s = ParseConnectionInfo(SerializeConnectionInfo(info), &out);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.what), std::string::npos) << c.what << ": " << s.message();
  }
  // An unknown link layer byte.
  std::string bytes = SerializeConnectionInfo(SampleInfo());
  bytes[16] = 7;
  ConnectionInfo out;
  EXPECT_NE(ParseConnectionInfo(bytes, &out).message().find("link layer 7"), std::string::npos);
}

TEST(ConnectionInfoTest, AcceptsInfiniBandWithLidAndNoGid) {
  ConnectionInfo info = SampleInfo();
  info.link_layer = LinkLayer::kInfiniBand;
  info.lid = 17;
  info.gid = Gid{};
  ConnectionInfo out;
  ASSERT_TRUE(ParseConnectionInfo(SerializeConnectionInfo(info), &out).ok());
  EXPECT_EQ(out.lid, 17);
}

TEST(ConnectionInfoTest, SlotsFieldIsWhereDocumented) {
  std::string bytes = SerializeConnectionInfo(SampleInfo());
  PutU32(&bytes, kSlotsOffset, 64);
  ConnectionInfo out;
  ASSERT_TRUE(ParseConnectionInfo(bytes, &out).ok());
  EXPECT_EQ(out.slots, 64u);
}

TEST(RankSummaryTest, RoundTripsAndChecksCompatibility) {
  RankSummary ib{LinkLayer::kInfiniBand, 0xFE80000000000000ull};
  RankSummary out;
  const std::string bytes = SerializeRankSummary(ib);
  ASSERT_EQ(bytes.size(), kRankSummaryBytes);
  ASSERT_TRUE(ParseRankSummary(bytes, &out).ok());
  EXPECT_EQ(out.link_layer, LinkLayer::kInfiniBand);
  EXPECT_EQ(out.subnet_prefix, ib.subnet_prefix);

  RankSummary other_subnet{LinkLayer::kInfiniBand, 0xFE80000000000001ull};
  RankSummary roce{LinkLayer::kEthernet, 0};
  RankSummary roce2{LinkLayer::kEthernet, 42};  // the prefix does not matter on Ethernet
  EXPECT_TRUE(SummariesCompatible(ib, ib));
  EXPECT_FALSE(SummariesCompatible(ib, other_subnet));
  EXPECT_FALSE(SummariesCompatible(ib, roce));
  EXPECT_TRUE(SummariesCompatible(roce, roce2));
  EXPECT_FALSE(out.gpu_direct);

  // The GPUDirect flag travels in the byte after the link layer, and compatibility does
  // not depend on it (a pair without GPUDirect still connects for host memory).
  RankSummary gdr{LinkLayer::kEthernet, 0, true};
  const std::string gdr_bytes = SerializeRankSummary(gdr);
  EXPECT_EQ(static_cast<uint8_t>(gdr_bytes[7]), 1);
  ASSERT_TRUE(ParseRankSummary(gdr_bytes, &out).ok());
  EXPECT_TRUE(out.gpu_direct);
  EXPECT_TRUE(SummariesCompatible(gdr, roce));
}

TEST(RankSummaryTest, RejectsBadInput) {
  RankSummary out;
  const std::string good = SerializeRankSummary(RankSummary{LinkLayer::kEthernet, 0});
  EXPECT_EQ(ParseRankSummary(good.substr(0, 15), &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseRankSummary(good + "!", &out).code(), Code::kInvalidArgument);
  std::string v2 = good;
  v2[4] = 2;
  EXPECT_NE(ParseRankSummary(v2, &out).message().find("version 2"), std::string::npos);
  std::string magic = good;
  magic[1] = 0;
  EXPECT_NE(ParseRankSummary(magic, &out).message().find("magic"), std::string::npos);
  std::string layer = good;
  layer[6] = 0;
  EXPECT_NE(ParseRankSummary(layer, &out).message().find("link layer"), std::string::npos);
  std::string flags = good;
  flags[7] = 6;  // flags this build does not know
  EXPECT_NE(ParseRankSummary(flags, &out).message().find("unknown flags 6"), std::string::npos);
}

TEST(ImmediateTest, DataRoundTripsAtTheLimits) {
  const struct {
    bool last;
    uint32_t slot, length;
  } cases[] = {{false, 0, 1}, {true, 127, kMaxSlotBytes}, {true, 5, 4096}, {false, 64, 123457}};
  for (const auto& c : cases) {
    Immediate d;
    ASSERT_TRUE(DecodeImm(EncodeDataImm(c.last, c.slot, c.length), &d).ok());
    EXPECT_EQ(d.kind, ImmKind::kData);
    EXPECT_EQ(d.last, c.last);
    EXPECT_EQ(d.slot, c.slot);
    EXPECT_EQ(d.length, c.length);
  }
}

TEST(ImmediateTest, CreditAndNoticeRoundTrip) {
  Immediate d;
  ASSERT_TRUE(DecodeImm(EncodeCreditImm(0x12345678, 128), &d).ok());
  EXPECT_EQ(d.kind, ImmKind::kCredit);
  EXPECT_EQ(d.count, 128u);
  EXPECT_EQ(d.first_sequence_low, 0x5678);  // only the low 16 bits travel
  ASSERT_TRUE(DecodeImm(EncodeNoticeImm(8, kNoticeBytes), &d).ok());
  EXPECT_EQ(d.kind, ImmKind::kNotice);
  EXPECT_EQ(d.code, 8u);
  EXPECT_EQ(d.text_length, kNoticeBytes);
}

TEST(ImmediateTest, RejectsWhatCannotBeSent) {
  Immediate d;
  EXPECT_EQ(DecodeImm(0xC0000000u, &d).code(), Code::kInvalidArgument);            // kind 3
  EXPECT_EQ(DecodeImm(EncodeCreditImm(1, 0), &d).code(), Code::kInvalidArgument);  // no slots
  EXPECT_EQ(DecodeImm(EncodeNoticeImm(6, kNoticeBytes + 1), &d).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
