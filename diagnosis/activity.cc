#include "diagnosis/activity.h"

#include <cstring>

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

Activity::Activity() {
  call_lock_.BeginWrite();
  call_since_us_.set(NowMicros());
  last_progress_us_.set(-1);
  call_lock_.EndWrite();
}

void Activity::CallBegan(const CallRecord& record, int64_t now) {
  if (broken_.load(std::memory_order_acquire)) return;
  const CallStamp& call = record.stamp;
  uint64_t words[3];
  static_assert(sizeof(words) == sizeof(call), "a CallStamp is 3 words");
  std::memcpy(words, &call, sizeof(words));
  running_seq_ = call.seq;
  call_lock_.BeginWrite();
  in_call_.set(true);
  for (int i = 0; i < 3; ++i) call_words_[i].set(words[i]);
  call_since_us_.set(now);
  last_progress_us_.set(-1);
  calls_.set(calls_.get() + 1);
  call_lock_.EndWrite();
}

void Activity::CallEnded(CallOutcome outcome, int64_t now) {
  if (outcome == CallOutcome::kBreaking) return;  // Break follows
  const bool ok = outcome == CallOutcome::kDone;
  if (!in_call_.get() || broken_.load(std::memory_order_acquire)) return;
  call_lock_.BeginWrite();
  if (ok && running_seq_ != 0) last_done_seq_.set(running_seq_);
  in_call_.set(false);
  call_since_us_.set(now);
  call_lock_.EndWrite();
}

void Activity::Waiting(const int* peers, size_t count, int64_t last_progress_us) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_on_.assign(peers, peers + count);
    waiting_call_ = calls_.get();
  }
  call_lock_.BeginWrite();
  last_progress_us_.set(last_progress_us);
  call_lock_.EndWrite();
}

void Activity::Break() {
  const int64_t now = NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.load()) return;
  broken_since_us_ = now;
  broken_.store(true, std::memory_order_release);
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
  bool in_call = false;
  uint64_t words[3], calls = 0;
  int64_t since = 0, progress = -1;
  call_lock_.Read([&] {
    in_call = in_call_.get();
    for (int i = 0; i < 3; ++i) words[i] = call_words_[i].get();
    s.last_done_seq = last_done_seq_.get();
    since = call_since_us_.get();
    progress = last_progress_us_.get();
    calls = calls_.get();
  });
  std::memcpy(&s.call, words, sizeof(words));
  const bool broken = broken_.load();
  s.state = broken ? ActivitySnapshot::State::kBroken
                   : in_call ? ActivitySnapshot::State::kInCall : ActivitySnapshot::State::kIdle;
  s.in_state_us = now - (broken ? broken_since_us_ : since);
  s.since_progress_us = progress < 0 ? -1 : now - progress;
  if (waiting_call_ == calls) s.waiting_on = waiting_on_;
  s.verdict = verdict_;
  s.culprits = culprits_;
  return s;
}

}  // namespace tessera
