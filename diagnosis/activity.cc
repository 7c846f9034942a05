#include "diagnosis/activity.h"

#include <algorithm>
#include <cstdint>
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
  running_kind_ = call.kind;
  running_began_us_ = now;
  stalling_ = false;
  call_stalled_us_ = 0;
  call_waited_on_ = -1;
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
  if (stalling_) EndStall(NowMicros());  // a wait that failed, or several exchanges
  if (ok && running_seq_ != 0 && call_stalled_us_ >= kMinLagUs && timings_) RecordTiming();
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
  if (!stalling_) {
    stalling_ = true;
    stall_since_us_ = last_progress_us;
  }
  stall_peers_.assign(peers, peers + count);
}

void Activity::Resumed(int64_t now_us) {
  if (stalling_) EndStall(now_us);
}

void Activity::EndStall(int64_t now_us) {
  stalling_ = false;
  const int64_t stalled = std::max<int64_t>(0, now_us - stall_since_us_);
  call_stalled_us_ = static_cast<uint32_t>(std::min<int64_t>(call_stalled_us_ + stalled, UINT32_MAX));
  stalled_total_us_.store(stalled_total_us_.load(std::memory_order_relaxed) + stalled, std::memory_order_relaxed);
  if (stall_peers_.empty()) return;
  call_waited_on_ = stall_peers_[0];
  for (int peer : stall_peers_) {
    if (peer < 0 || peer >= nranks_) continue;
    std::atomic<int64_t>& sum = peer_stall_us_[peer];
    sum.store(sum.load(std::memory_order_relaxed) + stalled, std::memory_order_relaxed);
  }
}

void Activity::RecordTiming() {
  TimingSlot& t = timings_[next_timing_];
  next_timing_ = next_timing_ + 1 == kTimingSlots ? 0 : next_timing_ + 1;
  t.lock.BeginWrite();
  t.seq.set(running_seq_);
  t.kind.set(running_kind_);
  t.stalled_us.set(call_stalled_us_);
  t.waited_on.set(call_waited_on_);
  t.began_us.set(running_began_us_);
  t.lock.EndWrite();
  timings_written_.store(timings_written_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void Activity::SetRanks(int nranks, bool timings) {
  nranks_ = nranks;
  peer_stall_us_.reset(new std::atomic<int64_t>[nranks]);
  for (int r = 0; r < nranks; ++r) peer_stall_us_[r].store(0);
  if (timings) timings_.reset(new TimingSlot[kTimingSlots]);
}

RankTimings Activity::Timings() const {
  RankTimings out;
  if (!timings_) return out;
  // The last call done first: every account of a call up to it is in the ring by now,
  // unless a later one took its slot (then it was older than all those read).
  call_lock_.Read([&] { out.last_seq = last_done_seq_.get(); });
  out.stalls.reserve(kTimingSlots);
  for (size_t i = 0; i < kTimingSlots; ++i) {
    CallTiming c;
    timings_[i].lock.Read([&] {
      c.seq = timings_[i].seq.get();
      c.kind = timings_[i].kind.get();
      c.stalled_us = timings_[i].stalled_us.get();
      c.waited_on = timings_[i].waited_on.get();
      c.began_us = timings_[i].began_us.get();
    });
    if (c.seq != 0 && c.seq <= out.last_seq) out.stalls.push_back(c);
  }
  std::sort(out.stalls.begin(), out.stalls.end(), [](const CallTiming& a, const CallTiming& b) { return a.seq < b.seq; });
  if (timings_written_.load(std::memory_order_acquire) > kTimingSlots && !out.stalls.empty()) {
    out.covered_from = out.stalls.front().seq;  // older accounts were overwritten
  }
  return out;
}

std::vector<int64_t> Activity::PeerStalls() const {
  std::vector<int64_t> out(nranks_);
  for (int r = 0; r < nranks_; ++r) out[r] = peer_stall_us_[r].load(std::memory_order_relaxed);
  return out;
}

void Activity::SetStraggler(const StragglerVerdict& verdict) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = straggler_.rank != verdict.rank;
    straggler_ = verdict;
  }
  if (changed && on_straggler_) on_straggler_(verdict);
}

StragglerVerdict Activity::Straggler() const {
  std::lock_guard<std::mutex> lock(mu_);
  return straggler_;
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
