// Call stamps arrive from peers (TCP headers, shm slots, watch replies): any 24 bytes
// must describe as readable text, and a mismatch between any two stamps must read as an
// InvalidUsage naming both ranks.
#include <cstdlib>

#include "base/call_stamp.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::FuzzInput in(data, size);
  const auto mine = in.Take<tessera::CallStamp>();
  const auto theirs = in.Take<tessera::CallStamp>();
  const int rank = in.Take<int32_t>();
  const int peer = in.Take<int32_t>();
  const std::string how = in.Rest();

  if (tessera::DescribeCall(mine).empty() || tessera::DescribeCall(theirs).empty()) std::abort();
  if (tessera::DescribeBytes(theirs.count).empty()) std::abort();
  const tessera::Status a = tessera::MismatchedCalls(rank, mine, peer, theirs);
  const tessera::Status b = tessera::MismatchedCallDigest(rank, mine, peer, how);
  if (a.code() != tessera::Code::kInvalidUsage || b.code() != tessera::Code::kInvalidUsage) std::abort();
  return 0;
}
