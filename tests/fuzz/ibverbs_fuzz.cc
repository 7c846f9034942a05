// ibverbs connection data from peers: the rank summary card (16 bytes, in the
// rendezvous), the connection info swapped over the control link (80 bytes) and the
// 32-bit immediates of RDMA writes. Each parses or gives an InvalidArgument; what
// parses serializes back to the same bytes.
#include <cstdlib>

#include "tests/fuzz/fuzz_input.h"
#include "transport/ibverbs/wire_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  using namespace tessera::ibverbs;
  FuzzInput in(data, size);
  const uint32_t imm = in.Take<uint32_t>();
  Immediate decoded;
  const Status i = DecodeImm(imm, &decoded);
  if (!i.ok() && i.code() != Code::kInvalidArgument) std::abort();

  const std::string summary_bytes = in.TakeBytes(kRankSummaryBytes);
  RankSummary summary;
  if (ParseRankSummary(summary_bytes, &summary).ok()) SummariesCompatible(summary, summary);

  ConnectionInfo info;
  const Status c = ParseConnectionInfo(in.Rest(), &info);
  if (c.ok()) {
    ConnectionInfo again;
    if (!ParseConnectionInfo(SerializeConnectionInfo(info), &again).ok()) std::abort();
  } else if (c.code() != Code::kInvalidArgument) {
    std::abort();
  }
  return 0;
}
