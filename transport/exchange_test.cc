// The Exchange engine's reports to its observer (diagnosis reads them).
#include "transport/exchange.h"

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

class Recorder : public ExchangeObserver {
 public:
  void Waiting(const int* peers, size_t count, int64_t) override { last.assign(peers, peers + count); }
  std::vector<int> last;
};

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
