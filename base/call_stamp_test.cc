// CallStamp texts: what a mismatched-calls error says, and that any bytes (a stamp read
// from the network) give a readable text, never a crash.
#include "base/call_stamp.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

namespace tessera {
namespace {

CallStamp AllReduce(uint32_t seq, uint64_t count, DataType type, RedOp op) {
  CallStamp s;
  s.seq = seq;
  s.count = count;
  s.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  s.type = static_cast<uint8_t>(type);
  s.op = static_cast<uint8_t>(op);
  return s;
}

TEST(CallStamp, DescribesACall) {
  EXPECT_EQ(DescribeCall(AllReduce(5, 1024, DataType::kFloat32, RedOp::kSum)),
            "allreduce #5 (1024 x float32 = 4 KiB, sum)");
  CallStamp b;
  b.seq = 2;
  b.count = 8;
  b.kind = static_cast<uint8_t>(OpKind::kBroadcast);
  b.type = static_cast<uint8_t>(DataType::kInt32);
  b.root = 1;
  EXPECT_EQ(DescribeCall(b), "broadcast #2 (8 x int32 = 32 B, root 1)");
  EXPECT_EQ(DescribeCall(CallStamp{}), "no collective");
}

TEST(CallStamp, MismatchNamesBothRanksAndCallsLowerRankFirst) {
  const CallStamp a = AllReduce(5, 1024, DataType::kFloat32, RedOp::kSum);
  const CallStamp b = AllReduce(5, 2048, DataType::kFloat32, RedOp::kSum);
  const std::string want =
      "mismatched calls: rank 2 called allreduce #5 (1024 x float32 = 4 KiB, sum) but rank 3 called allreduce #5 "
      "(2048 x float32 = 8 KiB, sum)";
  const Status seen_by_2 = MismatchedCalls(2, a, 3, b);
  EXPECT_EQ(seen_by_2.code(), Code::kInvalidUsage);
  EXPECT_EQ(seen_by_2.message(), want);
  EXPECT_EQ(MismatchedCalls(3, b, 2, a).message(), want);  // the same text from either side
}

TEST(CallStamp, MismatchWithASendOrReceive) {
  const Status s = MismatchedCalls(0, AllReduce(3, 4, DataType::kInt8, RedOp::kMax), 1, CallStamp{});
  EXPECT_EQ(s.message(),
            "mismatched calls: rank 0 called allreduce #3 (4 x int8 = 4 B, max) but rank 1 was in no collective "
            "(a send or receive)");
}

TEST(CallStamp, DigestMismatchNamesOneCall) {
  const Status s = MismatchedCallDigest(3, AllReduce(7, 1, DataType::kFloat64, RedOp::kMin), 1, "a digest");
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(),
            "mismatched calls: rank 3 called allreduce #7 (1 x float64 = 8 B, min) but rank 1 sent a message of "
            "another call (a digest)");
}

// Stamps from the network can hold anything: unknown kinds, types and operators, any
// count (count x size may overflow) and root.
TEST(CallStamp, AnyBytesGiveAReadableText) {
  std::mt19937_64 random(15);
  for (int i = 0; i < 10000; ++i) {
    unsigned char bytes[sizeof(CallStamp)];
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(random());
    if (i % 4 == 0) bytes[12] %= 16;  // often a known kind, so the known paths run too
    if (i % 2 == 0) bytes[13] %= 16;
    CallStamp garbage;
    std::memcpy(&garbage, bytes, sizeof(garbage));
    const CallStamp mine = AllReduce(9, 16, DataType::kFloat32, RedOp::kSum);
    const std::string text = MismatchedCalls(1, mine, 0, garbage).message();
    ASSERT_EQ(text.rfind("mismatched calls: rank 0 ", 0), 0u) << text;
    ASSERT_NE(text.find(" but rank 1 called allreduce #9 (16 x float32 = 64 B, sum)"), std::string::npos) << text;
    for (char ch : text) ASSERT_TRUE(ch >= 0x20 && ch < 0x7f) << "unprintable byte in: " << text;
  }
}

}  // namespace
}  // namespace tessera
