#include "diagnosis/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera {

namespace {

// Of the ranks that stalled least (stalls under kMinLagUs leave no account: they tie),
// the one that began the call latest where they share a host, else -1: ranks of
// different hosts that tie are never ordered (their clocks differ).
int LeastStalled(const std::vector<CallTiming>& timings, uint32_t least, const std::vector<int>& host_of) {
  int last = -1;
  for (size_t r = 0; r < timings.size(); ++r) {
    const uint32_t s = timings[r].stalled_us;
    if (s != least && !(s < kMinLagUs && least < kMinLagUs)) continue;
    if (last >= 0 && host_of[r] != host_of[last]) return -1;
    if (last < 0 || timings[r].began_us > timings[last].began_us) last = static_cast<int>(r);
  }
  return last;
}

}  // namespace

LastArrival JudgeCall(uint32_t seq, const std::vector<CallTiming>& timings, const std::vector<int>& host_of) {
  LastArrival out;
  out.seq = seq;
  if (timings.empty()) return out;
  uint32_t least = timings[0].stalled_us, most = timings[0].stalled_us;
  for (const CallTiming& t : timings) {
    least = std::min(least, t.stalled_us);
    most = std::max(most, t.stalled_us);
  }
  const int64_t lag = int64_t{most} - least;
  if (lag < kMinLagUs) return out;
  // Those that stalled about as little as the least: one of them arrived last.
  const int64_t close = least + lag / 8;
  int last = -1;
  bool one_host = true;
  for (size_t r = 0; r < timings.size(); ++r) {
    if (timings[r].stalled_us > close) continue;
    if (last < 0) {
      last = static_cast<int>(r);
    } else if (host_of[r] != host_of[last]) {
      one_host = false;
    } else if (timings[r].began_us > timings[last].began_us) {
      last = static_cast<int>(r);
    }
  }
  if (!one_host) {  // durations alone: the least stalled, if it is the only one
    last = LeastStalled(timings, least, host_of);
    if (last < 0) return out;
  }
  out.rank = last;
  out.lag_us = int64_t{most} - timings[last].stalled_us;
  for (size_t r = 0; r < timings.size(); ++r) {
    if (static_cast<int>(r) != last && 2 * int64_t{timings[r].stalled_us} >= lag) {
      out.waiters.push_back(static_cast<int32_t>(r));
    }
  }
  return out;
}

std::string RankRanges(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string StragglerText(const StragglerVerdict& v, const std::vector<int>& pids,
                          const std::vector<std::string>& hosts) {
  if (!v.named()) return "";
  const size_t r = static_cast<size_t>(v.rank);
  char body[240];
  std::snprintf(body, sizeof(body),
                " arrived last in %u of the last %u collectives, a median of %.1f ms after the first (%u%% of the "
                "waiting on late ranks, %u%% of the time)",
                v.last_calls, v.window_calls, static_cast<double>(v.median_lag_us) / 1000.0, v.wait_permille / 10,
                v.cost_permille / 10);
  std::string text = "rank " + std::to_string(v.rank);
  if (r < pids.size() && r < hosts.size()) text += " (pid " + std::to_string(pids[r]) + ", host " + hosts[r] + ")";
  text += body;
  if (!v.waiters.empty()) {
    text += std::string("; rank") + (v.waiters.size() > 1 ? "s " : " ") + RankRanges(v.waiters) + " waited on it";
  }
  return text;
}

StragglerWindow::StragglerWindow(size_t window, int share_percent, int nranks)
    : window_(std::max<size_t>(1, window)), share_percent_(share_percent), nranks_(nranks) {}

void StragglerWindow::Add(const LastArrival& call) {
  if (call.rank < 0 || call.rank >= nranks_ || call.seq <= newest_) return;
  if (!late_.empty() && call.seq <= late_.back().seq) return;
  late_.push_back(call);
}

void StragglerWindow::Advance(uint32_t from, uint32_t to, int64_t now_us) {
  if (to <= newest_ || from > to) return;
  if (first_ == 0) first_ = std::max<uint32_t>(1, from);
  newest_ = to;
  const uint32_t oldest = newest_ >= window_ ? static_cast<uint32_t>(newest_ - window_ + 1) : 1;
  while (!late_.empty() && late_.front().seq < oldest) late_.pop_front();
  judged_at_.emplace_back(now_us, newest_);
  // Keep the last point at or before the window's start: the window's time runs from it.
  while (judged_at_.size() > 1 && judged_at_[1].second < oldest) judged_at_.pop_front();
}

uint32_t StragglerWindow::calls() const {
  if (first_ == 0) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(window_, uint64_t{newest_} - first_ + 1));
}

namespace {

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The lag at which half of the waiting was spent: the lag of the call that takes the
// running sum of the sorted lags past half their total. Unlike the median, many small
// lags do not outweigh a few large ones.
int64_t WaitingMedian(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  int64_t total = 0;
  for (int64_t lag : v) total += lag;
  int64_t sum = 0;
  for (int64_t lag : v) {
    sum += lag;
    if (2 * sum >= total) return lag;
  }
  return v.back();
}

}  // namespace

// Whether rank r's share of the late calls stands out from chance (each late call's
// last rank drawn evenly): three standard deviations above an even split; or its lags
// from the others' (the lag at which half the waiting on it was spent, four times the
// others'). A rank stopped 200 ms every second is also late by a few milliseconds in as
// many calls as any rank on busy cores: its plain median lag is theirs.
bool StragglerWindow::StandsOut(int r, const std::vector<uint32_t>& late, const std::vector<int64_t>& lags_r,
                                const std::vector<int64_t>& lags_others) const {
  const double total = static_cast<double>(late_.size()), p = 1.0 / nranks_;
  const double z = (late[r] - total * p) / std::sqrt(std::max(1e-9, total * p * (1 - p)));
  if (z >= 3) return true;
  return lags_others.empty() || WaitingMedian(lags_r) >= 4 * WaitingMedian(lags_others);
}

StragglerVerdict StragglerWindow::Verdict() const {
  StragglerVerdict v;
  v.window_calls = calls();
  if (v.window_calls < std::min(window_, kMinVerdictCalls) || late_.empty()) return v;
  std::vector<uint32_t> late(nranks_, 0);
  std::vector<int64_t> lag(nranks_, 0);
  int64_t total_lag = 0;
  for (const LastArrival& c : late_) {
    ++late[c.rank];
    lag[c.rank] += c.lag_us;
    total_lag += c.lag_us;
  }
  const int64_t span_us = std::max<int64_t>(1, judged_at_.back().first - judged_at_.front().first);
  const int by_count = static_cast<int>(std::max_element(late.begin(), late.end()) - late.begin());
  const int by_time = static_cast<int>(std::max_element(lag.begin(), lag.end()) - lag.begin());
  int64_t runner_up = 0;  // the most lag on any rank but by_time
  for (int r = 0; r < nranks_; ++r) runner_up = r == by_time ? runner_up : std::max(runner_up, lag[r]);
  for (int r : {by_count, by_time}) {
    if (late[r] < kMinLateCalls) continue;
    std::vector<int64_t> mine, others;
    for (const LastArrival& c : late_) (c.rank == r ? mine : others).push_back(c.lag_us);
    // Last in most calls names a rank only if it is also the one most waited on: a rank
    // last by a little at most steps, while another keeps the others waiting longer now
    // and then (a test suite's uneven calls), is no straggler.
    const bool often = r == by_time && uint64_t{late[r]} * 100 >= uint64_t(share_percent_) * v.window_calls;
    const bool costly = r == by_time && v.window_calls >= window_ && span_us >= kMinCostSpanUs &&
                        lag[r] * 100 >= share_percent_ * total_lag && lag[r] >= 2 * runner_up &&
                        lag[r] * 100 >= int64_t{kMinCostPercent} * span_us && StandsOut(r, late, mine, others);
    if (!often && !costly) continue;
    v.rank = r;
    v.last_calls = late[r];
    v.median_lag_us = Median(mine);
    v.wait_permille = static_cast<uint32_t>(1000 * lag[r] / std::max<int64_t>(1, total_lag));
    v.cost_permille = static_cast<uint32_t>(std::min<int64_t>(1000, 1000 * lag[r] / span_us));
    break;
  }
  if (!v.named()) return v;
  std::vector<uint32_t> waited(nranks_, 0);
  for (const LastArrival& c : late_) {
    if (c.rank != v.rank) continue;
    for (int32_t w : c.waiters) ++waited[w];
  }
  for (int r = 0; r < nranks_; ++r) {
    if (waited[r] > 0 && 2 * waited[r] >= v.last_calls) v.waiters.push_back(r);
  }
  return v;
}

}  // namespace tessera
