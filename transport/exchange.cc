#include "transport/exchange.h"

#include <algorithm>
#include <vector>

#include "base/deadline.h"

namespace tessera {
namespace {

enum class State : uint8_t { kWaiting, kActive, kDone };

// Longest single sleep: bounds how late abort, peer death and the deadline are noticed.
constexpr int64_t kSleepSliceUs = 20000;
// How often sleeping ranks check that shared-memory peers are still alive.
constexpr int64_t kPeerCheckUs = 50000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::string Describe(const Transfer& t) {
  return "rank " + std::to_string(t.link->peer()) + " (" + t.link->kind() + ")";
}

std::string PendingSummary(const Transfer* ts, const std::vector<State>& st) {
  std::string out;
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i] == State::kDone) continue;
    const Transfer& t = ts[i];
    size_t moved = st[i] == State::kWaiting ? 0 : (t.is_send ? t.link->sent_bytes() : t.link->received_bytes());
    if (!out.empty()) out += "; ";
    out += (t.is_send ? "sending to " : "receiving from ") + Describe(t) + ", " + std::to_string(moved) +
           " of " + std::to_string(t.len) + " bytes moved";
  }
  return out;
}

}  // namespace

Status Exchange(Transfer* ts, size_t n, const ExchangeOptions& opt) {
  std::vector<State> state(n, State::kWaiting);
  size_t remaining = n;

  // Activates the first waiting transfer of each (link, direction) that has no active one.
  auto activate = [&] {
    for (size_t i = 0; i < n; ++i) {
      if (state[i] != State::kWaiting) continue;
      bool busy = false;
      for (size_t j = 0; j < i && !busy; ++j) {
        busy = state[j] != State::kDone && ts[j].link == ts[i].link && ts[j].is_send == ts[i].is_send;
      }
      if (busy) continue;
      if (ts[i].len == 0) {
        state[i] = State::kDone;
        --remaining;
        continue;
      }
      state[i] = State::kActive;
      if (ts[i].is_send) {
        ts[i].link->BeginSend(ts[i].src, ts[i].len);
      } else {
        ts[i].link->BeginRecv(ts[i].dst, ts[i].len, ts[i].acc, ts[i].reducer);
      }
    }
  };

  // One pass over the active transfers; returns whether anything moved.
  auto progress = [&](bool* moved) -> Status {
    *moved = false;
    bool finished_one = false;
    for (size_t i = 0; i < n; ++i) {
      if (state[i] != State::kActive) continue;
      bool p = false, done = false;
      Status s = ts[i].is_send ? ts[i].link->ProgressSend(&p, &done) : ts[i].link->ProgressRecv(&p, &done);
      if (!s.ok()) return s.Annotate((ts[i].is_send ? "sending to " : "receiving from ") + Describe(ts[i]));
      *moved |= p;
      if (done) {
        state[i] = State::kDone;
        --remaining;
        finished_one = true;
      }
    }
    if (finished_one) activate();
    return Status::Ok();
  };

  // A peer that closed its link may have published why: prefer its root cause.
  auto explain = [&](const Status& s) -> Status {
    if (s.code() != Code::kRemoteError || opt.notices == nullptr) return s;
    Status notice = opt.notices->CheckNotices(100);
    return notice.ok() ? s : Status(notice.code(), s.message() + "; " + notice.message());
  };

  activate();
  int64_t last_progress_us = NowMicros();
  int64_t last_peer_check_us = last_progress_us;
  WaitSet waits;
  while (remaining > 0) {
    bool moved = false;
    Status st = progress(&moved);
    if (!st.ok()) return explain(st);
    if (remaining == 0) break;
    int64_t now = NowMicros();
    if (moved) {
      last_progress_us = now;
      continue;
    }
    if (now - last_progress_us < opt.spin_us) {
      CpuRelax();
      continue;
    }
    if (opt.abort != nullptr && opt.abort->load(std::memory_order_relaxed)) {
      return RemoteError("aborted by tesseraCommAbort while " + PendingSummary(ts, state));
    }
    if (opt.deadline.Expired()) {
      return TimeoutError("timed out after " + std::to_string(opt.timeout_ms) + " ms (TESSERA_TIMEOUT_MS) " +
                          PendingSummary(ts, state));
    }
    if (now - last_peer_check_us >= kPeerCheckUs) {
      last_peer_check_us = now;
      for (size_t i = 0; i < n; ++i) {
        if (state[i] == State::kDone) continue;
        Status s = ts[i].link->CheckPeer();
        if (!s.ok()) return explain(s.Annotate((ts[i].is_send ? "sending to " : "receiving from ") + Describe(ts[i])));
      }
    }
    // Sleep until a link can move, a slice passes, or the deadline.
    waits.Clear();
    for (size_t i = 0; i < n; ++i) {
      if (state[i] == State::kActive) ts[i].link->AddWaits(&waits, ts[i].is_send, !ts[i].is_send);
    }
    if (opt.notices != nullptr) opt.notices->AddNoticeWaits(&waits);
    uint32_t token = waits.Announce();
    Status s = progress(&moved);
    if (s.ok() && !moved && remaining > 0) {
      int64_t left_us = std::chrono::duration_cast<std::chrono::microseconds>(opt.deadline.when() - Clock::now()).count();
      waits.Sleep(token, std::max<int64_t>(1, std::min(kSleepSliceUs, left_us)));
    }
    waits.Retire();
    if (!s.ok()) return explain(s);
    if (opt.notices != nullptr) {
      // A peer published its failure: report it with what this rank was waiting for.
      Status notice = opt.notices->CheckNotices(0);
      if (!notice.ok()) return Status(notice.code(), PendingSummary(ts, state) + "; " + notice.message());
    }
    if (moved) last_progress_us = NowMicros();
  }
  return Status::Ok();
}

}  // namespace tessera
