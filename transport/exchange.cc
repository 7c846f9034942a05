#include "transport/exchange.h"

#include <algorithm>
#include <vector>

#include "transport/wait_loop.h"

namespace tessera {
namespace {

enum class State : uint8_t { kWaiting, kActive, kDone };

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

class Engine : public Waitable {
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

  Status Run() {
    const CallStamp call = opt_.check_calls && opt_.stamp != nullptr ? *opt_.stamp : CallStamp{};
    for (Queue& q : queues_) {
      q.link->SetCall(call);
      Activate(q);
    }
    return WaitFor(this, opt_);
  }

  bool Done() const override { return remaining_ == 0; }
  Status Progress(bool* moved) override;
  void AddWaits(WaitSet* set) override {
    for (Queue& q : queues_) {
      if (q.busy()) q.link->AddWaits(set, q.is_send, !q.is_send);
    }
  }
  Status CheckPeers() override;
  void WaitingPeers(std::vector<int>* peers) const override;
  std::string PendingSummary() const override;

 private:
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

  Transfer* ts_;
  const ExchangeOptions& opt_;
  std::vector<State> state_;
  std::vector<int64_t> start_us_;  // when each transfer began (tracing only)
  std::vector<Queue> queues_;
  size_t remaining_ = 0;
};

// One pass over the active transfers.
Status Engine::Progress(bool* moved) {
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

std::string Engine::PendingSummary() const {
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

void Engine::WaitingPeers(std::vector<int>* peers) const {
  for (const Queue& q : queues_) {
    const int peer = q.link->peer();
    if (q.busy() && std::find(peers->begin(), peers->end(), peer) == peers->end()) peers->push_back(peer);
  }
}

Status Engine::CheckPeers() {
  for (Queue& q : queues_) {
    if (!q.busy()) continue;
    Status s = q.link->CheckPeer();
    if (!s.ok()) return s.Annotate(Direction(ts_[q.items[q.head]]) + Describe(ts_[q.items[q.head]]));
  }
  return Status::Ok();
}

}  // namespace

Status Exchange(Transfer* transfers, size_t count, const ExchangeOptions& options) {
  Engine engine(transfers, count, options);
  return engine.Run();
}

}  // namespace tessera
