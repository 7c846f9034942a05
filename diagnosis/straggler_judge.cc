#include "diagnosis/straggler_judge.h"

#include <algorithm>
#include <chrono>

#include "diagnosis/watch.h"

namespace tessera {

// --- StragglerCourt ---------------------------------------------------------------------

namespace {

// Hosts numbered by first appearance.
std::vector<int> HostIndex(const std::vector<std::string>& hosts) {
  std::vector<int> index(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    index[r] = static_cast<int>(std::find(hosts.begin(), hosts.end(), hosts[r]) - hosts.begin());
  }
  return index;
}

}  // namespace

StragglerCourt::StragglerCourt(const std::vector<std::string>& hosts, const StragglerOptions& options)
    : host_of_(HostIndex(hosts)), window_(options.window, options.share_percent, static_cast<int>(hosts.size())) {}

void StragglerCourt::Take(int rank, const CallTiming& t) {
  if (t.seq <= floor_) return;
  newest_ = std::max(newest_, t.seq);
  Pending& p = pending_[t.seq];
  if (p.judged) return;
  if (p.by_rank.empty()) p.by_rank.assign(host_of_.size(), CallTiming{});
  if (p.by_rank[rank].seq == 0) ++p.accounts;
  p.by_rank[rank] = t;
}

void StragglerCourt::Hear(const std::vector<std::vector<CallTiming>>& timings) {
  for (size_t r = 0; r < timings.size() && r < host_of_.size(); ++r) {
    for (const CallTiming& t : timings[r]) Take(static_cast<int>(r), t);
  }
  for (auto& [seq, p] : pending_) {
    if (p.judged || p.accounts < host_of_.size()) continue;
    window_.Add(JudgeCall(p.by_rank, host_of_));
    p.judged = true;
    p.by_rank.clear();
    ++judged_;
  }
  // A call older than every rank's ring can hold is complete by now or never will be.
  const uint32_t hopeless = newest_ > Activity::kTimingSlots ? newest_ - Activity::kTimingSlots : 0;
  while (!pending_.empty()) {
    auto first = pending_.begin();
    if (!first->second.judged && first->first > hopeless) break;
    floor_ = first->first;
    pending_.erase(first);
  }
}

// --- StragglerJudge ---------------------------------------------------------------------

StragglerJudge::StragglerJudge(const Membership& who, Activity* mine, const StragglerOptions& options)
    : who_(who), mine_(mine), options_(options), court_(who.hosts, options) {}

std::unique_ptr<StragglerJudge> StragglerJudge::Start(const Membership& who, Activity* mine,
                                                      const StragglerOptions& options) {
  std::unique_ptr<StragglerJudge> j(new StragglerJudge(who, mine, options));
  j->thread_ = std::thread([raw = j.get()] { raw->Run(); });
  return j;
}

StragglerJudge::~StragglerJudge() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StragglerJudge::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (wake_.wait_for(lock, std::chrono::milliseconds(options_.period_ms), [this] { return stop_; })) return;
    lock.unlock();
    Round();
    lock.lock();
  }
}

void StragglerJudge::Round() {
  // Half a period for the answers: a rank that is stopped costs the round no more.
  const int64_t ask_ms = std::max<int64_t>(10, options_.period_ms / 2);
  const size_t n = who_.watch.size();
  std::vector<bool> skip(n, false);
  skip[who_.rank] = true;
  std::vector<PeerAnswer> answers;
  std::vector<std::vector<CallTiming>> timings;
  QueryTimings(who_.watch, skip, who_.secret, who_.rank, court_.Verdict(), Deadline::AfterMs(ask_ms), &answers,
               &timings);
  timings[who_.rank] = mine_->Timings();
  court_.Hear(timings);
  const StragglerVerdict v = court_.Verdict();
  mine_->SetStraggler(v);
  if (v.rank == told_.rank) return;
  const std::string me = "rank " + std::to_string(who_.rank) + ": ";
  if (told_.named() && !v.named()) {
    Log(options_.log_level, LogLevel::kWarn,
        me + "straggler no longer: rank " + std::to_string(told_.rank) + " (no rank arrived last in " +
            std::to_string(options_.share_percent) + "% of the last " + std::to_string(v.window_calls) +
            " collectives)");
  }
  if (v.named()) Log(options_.log_level, LogLevel::kWarn, me + "straggler: " + StragglerText(v, who_.pids, who_.hosts));
  told_ = v;
}

}  // namespace tessera
