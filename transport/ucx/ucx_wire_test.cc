// The UCX backend's card, tags and failure notices: what is encoded decodes to the same
// thing, and bytes that are not what a peer's encoder wrote are refused with a message
// (the card) or reported as the peer's failure (a notice), never passed on.
#include "transport/ucx/ucx_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

std::string SomeAddress(size_t n) {
  std::string a(n, '\0');
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<char>(i * 131 + 7);
  return a;
}

TEST(UcxCard, CarriesTheWorkerAddressWhole) {
  const std::string address = SomeAddress(211);
  std::string out;
  ASSERT_TRUE(DecodeUcxCard(EncodeUcxCard(address), &out).ok());
  EXPECT_EQ(out, address);
}

TEST(UcxCard, EmptyIsARankWithoutUcx) {
  std::string out = "stale";
  ASSERT_TRUE(DecodeUcxCard("", &out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(UcxCard, RefusesChangedCutOrOverlongCards) {
  const std::string card = EncodeUcxCard(SomeAddress(100));
  std::string out;
  std::string flipped = card;
  flipped[card.size() - 3] ^= 0x10;
  EXPECT_NE(DecodeUcxCard(flipped, &out).message().find("hash"), std::string::npos);
  EXPECT_EQ(DecodeUcxCard(card.substr(0, card.size() - 1), &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeUcxCard(card + "x", &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeUcxCard("UCX", &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeUcxCard(SomeAddress(40), &out).code(), Code::kInvalidArgument);
  const Status big = DecodeUcxCard(EncodeUcxCard(SomeAddress(kMaxUcxWorkerAddress + 1)), &out);
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_NE(big.message().find("at most 1024"), std::string::npos) << big.ToString();
  EXPECT_TRUE(out.empty());
}

TEST(UcxTags, FieldsComeBackFromTheTag) {
  const uint64_t tag = UcxDataTag(262143, 70000, 0xA5, kUcxMaxChunks - 1, true);
  EXPECT_EQ(UcxTagSender(tag), 262143);
  EXPECT_EQ(UcxTagDigest(tag), 0xA5);
  EXPECT_NE(tag & kUcxLastFlag, 0u);
  EXPECT_EQ(tag & kUcxNoticeFlag, 0u);
  // A receive matches the same message whatever the digest and last flag.
  EXPECT_EQ(tag & kUcxDataMatchMask, UcxDataTag(262143, 70000, 0, kUcxMaxChunks - 1, false) & kUcxDataMatchMask);
  EXPECT_EQ(UcxTagSender(UcxNoticeTag(12)), 12);
  EXPECT_NE(UcxNoticeTag(12) & kUcxNoticeFlag, 0u);
}

TEST(UcxTags, CreditsAreNeitherDataNorNotices) {
  const uint64_t credit = UcxCreditTag(12, 4);
  EXPECT_EQ(UcxTagSender(credit), 12);
  EXPECT_EQ(UcxCreditCount(credit), 4u);
  EXPECT_EQ(credit & kUcxCreditMatchMask, UcxCreditTag(12, 0));
  EXPECT_EQ(UcxCreditCount(UcxCreditTag(12, kUcxMaxCredits)), kUcxMaxCredits);
  EXPECT_NE(credit & kUcxNoticeFlag, 0u);  // no data receive matches it
  EXPECT_NE(credit & kUcxNoticeMatchMask, UcxNoticeTag(12) & kUcxNoticeMatchMask);
  EXPECT_EQ(UcxNoticeTag(12) & kUcxNoticeMatchMask, kUcxNoticeFlag);  // what a notice probe matches
}

TEST(UcxTags, DigestTellsCallsApart) {
  CallStamp a;
  a.count = 1024;
  a.seq = 5;
  CallStamp b = a;
  b.type = 1;
  CallStamp c = a;
  c.root = 1;
  EXPECT_NE(UcxCallDigest(a), UcxCallDigest(b));
  EXPECT_NE(UcxCallDigest(a), UcxCallDigest(c));
  EXPECT_EQ(UcxCallDigest(a), UcxCallDigest(CallStamp(a)));
}

// The digest is the CRC-8 of the stamp's fields in order, however it is computed: a
// bitwise CRC here, against the tables the wire code uses.
uint8_t BitwiseCrc8(const CallStamp& call) {
  uint8_t crc = 0;
  auto add = [&crc](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      crc ^= static_cast<uint8_t>(v >> (8 * i));
      for (int b = 0; b < 8; ++b) crc = static_cast<uint8_t>((crc & 0x80) ? (crc << 1) ^ 0x07 : crc << 1);
    }
  };
  add(call.count, 8);
  add(call.seq, 4);
  add(call.kind, 1);
  add(call.type, 1);
  add(call.op, 1);
  add(call.flags, 1);
  add(static_cast<uint32_t>(call.root), 4);
  return crc;
}

TEST(UcxTags, DigestIsTheStampsCrc8) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 1000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    CallStamp c;
    c.count = x;
    c.seq = static_cast<uint32_t>(x >> 11);
    c.kind = static_cast<uint8_t>(x >> 3);
    c.type = static_cast<uint8_t>(x >> 19);
    c.op = static_cast<uint8_t>(x >> 27);
    c.flags = static_cast<uint8_t>(x >> 35);
    c.root = static_cast<int32_t>(x >> 29);
    ASSERT_EQ(UcxCallDigest(c), BitwiseCrc8(c)) << "stamp " << i;
  }
  EXPECT_EQ(UcxCallDigest(CallStamp{}), 0);
}

TEST(UcxNotice, CarriesTheCodeAndTheReason) {
  const Status s = DecodeUcxNotice(3, EncodeUcxNotice(TimeoutError("receiving from rank 1 (ucx)")));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(), "rank 3 failed: receiving from rank 1 (ucx)");
}

TEST(UcxNotice, BadBytesStillReadAsThePeersFailure) {
  EXPECT_EQ(DecodeUcxNotice(2, "ab").message(), "rank 2 failed: (reason lost)");
  EXPECT_EQ(DecodeUcxNotice(2, "").code(), Code::kRemoteError);
  const int32_t success = 0;
  const Status zero = DecodeUcxNotice(2, std::string(reinterpret_cast<const char*>(&success), 4) + "fine");
  EXPECT_EQ(zero.code(), Code::kRemoteError);
  const Status nul = DecodeUcxNotice(2, std::string("\x08\0\0\0cut\0here", 12));
  EXPECT_EQ(nul.code(), Code::kTimeout);
  EXPECT_EQ(nul.message(), "rank 2 failed: cut");
  const std::string longer = EncodeUcxNotice(RemoteError(std::string(5000, 'x')));
  EXPECT_EQ(longer.size(), kMaxUcxNoticeBytes);
}

}  // namespace
}  // namespace tessera
