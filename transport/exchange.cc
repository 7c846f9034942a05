#include "transport/exchange.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "transport/wait_loop.h"

namespace tessera {
namespace {

enum class State : uint8_t { kWaiting, kActive, kDone };

std::string Describe(const Transfer& t) {
  return "rank " + std::to_string(t.link->peer()) + " (" + t.link->kind() + ")";
}

std::string Direction(const Transfer& t) { return t.is_send ? "sending to " : "receiving from "; }

constexpr size_t kEnd = SIZE_MAX;  // no transfer

// Up to N elements in place, more on the heap: an exchange of a few transfers (most
// are one send and one receive) allocates nothing. Elements start unset (T is trivial).
template <typename T, size_t N>
class SmallArray {
 public:
  explicit SmallArray(size_t n) {
    if (n > N) heap_.resize(n);
    data_ = n > N ? heap_.data() : inline_.data();
  }
  SmallArray(const SmallArray&) = delete;
  SmallArray& operator=(const SmallArray&) = delete;
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  std::array<T, N> inline_;
  std::vector<T> heap_;
  T* data_ = nullptr;
};

// The transfers of one link in one direction, which run one after the other: a list
// through ExchangeRun::next_, in the order given.
struct Queue {
  Link* link;
  bool is_send;
  size_t head;  // first transfer not done, or kEnd
  size_t tail;  // last transfer
  bool busy() const { return head != kEnd; }
};

// One Exchange call in progress: its transfers, their state and their queues, driven by
// the wait loop (wait_loop.h) until all are done.
class ExchangeRun : public Waitable {
 public:
  ExchangeRun(Transfer* ts, size_t n, const ExchangeOptions& opt)
      : ts_(ts), opt_(opt), state_(n), next_(n), queues_(n), start_us_(opt.tracer != nullptr ? n : 0, 0),
        crowded_(opt.progress != nullptr && opt.progress->crowded()) {
    for (size_t i = 0; i < n; ++i) {
      state_[i] = State::kWaiting;
      next_[i] = kEnd;
      size_t q = 0;
      while (q < nqueues_ && !(queues_[q].link == ts[i].link && queues_[q].is_send == ts[i].is_send)) ++q;
      if (q == nqueues_) {
        queues_[nqueues_++] = Queue{ts[i].link, ts[i].is_send, i, i};
      } else {
        next_[queues_[q].tail] = i;
        queues_[q].tail = i;
      }
    }
    remaining_ = n;
  }

  Status Run() {
    const CallStamp call = opt_.check_calls && opt_.stamp != nullptr ? *opt_.stamp : CallStamp{};
    for (size_t q = 0; q < nqueues_; ++q) {
      queues_[q].link->SetCall(call);
      Activate(queues_[q]);
    }
    return WaitFor(this, opt_);
  }

  bool Done() const override { return remaining_ == 0; }
  Status Progress(bool* moved) override;
  void AddWaits(WaitSet* set) override {
    for (size_t q = 0; q < nqueues_; ++q) {
      const Queue& k = queues_[q];
      // A receive held back by its gate is woken by that gate's queue, not its link.
      if (k.busy() && state_[k.head] != State::kWaiting) k.link->AddWaits(set, k.is_send, !k.is_send);
    }
  }
  void Flush() override {
    for (size_t q = 0; q < nqueues_; ++q) queues_[q].link->Flush();
  }
  Status CheckPeers() override;
  void WaitingPeers(std::vector<int>* peers) const override;
  std::string PendingSummary() const override;

 private:
  static constexpr size_t kInline = 8;

  // Whether transfer i is a receive whose gate is not done yet.
  bool HeldBack(size_t i) const {
    const int g = ts_[i].gate;
    return !ts_[i].is_send && g >= 0 && state_[g] != State::kDone;
  }

  // Starts the head of q, skipping (completing) zero-length transfers; a receive held
  // back by its gate stays waiting, and so does the rest of its queue.
  void Activate(Queue& q) {
    while (q.busy()) {
      const size_t i = q.head;
      if (HeldBack(i)) return;
      if (ts_[i].len != 0) {
        state_[i] = State::kActive;
        if (opt_.tracer != nullptr) start_us_[i] = NowMicros();
        if (ts_[i].is_send) {
          ts_[i].link->set_peer_copies(ts_[i].to_copy && !crowded_);
          ts_[i].link->BeginSend(ts_[i].src, ts_[i].len);
        } else {
          ts_[i].link->BeginRecv(ts_[i].dst, ts_[i].len, ts_[i].acc, ts_[i].reducer);
        }
        return;
      }
      state_[i] = State::kDone;
      --remaining_;
      q.head = next_[i];
    }
  }

  // How much of send i's data exists yet (all of it unless gated by a receive).
  size_t Available(size_t i) const {
    const int g = ts_[i].gate;
    if (g < 0 || state_[g] == State::kDone) return ts_[i].len;
    if (state_[g] == State::kWaiting) return 0;
    const size_t ready = ts_[g].link->ready_bytes(), skip = ts_[i].gate_offset;
    return ready > skip ? std::min(ts_[i].len, ready - skip) : 0;
  }

  Transfer* ts_;
  const ExchangeOptions& opt_;
  SmallArray<State, kInline> state_;
  SmallArray<size_t, kInline> next_;  // the next transfer of the same queue, or kEnd
  SmallArray<Queue, kInline> queues_;
  size_t nqueues_ = 0;
  std::vector<int64_t> start_us_;  // when each transfer began (tracing only)
  size_t remaining_ = 0;
  // Ranks outnumber cores: no send waits for its receiver to read it (Transfer::ToCopy),
  // which would cost the receiver's turn on a core at every hop.
  const bool crowded_;
};

// One pass over the active transfers.
Status ExchangeRun::Progress(bool* moved) {
  *moved = false;
  for (size_t k = 0; k < nqueues_; ++k) {
    Queue& q = queues_[k];
    // Keep going on this queue while transfers complete within the pass.
    while (q.busy()) {
      const size_t i = q.head;
      if (state_[i] == State::kWaiting) {  // held back by its gate (Activate)
        if (HeldBack(i)) break;
        Activate(q);
        *moved = true;
        continue;
      }
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
      q.head = next_[i];
      Activate(q);
    }
  }
  return Status::Ok();
}

std::string ExchangeRun::PendingSummary() const {
  std::string out;
  for (size_t k = 0; k < nqueues_; ++k) {
    const Queue& q = queues_[k];
    if (!q.busy()) continue;
    const Transfer& t = ts_[q.head];
    if (!out.empty()) out += "; ";
    if (state_[q.head] == State::kWaiting) {
      out += Direction(t) + Describe(t) + ", not begun: it waits for another message of this call";
      continue;
    }
    out += Direction(t) + Describe(t) + ", " +
           std::to_string(t.is_send ? t.link->sent_bytes() : t.link->received_bytes()) + " of " +
           std::to_string(t.len) + " bytes moved";
    size_t later = 0;
    for (size_t i = next_[q.head]; i != kEnd; i = next_[i]) ++later;
    if (later > 0) out += " (" + std::to_string(later) + " more message(s) queued)";
  }
  return out;
}

void ExchangeRun::WaitingPeers(std::vector<int>* peers) const {
  for (size_t k = 0; k < nqueues_; ++k) {
    const Queue& q = queues_[k];
    const int peer = q.link->peer();
    if (q.busy() && std::find(peers->begin(), peers->end(), peer) == peers->end()) peers->push_back(peer);
  }
}

Status ExchangeRun::CheckPeers() {
  for (size_t k = 0; k < nqueues_; ++k) {
    const Queue& q = queues_[k];
    if (!q.busy()) continue;
    Status s = q.link->CheckPeer();
    if (!s.ok()) return s.Annotate(Direction(ts_[q.head]) + Describe(ts_[q.head]));
  }
  return Status::Ok();
}

}  // namespace

Status Exchange(Transfer* transfers, size_t count, const ExchangeOptions& options) {
  ExchangeRun run(transfers, count, options);
  return run.Run();
}

}  // namespace tessera
