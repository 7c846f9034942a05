#include "transport/exchange.h"

#include <sched.h>

#include <algorithm>
#include <vector>

#include "base/deadline.h"

namespace tessera {
namespace {

enum class State : uint8_t { kWaiting, kActive, kDone };

// Longest single sleep: bounds how late abort, peer death and the deadline are noticed.
constexpr int64_t kSleepSliceUs = 20000;
// How often sleeping ranks check that their peers are still alive.
constexpr int64_t kPeerCheckUs = 50000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::string Describe(const Transfer& t) {
  return "rank " + std::to_string(t.link->peer()) + " (" + t.link->kind() + ")";
}

std::string Direction(const Transfer& t) { return t.is_send ? "sending to " : "receiving from "; }

// The transfers of one link in one direction, which run one after the other.
struct Queue {
  Link* link;
  bool is_send;
  std::vector<size_t> items;  // indices into the transfer array, in order
  size_t head = 0;            // first transfer not done
  bool busy() const { return head < items.size(); }
};

class Engine {
 public:
  Engine(Transfer* ts, size_t n, const ExchangeOptions& opt)
      : ts_(ts), opt_(opt), state_(n, State::kWaiting), start_us_(opt.tracer != nullptr ? n : 0) {
    for (size_t i = 0; i < n; ++i) {
      size_t q = 0;
      while (q < queues_.size() && !(queues_[q].link == ts[i].link && queues_[q].is_send == ts[i].is_send)) ++q;
      if (q == queues_.size()) queues_.push_back(Queue{ts[i].link, ts[i].is_send, {}, 0});
      queues_[q].items.push_back(i);
    }
    remaining_ = n;
  }

  Status Run();
  Status Loop(int64_t* last_progress_us);  // until every transfer is done or one fails

 private:
  void Poll(int64_t now_us, uint32_t polls);
  Status CheckAbortAndDeadline();
  Status Sleep(WaitSet* waits, bool* moved);

  // Starts the head of q, skipping (completing) zero-length transfers.
  void Activate(Queue& q) {
    while (q.busy()) {
      const size_t i = q.items[q.head];
      if (ts_[i].len != 0) {
        state_[i] = State::kActive;
        if (opt_.tracer != nullptr) start_us_[i] = NowMicros();
        if (ts_[i].is_send) {
          ts_[i].link->BeginSend(ts_[i].src, ts_[i].len);
        } else {
          ts_[i].link->BeginRecv(ts_[i].dst, ts_[i].len, ts_[i].acc, ts_[i].reducer);
        }
        return;
      }
      state_[i] = State::kDone;
      --remaining_;
      ++q.head;
    }
  }

  // How much of send i's data exists yet (all of it unless gated by a receive).
  size_t Available(size_t i) const {
    const int g = ts_[i].gate;
    if (g < 0 || state_[g] == State::kDone) return ts_[i].len;
    if (state_[g] == State::kWaiting) return 0;
    return std::min(ts_[i].len, ts_[g].link->ready_bytes());
  }

  // One pass over the active transfers.
  Status Progress(bool* moved) {
    *moved = false;
    for (Queue& q : queues_) {
      // Keep going on this queue while transfers complete within the pass.
      while (q.busy()) {
        const size_t i = q.items[q.head];
        bool p = false, done = false;
        Status s = q.is_send ? q.link->ProgressSend(Available(i), &p, &done) : q.link->ProgressRecv(&p, &done);
        if (!s.ok()) return s.Annotate(Direction(ts_[i]) + Describe(ts_[i]));
        *moved |= p;
        if (!done) break;
        if (opt_.tracer != nullptr) {
          opt_.tracer->Add(q.is_send, q.link->peer(), q.link->kind(), ts_[i].len, start_us_[i], NowMicros());
        }
        state_[i] = State::kDone;
        --remaining_;
        ++q.head;
        Activate(q);
      }
    }
    return Status::Ok();
  }

  std::string PendingSummary() const {
    std::string out;
    for (const Queue& q : queues_) {
      if (!q.busy()) continue;
      const Transfer& t = ts_[q.items[q.head]];
      if (!out.empty()) out += "; ";
      out += Direction(t) + Describe(t) + ", " +
             std::to_string(t.is_send ? t.link->sent_bytes() : t.link->received_bytes()) + " of " +
             std::to_string(t.len) + " bytes moved";
      const size_t later = q.items.size() - q.head - 1;
      if (later > 0) out += " (" + std::to_string(later) + " more message(s) queued)";
    }
    return out;
  }

  // A peer that closed its link may have published why: prefer its root cause.
  Status Explain(const Status& s) {
    if (s.code() != Code::kRemoteError || opt_.notices == nullptr) return s;
    Status notice = opt_.notices->CheckNotices(100);
    return notice.ok() ? s : Status(notice.code(), s.message() + "; " + notice.message());
  }

  void TellObserver(int64_t last_progress_us) {
    waiting_peers_.clear();
    for (const Queue& q : queues_) {
      const int peer = q.link->peer();
      if (q.busy() && std::find(waiting_peers_.begin(), waiting_peers_.end(), peer) == waiting_peers_.end()) {
        waiting_peers_.push_back(peer);
      }
    }
    opt_.observer->Waiting(waiting_peers_.data(), waiting_peers_.size(), last_progress_us);
  }

  Status CheckPeers() {
    for (Queue& q : queues_) {
      if (!q.busy()) continue;
      Status s = q.link->CheckPeer();
      if (!s.ok()) return Explain(s.Annotate(Direction(ts_[q.items[q.head]]) + Describe(ts_[q.items[q.head]])));
    }
    return Status::Ok();
  }

  Transfer* ts_;
  const ExchangeOptions& opt_;
  std::vector<State> state_;
  std::vector<int64_t> start_us_;  // when each transfer began (tracing only)
  std::vector<Queue> queues_;
  std::vector<int> waiting_peers_;  // for the observer
  size_t remaining_ = 0;
};

Status Engine::Run() {
  const CallStamp call = opt_.check_calls && opt_.stamp != nullptr ? *opt_.stamp : CallStamp{};
  for (Queue& q : queues_) {
    q.link->SetCall(call);
    Activate(q);
  }
  int64_t last_progress_us = NowMicros();
  const Status s = Loop(&last_progress_us);
  // A failure: the observer learns what this rank was waiting on, so that a rank still
  // finishing an earlier call when a peer died shows whom it waited for (diagnosis then
  // does not blame it for being behind; it may never have slept, and so never told).
  if (!s.ok() && opt_.observer != nullptr) TellObserver(last_progress_us);
  return s;
}

Status Engine::Loop(int64_t* last_progress) {
  int64_t& last_progress_us = *last_progress;
  int64_t last_peer_check_us = last_progress_us;
  const int64_t budget_us = opt_.progress != nullptr ? opt_.progress->budget_us() : 0;
  uint32_t polls = 0;
  WaitSet waits;
  while (remaining_ > 0) {
    bool moved = false;
    Status st = Progress(&moved);
    if (!st.ok()) return Explain(st);
    int64_t now = NowMicros();
    if (moved) {
      last_progress_us = now;
      continue;
    }
    if (now - last_progress_us < budget_us) {
      Poll(now, ++polls);
      continue;
    }
    TESSERA_RETURN_IF_ERROR(CheckAbortAndDeadline());
    if (now - last_peer_check_us >= kPeerCheckUs) {
      last_peer_check_us = now;
      TESSERA_RETURN_IF_ERROR(CheckPeers());
    }
    if (opt_.observer != nullptr) TellObserver(last_progress_us);
    TESSERA_RETURN_IF_ERROR(Sleep(&waits, &moved));
    if (moved) last_progress_us = NowMicros();
  }
  return Status::Ok();
}

// One poll of a waiting rank: yield the core, or pause the CPU (yielding now and then:
// a peer woken onto this core, as the scheduler likes to put a wakee beside its waker,
// would otherwise wait for this rank's time slice to end).
void Engine::Poll(int64_t now_us, uint32_t polls) {
  if (opt_.progress != nullptr && opt_.progress->Yields(now_us)) {
    sched_yield();
    opt_.progress->YieldTook(NowMicros() - now_us, now_us);
  } else if ((polls & 63) == 0) {
    sched_yield();
  } else {
    CpuRelax();
  }
}

Status Engine::CheckAbortAndDeadline() {
  if (opt_.abort != nullptr && opt_.abort->load(std::memory_order_relaxed)) {
    return RemoteError("aborted by tesseraCommAbort while " + PendingSummary());
  }
  if (opt_.deadline.Expired()) {
    return TimeoutError("timed out after " + std::to_string(opt_.timeout_ms) + " ms (TESSERA_TIMEOUT_MS) " +
                        PendingSummary());
  }
  return Status::Ok();
}

// Sleeps until a link can move, a slice passes, or the deadline; *moved when a last
// look before sleeping moved something.
Status Engine::Sleep(WaitSet* waits, bool* moved) {
  waits->Clear();
  for (Queue& q : queues_) {
    if (q.busy()) q.link->AddWaits(waits, q.is_send, !q.is_send);
  }
  if (opt_.notices != nullptr) opt_.notices->AddNoticeWaits(waits);
  const uint32_t token = waits->Announce();
  Status s = Progress(moved);
  if (s.ok() && !*moved && remaining_ > 0) {
    int64_t left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(opt_.deadline.when() - Clock::now()).count();
    waits->Sleep(token, std::max<int64_t>(1, std::min(kSleepSliceUs, left_us)));
  }
  waits->Retire();
  if (!s.ok()) return Explain(s);
  if (opt_.notices != nullptr) {
    // A peer published its failure: report it with what this rank was waiting for.
    Status notice = opt_.notices->CheckNotices(0);
    if (!notice.ok()) return Status(notice.code(), PendingSummary() + "; " + notice.message());
  }
  return Status::Ok();
}

}  // namespace

Status Exchange(Transfer* transfers, size_t count, const ExchangeOptions& options) {
  Engine engine(transfers, count, options);
  return engine.Run();
}

}  // namespace tessera
