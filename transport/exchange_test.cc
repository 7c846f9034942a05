// The Exchange engine's reports to its observer (diagnosis reads them).
#include "transport/exchange.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// A link whose receive fails at once, as one from a peer that has just died does.
class FailingLink : public Link {
 public:
  explicit FailingLink(int peer) : Link(peer) {}
  const char* kind() const override { return "test"; }
  void BeginSend(const void*, size_t) override {}
  void BeginRecv(void*, size_t, const void*, const Reducer*) override {}
  Status ProgressSend(size_t, bool* progressed, bool* done) override {
    *progressed = *done = false;
    return Status::Ok();
  }
  Status ProgressRecv(bool* progressed, bool* done) override {
    *progressed = *done = false;
    return RemoteError("connection closed by rank " + std::to_string(peer()));
  }
  void AddWaits(WaitSet*, bool, bool) override {}
  size_t sent_bytes() const override { return 0; }
  size_t received_bytes() const override { return 0; }
  size_t ready_bytes() const override { return 0; }
};

// A link that completes each message on its first look and logs, per direction, the
// lengths of the messages in the order it ran them; receives fill their buffer with the
// message's place in that order.
class LoggingLink : public Link {
 public:
  explicit LoggingLink(int peer) : Link(peer) {}
  const char* kind() const override { return "test"; }
  void BeginSend(const void*, size_t len) override { sends.push_back(len); }
  void BeginRecv(void* dst, size_t len, const void*, const Reducer*) override {
    dst_ = static_cast<char*>(dst);
    len_ = len;
    recvs.push_back(len);
  }
  Status ProgressSend(size_t, bool* progressed, bool* done) override {
    *progressed = *done = true;
    return Status::Ok();
  }
  Status ProgressRecv(bool* progressed, bool* done) override {
    std::fill(dst_, dst_ + len_, static_cast<char>(recvs.size()));
    *progressed = *done = true;
    return Status::Ok();
  }
  void AddWaits(WaitSet*, bool, bool) override {}
  size_t sent_bytes() const override { return 0; }
  size_t received_bytes() const override { return 0; }
  size_t ready_bytes() const override { return len_; }
  std::vector<size_t> sends, recvs;

 private:
  char* dst_ = nullptr;
  size_t len_ = 0;
};

// Each link and direction runs its transfers in the order given, skipping empty ones,
// with few transfers (kept in place) and many (on the heap).
TEST(Exchange, EachLinkRunsItsTransfersInOrder) {
  for (size_t n : {3, 8, 9, 40}) {
    LoggingLink a(1), b(2);
    std::vector<std::vector<char>> buffers(n);
    std::vector<Transfer> t;
    std::vector<size_t> a_sends, a_recvs, b_sends;
    for (size_t i = 0; i < n; ++i) {
      const size_t len = i % 4 == 3 ? 0 : i + 1;  // some empty ones
      buffers[i].assign(i + 1, 0);
      if (i % 3 == 0) {
        t.push_back(Transfer::Send(&a, buffers[i].data(), len));
        if (len > 0) a_sends.push_back(len);
      } else if (i % 3 == 1) {
        t.push_back(Transfer::Recv(&a, buffers[i].data(), len));
        if (len > 0) a_recvs.push_back(len);
      } else {
        t.push_back(Transfer::Send(&b, buffers[i].data(), len));
        if (len > 0) b_sends.push_back(len);
      }
    }
    ExchangeOptions options;
    options.deadline = Deadline::AfterMs(10000);
    ASSERT_TRUE(Exchange(t.data(), t.size(), options).ok()) << n;
    EXPECT_EQ(a.sends, a_sends) << n;
    EXPECT_EQ(a.recvs, a_recvs) << n;
    EXPECT_EQ(b.sends, b_sends) << n;
    EXPECT_TRUE(b.recvs.empty()) << n;
    char place = 0;  // the receives filled their buffers in order
    for (size_t i = 1; i < n; i += 3) {
      if (t[i].len == 0) continue;
      EXPECT_EQ(buffers[i][0], ++place) << n << " transfer " << i;
    }
  }
}

// A link whose receive makes `step` more bytes ready on each look, and whose send moves
// whatever is available, logging (into a shared log) when each begins and ends and what
// each send found available.
class SteppingLink : public Link {
 public:
  SteppingLink(int peer, size_t step, std::vector<std::string>* log) : Link(peer), step_(step), log_(log) {}
  const char* kind() const override { return "test"; }
  void BeginSend(const void*, size_t len) override {
    len_ = len;
    log_->push_back("begin send " + std::to_string(peer()));
  }
  void BeginRecv(void*, size_t len, const void*, const Reducer*) override {
    len_ = len;
    ready_ = 0;
    log_->push_back("begin recv " + std::to_string(peer()));
  }
  Status ProgressSend(size_t available, bool* progressed, bool* done) override {
    availables.push_back(available);
    *progressed = true;
    *done = available == len_;
    if (*done) log_->push_back("end send " + std::to_string(peer()));
    return Status::Ok();
  }
  Status ProgressRecv(bool* progressed, bool* done) override {
    ready_ = std::min(len_, ready_ + step_);
    *progressed = true;
    *done = ready_ == len_;
    if (*done) log_->push_back("end recv " + std::to_string(peer()));
    return Status::Ok();
  }
  void AddWaits(WaitSet*, bool, bool) override {}
  size_t sent_bytes() const override { return 0; }
  size_t received_bytes() const override { return ready_; }
  size_t ready_bytes() const override { return ready_; }
  std::vector<size_t> availables;

 private:
  size_t step_, len_ = 0, ready_ = 0;
  std::vector<std::string>* log_;
};

// A receive gated on another transfer begins only once that one is done, and the rest
// of its queue waits behind it; a send gated at an offset moves only what its gate has
// made ready past that offset.
TEST(Exchange, GatedReceivesWaitAndOffsetSendsFollowTheirBytes) {
  std::vector<std::string> log;
  SteppingLink slow(1, 2, &log), held(2, 100, &log), out(3, 0, &log);
  char a[8] = {}, b[4] = {}, c[4] = {};
  Transfer t[4] = {Transfer::Recv(&slow, a, sizeof(a)), Transfer::RecvAfter(Transfer::Recv(&held, b, sizeof(b)), 0),
                   Transfer::Recv(&held, c, sizeof(c)), Transfer::SendAfter(&out, a + 4, 4, 0, 4)};
  ExchangeOptions options;
  options.deadline = Deadline::AfterMs(10000);
  ASSERT_TRUE(Exchange(t, 4, options).ok());
  auto at = [&](const std::string& what) { return std::find(log.begin(), log.end(), what) - log.begin(); };
  EXPECT_LT(at("end recv 1"), at("begin recv 2"));
  EXPECT_EQ(std::count(log.begin(), log.end(), "begin recv 2"), 2);
  // The gate made 2, 4, 6, 8 bytes ready: nothing past byte 4 until the third look.
  ASSERT_FALSE(out.availables.empty());
  EXPECT_EQ(out.availables.front(), 0u);
  EXPECT_EQ(out.availables.back(), 4u);
  for (size_t v : out.availables) EXPECT_TRUE(v == 0 || v == 2 || v == 4) << v;
}

class Recorder : public ExchangeObserver {
 public:
  void Waiting(const int* peers, size_t count, int64_t last_progress_us) override {
    last.assign(peers, peers + count);
    stalled_since_us = last_progress_us;
  }
  void Resumed(int64_t now_us) override { resumed_us.push_back(now_us); }
  std::vector<int> last;
  int64_t stalled_since_us = -1;
  std::vector<int64_t> resumed_us;
};

// A link whose receive completes once the clock passes a time.
class LateLink : public FailingLink {
 public:
  LateLink(int peer, int64_t ready_us) : FailingLink(peer), ready_us_(ready_us) {}
  Status ProgressRecv(bool* progressed, bool* done) override {
    *progressed = *done = NowMicros() >= ready_us_;
    return Status::Ok();
  }

 private:
  int64_t ready_us_;
};

// A wait that slept tells the observer when its stall ended, once: straggler detection
// adds up these stalls.
TEST(Exchange, AStallThatSleptEndsWithResumed) {
  const int64_t begin = NowMicros();
  LateLink late(3, begin + 30000);
  char buffer[8] = {};
  Transfer t = Transfer::Recv(&late, buffer, sizeof(buffer));
  Recorder recorder;
  ExchangeOptions options;
  options.deadline = Deadline::AfterMs(10000);
  options.observer = &recorder;  // no progress policy: sleeps at once
  ASSERT_TRUE(Exchange(&t, 1, options).ok());
  EXPECT_EQ(recorder.last, (std::vector<int>{3}));
  ASSERT_EQ(recorder.resumed_us.size(), 1u);
  EXPECT_GE(recorder.resumed_us[0] - recorder.stalled_since_us, 29000);
  EXPECT_LE(recorder.resumed_us[0], NowMicros());
}

// A rank whose exchange fails before it ever slept still tells whom it was waiting on:
// a rank finishing an earlier call when a peer died is then not blamed for being behind.
TEST(Exchange, AFailureTellsTheObserverWhomItWaitedOn) {
  FailingLink from_two(2), to_one(1);
  char buffer[8] = {};
  Transfer t[2] = {Transfer::Send(&to_one, buffer, sizeof(buffer)), Transfer::Recv(&from_two, buffer, sizeof(buffer))};
  Recorder recorder;
  ExchangeOptions options;
  options.deadline = Deadline::AfterMs(10000);
  options.observer = &recorder;
  const Status s = Exchange(t, 2, options);
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(recorder.last, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace tessera
