// The TCP link's message header as it comes from the network: a header with another
// call's stamp, or with any bytes at all, fails the receive with InvalidUsage and a
// readable text, never a crash, and nothing is reduced into the destination.
//
// The test plays rank 0 with raw sockets against a TcpTransport of rank 1, so it can
// write whatever header it likes. It speaks the wire format of tcp_transport.cc: the
// connection hello (magic, secret, rank, stream) and the 40-byte message header
// (length, sequence number, call stamp).
#include "transport/tcp/tcp_transport.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transport/exchange.h"

namespace tessera {
namespace {

constexpr uint64_t kSecret = 0x5eed;

struct Hello {  // ConnectHello of tcp_transport.cc
  uint64_t magic = 0x74657373746370ull;
  uint64_t secret = kSecret;
  int32_t rank = 0;
  int32_t stream = 0;
};

struct Header {  // MessageHeader of tcp_transport.cc
  uint64_t bytes;
  uint64_t sequence;
  CallStamp call;
};
static_assert(sizeof(Header) == 40, "the header is 40 bytes on the wire");

CallStamp AllReduceStamp(uint64_t count) {
  CallStamp s;
  s.seq = 4;
  s.count = count;
  s.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  s.type = static_cast<uint8_t>(DataType::kFloat32);
  return s;
}

void AddFloats(void* dst, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<float*>(dst)[i] = static_cast<const float*>(a)[i] + static_cast<const float*>(b)[i];
  }
}

// Rank 1's transport with one single-stream link from a raw rank 0.
class RawLink {
 public:
  Status Open() {
    Socket listener;
    SocketAddress address;
    TESSERA_RETURN_IF_ERROR(Listen("127.0.0.1", 0, &listener, &address));
    TcpTransport::Options options;
    options.streams = 1;
    options.congestion = "system";
    transport_ = std::make_unique<TcpTransport>(options, 1, kSecret, std::move(listener),
                                                std::vector<SocketAddress>{address, address});
    const Deadline deadline = Deadline::AfterMs(5000);
    TESSERA_RETURN_IF_ERROR(tessera::Connect(address, deadline, &rank0_));
    Hello hello;
    TESSERA_RETURN_IF_ERROR(SendAll(rank0_, &hello, sizeof(hello), deadline));
    return transport_->Connect(0, deadline, &link_);
  }

  // Sends `header` and `payload` bytes as rank 0, and receives (reducing) a message of
  // `expected` bytes as rank 1 in the call `mine`.
  Status Receive(const Header& header, size_t payload, size_t expected, const CallStamp& mine) {
    std::vector<char> wire(sizeof(header) + payload, 7);
    std::memcpy(wire.data(), &header, sizeof(header));
    TESSERA_RETURN_IF_ERROR(SendAll(rank0_, wire.data(), wire.size(), Deadline::AfterMs(5000)));
    dst_.assign(expected / sizeof(float), -1.0f);
    acc_.assign(expected / sizeof(float), 1.0f);
    Reducer sum;
    sum.fn = AddFloats;
    sum.elem_size = sizeof(float);
    Transfer t = Transfer::RecvReduce(link_.get(), dst_.data(), acc_.data(), &sum, expected);
    ExchangeOptions options;
    options.deadline = Deadline::AfterMs(5000);
    options.timeout_ms = 5000;
    options.stamp = &mine;
    return Exchange(&t, 1, options);
  }

  bool DestinationUntouched() const {
    for (float v : dst_) {
      if (v != -1.0f) return false;
    }
    return true;
  }
  const std::vector<float>& destination() const { return dst_; }
  Link* link() const { return link_.get(); }
  const Socket& rank0() const { return rank0_; }

 private:
  std::unique_ptr<TcpTransport> transport_;
  Socket rank0_;
  std::unique_ptr<Link> link_;
  std::vector<float> dst_, acc_;
};

TEST(TcpHeader, MatchingCallIsReceived) {
  RawLink raw;
  ASSERT_TRUE(raw.Open().ok());
  const CallStamp call = AllReduceStamp(256);
  const Status s = raw.Receive(Header{1024, 0, call}, 1024, 1024, call);
  ASSERT_TRUE(s.ok()) << s.message();
  for (float v : raw.destination()) ASSERT_NE(v, -1.0f);
}

TEST(TcpHeader, AnotherCallIsNamed) {
  RawLink raw;
  ASSERT_TRUE(raw.Open().ok());
  const Status s = raw.Receive(Header{1024, 0, AllReduceStamp(512)}, 1024, 1024, AllReduceStamp(256));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("mismatched calls: rank 0 called allreduce #4 (512 x float32 = 2 KiB, sum) but rank 1 "
                             "called allreduce #4 (256 x float32 = 1 KiB, sum)"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(raw.DestinationUntouched());
}

TEST(TcpHeader, SameCallOtherLengthIsASizeMismatch) {
  RawLink raw;
  ASSERT_TRUE(raw.Open().ok());
  const CallStamp call = AllReduceStamp(256);
  const Status s = raw.Receive(Header{2048, 0, call}, 1024, 1024, call);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("message size mismatch: rank 0 sent 2048 bytes, this rank expected 1024"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(raw.DestinationUntouched());
}

// A send whose bytes do not exist yet (a ring forwarding a block it is still
// receiving) puts nothing on the wire; once they exist, the header goes with them.
TEST(TcpSend, HeaderWaitsForTheFirstBytes) {
  RawLink raw;
  ASSERT_TRUE(raw.Open().ok());
  const float data[2] = {1.5f, 2.5f};
  raw.link()->SetCall(AllReduceStamp(2));
  raw.link()->BeginSend(data, sizeof(data));
  bool progressed = true, done = true;
  ASSERT_TRUE(raw.link()->ProgressSend(0, &progressed, &done).ok());
  EXPECT_FALSE(progressed);
  EXPECT_FALSE(done);
  char byte;
  EXPECT_EQ(::recv(raw.rank0().fd(), &byte, 1, MSG_DONTWAIT | MSG_PEEK), -1) << "bytes sent before any were ready";
  ASSERT_TRUE(raw.link()->ProgressSend(sizeof(data), &progressed, &done).ok());
  EXPECT_TRUE(progressed);
  EXPECT_TRUE(done);
  char wire[sizeof(Header) + sizeof(data)];
  ASSERT_TRUE(RecvAll(raw.rank0(), wire, sizeof(wire), Deadline::AfterMs(5000)).ok());
  Header header;
  std::memcpy(&header, wire, sizeof(header));
  EXPECT_EQ(header.bytes, sizeof(data));
  EXPECT_EQ(std::memcmp(wire + sizeof(header), data, sizeof(data)), 0);
}

// Random headers, each on a fresh link (a failed link is not used again).
TEST(TcpHeader, AnyBytesFailReadably) {
  std::mt19937_64 random(15);
  for (int i = 0; i < 50; ++i) {
    RawLink raw;
    ASSERT_TRUE(raw.Open().ok());
    Header garbage;
    unsigned char* bytes = reinterpret_cast<unsigned char*>(&garbage);
    for (size_t b = 0; b < sizeof(garbage); ++b) bytes[b] = static_cast<unsigned char>(random());
    const Status s = raw.Receive(garbage, 512, 1024, AllReduceStamp(256));
    ASSERT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    ASSERT_NE(s.message().find("mismatched calls: rank 0 "), std::string::npos) << s.message();
    ASSERT_NE(s.message().find("rank 1 called allreduce #4 (256 x float32 = 1 KiB, sum)"), std::string::npos)
        << s.message();
    for (char ch : s.message()) ASSERT_TRUE(ch >= 0x20 && ch < 0x7f) << s.message();
    ASSERT_TRUE(raw.DestinationUntouched());
  }
}

}  // namespace
}  // namespace tessera
