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
