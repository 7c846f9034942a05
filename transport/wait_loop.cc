#include "transport/wait_loop.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "base/deadline.h"

namespace tessera {
namespace {

// Longest single sleep: bounds how late abort, peer death and the deadline are noticed.
constexpr int64_t kSleepSliceUs = 20000;
// How often sleeping ranks check that their peers are still alive.
constexpr int64_t kPeerCheckUs = 50000;
// Ranks that fit their cores yield now and then only once a wait is this old: the
// waits of ranks running in step are far shorter, and a yield there hands the core to
// whatever else shares it for a slice.
constexpr int64_t kRelaxYieldAfterUs = 20;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Loop {
 public:
  Loop(Waitable* w, const ExchangeOptions& opt) : w_(w), opt_(opt) {}

  Status Run() {
    const Status s = Iterate();
    w_->Flush();
    if (!s.ok() && opt_.observer != nullptr) TellObserver();
    if (s.ok() && stalled_) opt_.observer->Resumed(NowMicros());  // done straight after a sleep
    return s;
  }

 private:
  Status Iterate();
  void Poll(int64_t now_us, bool yields, uint32_t polls);
  Status CheckAbortAndDeadline();
  Status Sleep(WaitSet* waits, bool* moved);

  // A peer that closed its link may have published why: prefer its root cause.
  Status Explain(const Status& s) {
    if (s.code() != Code::kRemoteError || opt_.notices == nullptr) return s;
    Status notice = opt_.notices->CheckNotices(100);
    return notice.ok() ? s : Status(notice.code(), s.message() + "; " + notice.message());
  }

  void TellObserver() {
    if (last_progress_us_ < 0) last_progress_us_ = NowMicros();
    peers_.clear();
    w_->WaitingPeers(&peers_);
    opt_.observer->Waiting(peers_.data(), peers_.size(), last_progress_us_);
  }

  Waitable* w_;
  const ExchangeOptions& opt_;
  int64_t last_progress_us_ = -1;  // when a look last moved something (or the wait began)
  bool stalled_ = false;    // the observer was told of a stall that has not ended yet
  std::vector<int> peers_;  // for the observer
};

// The clock is read only every fourth look that moved nothing, and the last move is
// dated then: a wait that is over within a few looks (a small message whose peer is
// ready, or a few hundred nanoseconds from it) never reads it, where each read costs
// 20-90 ns here.
Status Loop::Iterate() {
  int64_t last_peer_check_us = -1;
  bool undated_move = true;  // the start counts as a move
  const int64_t budget_us = opt_.progress != nullptr ? opt_.progress->budget_us() : 0;
  uint32_t polls = 0, quiet_looks = 0;
  bool yielding = false;  // the policy's choice at the last clock read
  WaitSet waits;
  while (!w_->Done()) {
    bool moved = false;
    Status st = w_->Progress(&moved);
    if (!st.ok()) return Explain(st);
    if (moved) {
      undated_move = true;
      continue;
    }
    // Pausing ranks read the clock every few empty looks: a read costs 20-90 ns here,
    // as long as a look, and delays seeing the peer's message as much. The wait's
    // start is dated a few looks late too (below a microsecond).
    if (!yielding && (++quiet_looks & 3) != 0) {
      CpuRelax();
      continue;
    }
    const int64_t now = NowMicros();
    w_->Flush();  // a few looks after publishing: the fence finds the stores gone
    yielding = opt_.progress != nullptr && opt_.progress->Yields(now);
    if (undated_move) {
      if (stalled_) {
        opt_.observer->Resumed(now);
        stalled_ = false;
      }
      last_progress_us_ = now;
      undated_move = false;
      if (last_peer_check_us < 0) last_peer_check_us = now;
    }
    if (now - last_progress_us_ < budget_us) {
      Poll(now, yielding, ++polls);
      continue;
    }
    TESSERA_RETURN_IF_ERROR(CheckAbortAndDeadline());
    if (now - last_peer_check_us >= kPeerCheckUs) {
      last_peer_check_us = now;
      st = w_->CheckPeers();
      if (!st.ok()) return Explain(st);
    }
    if (opt_.observer != nullptr) {
      TellObserver();
      stalled_ = true;
    }
    TESSERA_RETURN_IF_ERROR(Sleep(&waits, &moved));
    if (moved) undated_move = true;
  }
  return Status::Ok();
}

// One poll of a waiting rank: yield the core, or pause the CPU (yielding now and then:
// a peer woken onto this core, as the scheduler likes to put a wakee beside its waker,
// would otherwise wait for this rank's time slice to end).
// `yields`: the policy's choice at `now_us`.
void Loop::Poll(int64_t now_us, bool yields, uint32_t polls) {
  if (yields) {
    sched_yield();
    opt_.progress->YieldTook(NowMicros() - now_us, now_us);
  } else if (now_us - last_progress_us_ >= kRelaxYieldAfterUs && (polls & 63) == 0) {
    sched_yield();
  } else {
    CpuRelax();
  }
}

Status Loop::CheckAbortAndDeadline() {
  if (opt_.abort != nullptr && opt_.abort->load(std::memory_order_relaxed)) {
    return RemoteError("aborted by tesseraCommAbort while " + w_->PendingSummary());
  }
  if (opt_.deadline.Expired()) {
    return TimeoutError("timed out after " + std::to_string(opt_.timeout_ms) + " ms (TESSERA_TIMEOUT_MS) " +
                        w_->PendingSummary());
  }
  return Status::Ok();
}

// Sleeps until something can move, a slice passes, or the deadline; *moved when a last
// look before sleeping moved something.
Status Loop::Sleep(WaitSet* waits, bool* moved) {
  waits->Clear();
  w_->AddWaits(waits);
  if (opt_.notices != nullptr) opt_.notices->AddNoticeWaits(waits);
  const uint32_t token = waits->Announce();
  Status s = w_->Progress(moved);
  w_->Flush();
  if (s.ok() && !*moved && !w_->Done()) {
    int64_t left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(opt_.deadline.when() - Clock::now()).count();
    waits->Sleep(token, std::max<int64_t>(1, std::min(kSleepSliceUs, left_us)));
  }
  waits->Retire();
  if (!s.ok()) return Explain(s);
  if (opt_.notices != nullptr) {
    // A peer published its failure: report it with what this rank was waiting for.
    Status notice = opt_.notices->CheckNotices(0);
    if (!notice.ok()) return Status(notice.code(), w_->PendingSummary() + "; " + notice.message());
  }
  return Status::Ok();
}

}  // namespace

Status WaitFor(Waitable* w, const ExchangeOptions& options) {
  Loop loop(w, options);
  return loop.Run();
}

}  // namespace tessera
