// The diagnosis watch service's bytes from the network: the request the service reads
// (24 bytes, against a secret from the input; a status, status-and-dump, offer or
// timings request), the straggler verdict a timings request carries, and the replies
// that QueryPeers and QueryTimings decode, which must stay within their limits.
#include <cstdlib>

#include "diagnosis/watch.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  const uint64_t secret = in.Take<uint64_t>();
  WatchRequest kind;
  const Status r = DecodeWatchRequest(in.TakeBytes(kWatchRequestBytes), secret, &kind);
  const bool known = kind == WatchRequest::kStatus || kind == WatchRequest::kStatusAndDump ||
                     kind == WatchRequest::kOffer || kind == WatchRequest::kTimings;
  if (r.ok() && !known) std::abort();

  const int nranks = static_cast<int>(in.Take<uint16_t>());
  StragglerVerdict verdict;
  if (DecodeStragglerVerdict(in.TakeBytes(in.Take<uint16_t>() % (kMaxStragglerVerdictBytes + 8)), nranks, &verdict).ok()) {
    if (verdict.rank >= nranks || verdict.waiters.size() > kMaxVerdictWaiters) std::abort();
    for (int32_t w : verdict.waiters) {
      if (w < 0 || w >= nranks) std::abort();
    }
  }
  const std::string reply = in.Rest();
  RankTimings timings;
  int timing_rank = 0;
  if (DecodeTimings(reply, &timing_rank, &timings).ok() &&
      (timings.stalls.size() > Activity::kTimingSlots || timings.covered_from == 0)) {
    std::abort();
  }
  int rank = 0, pid = 0;
  ActivitySnapshot snapshot;
  if (!DecodeSnapshot(reply, &rank, &pid, &snapshot).ok()) return 0;
  if (snapshot.waiting_on.size() > kMaxWatchPeers || snapshot.culprits.size() > kMaxWatchPeers ||
      snapshot.verdict.size() > kMaxVerdictBytes) {
    std::abort();
  }
  return 0;
}
