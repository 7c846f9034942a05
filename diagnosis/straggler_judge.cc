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
    : host_of_(HostIndex(hosts)),
      window_(options.window, options.share_percent, static_cast<int>(hosts.size())),
      heard_(hosts.size(), false),
      last_seq_(hosts.size(), 0),
      gap_after_(hosts.size(), 0),
      gap_before_(hosts.size(), 0) {}

void StragglerCourt::Hear(const std::vector<RankTimings>& accounts, const std::vector<bool>& answered,
                          int64_t now_us) {
  const size_t n = host_of_.size();
  for (size_t r = 0; r < n && r < accounts.size(); ++r) {
    if (!answered[r]) continue;
    const RankTimings& t = accounts[r];
    if (t.covered_from > last_seq_[r] + 1) {  // a gap
      gap_after_[r] = last_seq_[r];
      gap_before_[r] = t.covered_from;
    }
    heard_[r] = true;
    last_seq_[r] = std::max(last_seq_[r], t.last_seq);
    for (const CallTiming& c : t.stalls) {
      if (c.seq <= judged_ || c.seq > t.last_seq) continue;
      std::vector<CallTiming>& call = stalls_[c.seq];
      if (call.empty()) call.assign(n, CallTiming{});
      call[r] = c;
    }
  }
  if (std::find(heard_.begin(), heard_.end(), false) != heard_.end()) return;
  const uint32_t through = *std::min_element(last_seq_.begin(), last_seq_.end());
  if (through <= judged_) return;
  const uint32_t from = judged_ + 1;
  while (!stalls_.empty() && stalls_.begin()->first <= through) {
    const uint32_t seq = stalls_.begin()->first;
    bool whole = true;
    for (size_t r = 0; r < n; ++r) whole = whole && (seq <= gap_after_[r] || seq >= gap_before_[r]);
    if (whole) window_.Add(JudgeCall(seq, stalls_.begin()->second, host_of_));
    stalls_.erase(stalls_.begin());
  }
  window_.Advance(from, through, now_us);
  judged_ = through;
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
  std::vector<RankTimings> timings;
  QueryTimings(who_.watch, skip, who_.secret, who_.rank, court_.Verdict(), Deadline::AfterMs(ask_ms), &answers,
               &timings);
  timings[who_.rank] = mine_->Timings();
  std::vector<bool> answered(n);
  for (size_t r = 0; r < n; ++r) answered[r] = r == static_cast<size_t>(who_.rank) || answers[r].kind == PeerAnswer::Kind::kAnswered;
  court_.Hear(timings, answered, NowMicros());
  const StragglerVerdict v = court_.Verdict();
  mine_->SetStraggler(v);
  if (v.rank == told_.rank) return;
  const std::string me = "rank " + std::to_string(who_.rank) + ": ";
  if (told_.named() && !v.named()) {
    Log(options_.log_level, LogLevel::kWarn,
        me + "straggler no longer: rank " + std::to_string(told_.rank) + " (over the last " +
            std::to_string(v.window_calls) + " collectives no rank delays the others enough)");
  }
  if (v.named()) Log(options_.log_level, LogLevel::kWarn, me + "straggler: " + StragglerText(v, who_.pids, who_.hosts));
  told_ = v;
}

}  // namespace tessera
