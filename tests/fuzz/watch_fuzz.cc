// The diagnosis watch service's bytes from the network: the request the service reads
// (24 bytes, against a secret from the input; a status, status-and-dump or offer request)
// and a reply that QueryPeers decodes, which must stay within the reply's limits.
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
                     kind == WatchRequest::kOffer;
  if (r.ok() && !known) std::abort();

  const std::string reply = in.Rest();
  int rank = 0, pid = 0;
  ActivitySnapshot snapshot;
  if (!DecodeSnapshot(reply, &rank, &pid, &snapshot).ok()) return 0;
  if (snapshot.waiting_on.size() > kMaxWatchPeers || snapshot.culprits.size() > kMaxWatchPeers ||
      snapshot.verdict.size() > kMaxVerdictBytes) {
    std::abort();
  }
  return 0;
}
