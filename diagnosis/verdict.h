// The verdict: from what one rank learnt about every rank of its communicator when a
// call failed, who is to blame. A pure function, so every survivor that learns the same
// facts names the same culprits; survivors also adopt a verdict already given (the one
// of the lowest-ranked rank that has one), so they agree even when their views differ.
//
// A rank is a culprit when it
// - does not answer (stopped, hung, cut off) or refuses (its process is gone);
// - answers but has not called the collective the others wait in (outside tessera), or
//   is still in an earlier one;
// - is in a different call at the same sequence number than most (mismatched calls).
// A rank that is in the same call, waiting, is never a culprit. When this rank could
// not even send to its peers (network down, packets dropped locally), the ranks of its
// own host are the culprits.
#ifndef TESSERA_DIAGNOSIS_VERDICT_H_
#define TESSERA_DIAGNOSIS_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "diagnosis/activity.h"
#include "diagnosis/watch.h"

namespace tessera {

// What this rank knows of one rank (itself included: kAnswered with its own snapshot).
struct RankFacts {
  int pid = 0;
  std::string host;
  bool same_host = false;  // as this rank
  PeerAnswer answer;
  // Same host only, from /proc: "exited", "stopped (SIGSTOP or a debugger)", or "".
  std::string process_state;
};

struct Verdict {
  std::string text;  // ends with "[culprit: rank 1]" / "[culprit: ranks 2, 3]" when any
  std::vector<int32_t> culprits;
  bool adopted = false;  // taken from another rank's verdict
  int adopted_from = -1;
};

Verdict Judge(int my_rank, const std::vector<RankFacts>& ranks);

// "[culprit: rank 1]", "[culprit: ranks 2, 3]".
std::string CulpritTag(const std::vector<int32_t>& culprits);
// The ranks of the last such tag in `text` (none when it has none, or names no rank).
std::vector<int32_t> CulpritsOfTag(const std::string& text);

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_VERDICT_H_
