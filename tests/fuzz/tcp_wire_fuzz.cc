// What arrives on a TCP listener and link from the network: a connection's hello
// (24 bytes), a failure notice's header and text, and a message header with its 24-byte
// call stamp, checked against a receive taken from the input too.
#include <cstdlib>

#include "tests/fuzz/fuzz_input.h"
#include "transport/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  const uint64_t secret = in.Take<uint64_t>();
  const int nranks = in.Take<uint8_t>();
  const int streams = in.Take<uint8_t>();
  ConnectHello hello;
  const Status h = DecodeConnectHello(in.TakeBytes(sizeof(ConnectHello)), secret, nranks, streams, &hello);
  if (h.ok() && (hello.rank < 0 || hello.rank >= nranks || hello.stream >= streams || hello.stream < kNoticeStream)) {
    std::abort();
  }

  const auto arrived = in.Take<MessageHeader>();
  const auto mine = in.Take<CallStamp>();
  const auto expected_bytes = in.Take<uint64_t>();
  const auto expected_sequence = in.Take<uint64_t>();
  const Status c = CheckMessageHeader(arrived, 0, 1, mine, expected_bytes, expected_sequence);
  if (!c.ok() && c.code() != Code::kInvalidUsage) std::abort();

  NoticeHeader header;
  const Status n = DecodeNoticeHeader(in.TakeBytes(sizeof(NoticeHeader)), &header);
  if (n.ok()) {
    const Status failure = NoticeFailure(hello.rank, header, in.TakeBytes(header.length));
    if (failure.ok() || header.length > kMaxNoticeBytes) std::abort();
  }
  return 0;
}
