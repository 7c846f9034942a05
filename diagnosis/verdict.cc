#include "diagnosis/verdict.h"

#include <algorithm>
#include <map>

#include "topology/host_identity.h"

namespace tessera {
namespace {

using State = ActivitySnapshot::State;
using Kind = PeerAnswer::Kind;

std::string RankList(const std::vector<int32_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string Who(int rank, const RankFacts& f) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(f.pid) + " on host " + HostnameOf(f.host) + ")";
}

std::string Ms(int64_t us) { return std::to_string(std::max<int64_t>(0, us) / 1000) + " ms"; }

// The verdict of the lowest rank that has one, if any.
bool Adopt(const std::vector<RankFacts>& ranks, Verdict* v) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    const PeerAnswer& a = ranks[r].answer;
    if (a.kind == Kind::kAnswered && !a.snapshot.verdict.empty()) {
      v->text = a.snapshot.verdict;
      v->culprits = a.snapshot.culprits;
      v->adopted = true;
      v->adopted_from = static_cast<int>(r);
      return true;
    }
  }
  return false;
}

// The call most answering ranks are in at the highest sequence number seen in calls.
CallStamp ReferenceCall(const std::vector<RankFacts>& ranks, int my_rank) {
  std::map<uint32_t, std::vector<CallStamp>> by_seq;
  for (const RankFacts& f : ranks) {
    const ActivitySnapshot& s = f.answer.snapshot;
    if (f.answer.kind == Kind::kAnswered && s.state != State::kIdle && s.call.seq != 0) by_seq[s.call.seq].push_back(s.call);
  }
  if (by_seq.empty()) return ranks[my_rank].answer.snapshot.call;
  const std::vector<CallStamp>& calls = by_seq.rbegin()->second;
  size_t best = 0, best_votes = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const size_t votes = static_cast<size_t>(std::count(calls.begin(), calls.end(), calls[i]));
    if (votes > best_votes) best = i, best_votes = votes;
  }
  return calls[best];
}

// Whether rank f waits in `call` (in it now, or broke in it).
bool WaitsIn(const RankFacts& f, const CallStamp& call) {
  return f.answer.kind == Kind::kAnswered && f.answer.snapshot.state != State::kIdle && f.answer.snapshot.call == call;
}

// The longest any waiter has gone without progress (its whole call when it never slept).
int64_t LongestWait(const std::vector<RankFacts>& ranks, const CallStamp& call) {
  int64_t longest = 0;
  for (const RankFacts& f : ranks) {
    if (!WaitsIn(f, call)) continue;
    const ActivitySnapshot& s = f.answer.snapshot;
    longest = std::max(longest, s.since_progress_us >= 0 ? s.since_progress_us : s.in_state_us);
  }
  return longest;
}

// Why rank r is to blame on its own (it does not answer, is gone, or is outside
// tessera), or "".
std::string Blame(int r, const RankFacts& f, const CallStamp& call, int64_t waited_us) {
  const std::string state = f.process_state.empty() ? "" : ": " + f.process_state;
  const ActivitySnapshot& s = f.answer.snapshot;
  switch (f.answer.kind) {
    case Kind::kRefused:
      return Who(r, f) + " is gone during " + DescribeCall(call) + " (nothing answers for it: " + f.answer.error +
             ")" + state;
    case Kind::kSilent:
    case Kind::kBadReply:
      return Who(r, f) + " has made no progress in " + DescribeCall(call) + " for " + Ms(waited_us) +
             " and does not answer" + (state.empty() ? " (stopped, hung or cut off)" : state);
    case Kind::kLocalError:
      return "";
    case Kind::kAnswered:
      break;
  }
  if (s.state == State::kIdle && s.last_done_seq < call.seq) {
    return Who(r, f) + " has not called " + DescribeCall(call) + ": it has been outside tessera for " +
           Ms(s.in_state_us) + " since " + DescribeCall(s.call) + " ended";
  }
  return "";
}

// Why rank r, in a call, is to blame for being in another call than the others: still
// in an earlier one, or in another at the same sequence number (mismatched calls); or
// "". A rank still in an earlier call is not to blame when some rank is already blamed
// and it either waits there on a peer (on the culprit, directly or through a chain of
// waiting ranks: a ring's neighbour finishing the previous call) or has not waited in
// that call yet: it is running (reducing, or kept off its core on a loaded host) and
// will reach the culprit. Alone, a rank behind is the suspect.
std::string BlameCall(int r, const RankFacts& f, const CallStamp& call, const std::vector<int32_t>& blamed) {
  const ActivitySnapshot& s = f.answer.snapshot;
  if (f.answer.kind != Kind::kAnswered || s.state == State::kIdle || s.call.seq == 0) return "";
  const bool follows_culprit = !blamed.empty() && (!s.waiting_on.empty() || s.since_progress_us < 0);
  if (s.call.seq < call.seq && !follows_culprit) {
    return Who(r, f) + " is still in " + DescribeCall(s.call) + " (for " + Ms(s.in_state_us) + ")";
  }
  if (s.call.seq == call.seq && s.call != call) {
    return "mismatched calls: " + Who(r, f) + " called " + DescribeCall(s.call) + " but the others called " +
           DescribeCall(call);
  }
  return "";
}

// This rank could not send to some peer: the fault is on this host's side.
bool LocalFault(const std::vector<RankFacts>& ranks, std::string* error) {
  for (const RankFacts& f : ranks) {
    if (f.answer.kind == Kind::kLocalError) {
      *error = f.answer.error;
      return true;
    }
  }
  return false;
}

Verdict LocalFaultVerdict(int my_rank, const std::vector<RankFacts>& ranks, const std::string& error) {
  Verdict v;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].same_host) v.culprits.push_back(static_cast<int32_t>(r));
  }
  const CallStamp& call = ranks[my_rank].answer.snapshot.call;
  v.text = "host " + HostnameOf(ranks[my_rank].host) + " (" + RankList(v.culprits) + ") cannot reach its peers during " +
           DescribeCall(call) + ": its network is down or drops its packets (" + error + ") " + CulpritTag(v.culprits);
  return v;
}

}  // namespace

std::string CulpritTag(const std::vector<int32_t>& culprits) {
  return culprits.empty() ? "" : "[culprit: " + RankList(culprits) + "]";
}

std::vector<int32_t> CulpritsOfTag(const std::string& text) {
  std::vector<int32_t> culprits;
  const size_t tag = text.rfind("[culprit: rank");
  if (tag == std::string::npos) return culprits;
  const size_t end = text.find(']', tag);
  size_t at = text.find(' ', tag + 10);  // after "rank" or "ranks"
  while (at != std::string::npos && at < end) {
    size_t digits = at + 1;
    int64_t rank = 0;
    while (digits < end && rank <= INT32_MAX && text[digits] >= '0' && text[digits] <= '9') {
      rank = rank * 10 + (text[digits++] - '0');
    }
    if (digits == at + 1 || rank > INT32_MAX) return {};
    culprits.push_back(static_cast<int32_t>(rank));
    at = text.compare(digits, 2, ", ") == 0 ? digits + 1 : std::string::npos;
  }
  return culprits;
}

Verdict Judge(int my_rank, const std::vector<RankFacts>& ranks) {
  Verdict v;
  if (Adopt(ranks, &v)) return v;
  std::string local_error;
  if (LocalFault(ranks, &local_error)) return LocalFaultVerdict(my_rank, ranks, local_error);
  const CallStamp call = ReferenceCall(ranks, my_rank);
  const int64_t waited = LongestWait(ranks, call);
  std::vector<std::string> reasons(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    reasons[r] = Blame(static_cast<int>(r), ranks[r], call, waited);
    if (!reasons[r].empty()) v.culprits.push_back(static_cast<int32_t>(r));
  }
  const std::vector<int32_t> blamed = v.culprits;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (reasons[r].empty()) reasons[r] = BlameCall(static_cast<int>(r), ranks[r], call, blamed);
  }
  v.culprits.clear();
  std::vector<int32_t> waiters;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!reasons[r].empty()) {
      v.culprits.push_back(static_cast<int32_t>(r));
    } else if (ranks[r].answer.kind == Kind::kAnswered && ranks[r].answer.snapshot.state != State::kIdle) {
      waiters.push_back(static_cast<int32_t>(r));
    }
  }
  reasons.erase(std::remove(reasons.begin(), reasons.end(), std::string()), reasons.end());
  if (v.culprits.empty()) {
    v.text = "no rank stopped: " + RankList(waiters) + " are all in " + DescribeCall(call) + " and waiting for " +
             Ms(waited) + " (a deadlock, or messages lost between ranks)";
    return v;
  }
  for (size_t i = 0; i < reasons.size(); ++i) v.text += (i ? "; " : "") + reasons[i];
  if (!waiters.empty()) v.text += "; " + RankList(waiters) + (waiters.size() == 1 ? " was" : " were") +
                                 (v.culprits.size() == 1 ? " waiting on it" : " waiting on them");
  v.text += " " + CulpritTag(v.culprits);
  return v;
}

}  // namespace tessera
