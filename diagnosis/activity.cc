#include "diagnosis/activity.h"

#include "base/deadline.h"

namespace tessera {

const char* ActivityStateName(ActivitySnapshot::State state) {
  switch (state) {
    case ActivitySnapshot::State::kIdle: return "idle";
    case ActivitySnapshot::State::kInCall: return "in a call";
    case ActivitySnapshot::State::kBroken: return "broken";
  }
  return "unknown";
}

Activity::Activity() : state_since_us_(NowMicros()) {}

void Activity::BeginCall(const CallStamp& call, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == ActivitySnapshot::State::kBroken) return;
  state_ = ActivitySnapshot::State::kInCall;
  call_ = call;
  state_since_us_ = now;
  last_progress_us_ = -1;
  waiting_on_.clear();
}

void Activity::EndCall(bool ok, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != ActivitySnapshot::State::kInCall) return;
  if (ok && call_.seq != 0) last_done_seq_ = call_.seq;
  state_ = ActivitySnapshot::State::kIdle;
  state_since_us_ = now;
}

void Activity::Waiting(const int* peers, size_t count, int64_t last_progress_us) {
  std::lock_guard<std::mutex> lock(mu_);
  last_progress_us_ = last_progress_us;
  waiting_on_.assign(peers, peers + count);
}

void Activity::Break() {
  const int64_t now = NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == ActivitySnapshot::State::kBroken) return;
  state_ = ActivitySnapshot::State::kBroken;
  state_since_us_ = now;
}

void Activity::SetVerdict(const std::string& verdict, const std::vector<int32_t>& culprits) {
  std::lock_guard<std::mutex> lock(mu_);
  verdict_ = verdict;
  culprits_ = culprits;
}

ActivitySnapshot Activity::Snapshot() const {
  const int64_t now = NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  ActivitySnapshot s;
  s.state = state_;
  s.call = call_;
  s.last_done_seq = last_done_seq_;
  s.in_state_us = now - state_since_us_;
  s.since_progress_us = last_progress_us_ < 0 ? -1 : now - last_progress_us_;
  s.waiting_on = waiting_on_;
  s.verdict = verdict_;
  s.culprits = culprits_;
  return s;
}

}  // namespace tessera
