// Diagnose: when a call of this rank failed because of a peer (a timeout, a peer gone,
// a peer's failure notice), ask every rank's watch service where it is (in parallel,
// bounded by TESSERA_DIAGNOSIS_MS), look at the processes of this host in /proc, and
// judge (verdict.h). An answer that already carries a verdict ends the asking at once
// and is adopted, so only the first rank to diagnose waits out silent peers.
#ifndef TESSERA_DIAGNOSIS_DIAGNOSE_H_
#define TESSERA_DIAGNOSIS_DIAGNOSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/socket.h"
#include "diagnosis/activity.h"
#include "diagnosis/verdict.h"
#include "diagnosis/watch.h"

namespace tessera {

// Who the ranks of a communicator are, from its rendezvous.
struct Membership {
  int rank = 0;
  uint64_t secret = 0;
  std::vector<SocketAddress> watch;  // each rank's watch service
  std::vector<int> pids;
  std::vector<std::string> hosts;
};

// `mine` is this rank's activity (its own facts). With `dump`, every rank that answers
// also writes its flight record (WatchRequest::kStatusAndDump).
Verdict Diagnose(const Membership& who, const Activity& mine, bool dump, const Deadline& deadline);

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_DIAGNOSE_H_
