#include "diagnosis/diagnose.h"

#include "base/process.h"

namespace tessera {

Verdict Diagnose(const Membership& who, const Activity& mine, bool dump, const Deadline& deadline) {
  const size_t n = who.watch.size();
  std::vector<bool> skip(n, false);
  skip[who.rank] = true;
  std::vector<PeerAnswer> answers;
  QueryPeers(who.watch, skip, who.secret, who.rank, dump ? WatchRequest::kStatusAndDump : WatchRequest::kStatus,
             deadline, /*stop_on_verdict=*/true, &answers);
  std::vector<RankFacts> facts(n);
  for (size_t r = 0; r < n; ++r) {
    RankFacts& f = facts[r];
    f.pid = who.pids[r];
    f.host = who.hosts[r];
    f.same_host = who.hosts[r] == who.hosts[who.rank];
    f.answer = answers[r];
    if (f.same_host && r != static_cast<size_t>(who.rank) && f.answer.kind != PeerAnswer::Kind::kAnswered) {
      f.process_state = ProcessState(f.pid);
    }
  }
  facts[who.rank].answer.kind = PeerAnswer::Kind::kAnswered;
  facts[who.rank].answer.pid = who.pids[who.rank];
  facts[who.rank].answer.snapshot = mine.Snapshot();
  return Judge(who.rank, facts);
}

}  // namespace tessera
