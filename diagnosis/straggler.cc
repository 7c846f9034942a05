#include "diagnosis/straggler.h"

#include <algorithm>
#include <cstdio>

namespace tessera {

LastArrival JudgeCall(const std::vector<CallTiming>& timings, const std::vector<int>& host_of) {
  LastArrival out;
  if (timings.empty()) return out;
  out.seq = timings[0].seq;
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
  if (!one_host) {  // durations alone: the least stalled
    for (size_t r = 0; r < timings.size(); ++r) {
      if (timings[r].stalled_us == least) {
        last = static_cast<int>(r);
        break;
      }
    }
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
  char head[160];
  std::snprintf(head, sizeof(head), " arrived last in %u%% of the last %u collectives, a median of %.1f ms after the first",
                v.window_calls > 0 ? 100 * v.last_calls / v.window_calls : 0, v.window_calls,
                static_cast<double>(v.median_lag_us) / 1000.0);
  std::string text = "rank " + std::to_string(v.rank);
  if (r < pids.size() && r < hosts.size()) text += " (pid " + std::to_string(pids[r]) + ", host " + hosts[r] + ")";
  text += head;
  if (!v.waiters.empty()) {
    text += std::string("; rank") + (v.waiters.size() > 1 ? "s " : " ") + RankRanges(v.waiters) + " waited on it";
  }
  return text;
}

StragglerWindow::StragglerWindow(size_t window, int share_percent, int nranks)
    : window_(std::max<size_t>(1, window)), share_percent_(share_percent), last_count_(nranks, 0) {}

void StragglerWindow::Add(const LastArrival& call) {
  if (call.rank >= static_cast<int32_t>(last_count_.size())) return;
  calls_.push_back(call);
  if (call.rank >= 0) ++last_count_[call.rank];
  if (calls_.size() > window_) {
    const int32_t gone = calls_.front().rank;
    if (gone >= 0) --last_count_[gone];
    calls_.pop_front();
  }
}

StragglerVerdict StragglerWindow::Verdict() const {
  StragglerVerdict v;
  v.window_calls = static_cast<uint32_t>(calls_.size());
  if (calls_.size() < std::min(window_, kMinVerdictCalls)) return v;
  const auto most = std::max_element(last_count_.begin(), last_count_.end());
  if (most == last_count_.end() || *most == 0) return v;
  if (uint64_t{*most} * 100 < uint64_t(share_percent_) * calls_.size()) return v;
  v.rank = static_cast<int32_t>(most - last_count_.begin());
  v.last_calls = *most;
  std::vector<int64_t> lags;
  std::vector<uint32_t> waited(last_count_.size(), 0);
  for (const LastArrival& c : calls_) {
    if (c.rank != v.rank) continue;
    lags.push_back(c.lag_us);
    for (int32_t w : c.waiters) ++waited[w];
  }
  std::nth_element(lags.begin(), lags.begin() + lags.size() / 2, lags.end());
  v.median_lag_us = lags[lags.size() / 2];
  for (size_t r = 0; r < waited.size(); ++r) {
    if (2 * waited[r] >= v.last_calls && waited[r] > 0) v.waiters.push_back(static_cast<int32_t>(r));
  }
  return v;
}

}  // namespace tessera
