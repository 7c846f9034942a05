// Tests of the UCX transport with real processes and real UCX. Each rank is a forked
// process (tests/rank_harness.h) with its own UCP context and worker; ranks swap their
// worker addresses through the harness (in the library the rendezvous does this), put
// the transport in a LinkTable and run the Exchange engine over its links, as the
// collectives do.
//
// Every test runs over UCX's TCP (UCX_TLS=tcp,self), over its shared-memory transports
// (posix,sysv,cma,self) and with UCX's own choice (UCX_TLS unset), set in each rank
// before ucp_init, with every chunk eager as the library sends them on hosts without
// RDMA; and once more with UCX's own choice of eager or rendezvous per chunk (its
// rendezvous below 64 KiB chunks), as on hosts with RDMA. Bodies run in the children
// and return their failures as text.
#include "transport/ucx/ucx_transport.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/rank_harness.h"
#include "transport/exchange.h"
#include "transport/link_table.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// --- Ranks: tests/rank_harness.h, with a UCX transport in each ---------------------

using tessera_test::ArriveAndWait;
using tessera_test::Failures;
using tessera_test::Milliseconds;
using tessera_test::RankResult;
using tessera_test::WaitForRanksDone;

// What a body sees.
int64_t SpinUs() { return std::getenv("UCX_TEST_SPIN_US") ? std::atoll(std::getenv("UCX_TEST_SPIN_US")) : 50; }

struct Rank {
  int rank = 0;
  int nranks = 0;
  LinkTable* links = nullptr;
  // UCX_TEST_SPIN_US: how long a wait polls (50 us), fixed.
  std::shared_ptr<ProgressPolicy> progress = std::make_shared<ProgressPolicy>(ProgressSettings{PollMode::kRelax, SpinUs()});

  Link* Get(int peer, std::string* error) const {
    Link* l = nullptr;
    Status s = links->Get(peer, Deadline::AfterMs(10000), &l);
    if (!s.ok()) *error += "connecting to rank " + std::to_string(peer) + ": " + s.ToString() + "\n";
    return l;
  }
  ExchangeOptions Options(int64_t timeout_ms) const {
    ExchangeOptions o;
    o.deadline = Deadline::AfterMs(timeout_ms);
    o.timeout_ms = timeout_ms;
    o.progress = progress.get();
    o.notices = links;
    return o;
  }
};

using Body = std::function<std::string(const Rank&)>;

struct RunConfig {
  const char* tls = nullptr;  // UCX_TLS for the ranks; null: unset
  const char* rndv_thresh = nullptr;  // UCX_RNDV_THRESH for the ranks; null: unset
  int nranks = 2;
  UcxTransport::Options options;
  int64_t limit_ms = 60000;   // all ranks, from fork to exit
};

// The life of one rank: a UCX transport whose worker address the ranks swap, in a
// LinkTable of its own; then the body; then a teardown bounded in time.
std::string RunUcxRank(const RunConfig& cfg, const tessera_test::RankContext& ctx, const Body& body) {
  if (cfg.tls != nullptr) {
    setenv("UCX_TLS", cfg.tls, 1);
  } else {
    unsetenv("UCX_TLS");
  }
  if (cfg.rndv_thresh != nullptr) {
    setenv("UCX_RNDV_THRESH", cfg.rndv_thresh, 1);
  } else {
    unsetenv("UCX_RNDV_THRESH");
  }
  std::unique_ptr<UcxTransport> ucx;
  Status s = UcxTransport::Create(cfg.options, ctx.rank, ctx.nranks, &ucx);
  if (!s.ok()) return "create: " + s.ToString();
  // Each rank's pid (10 digits) and worker address, in one exchange.
  char pid[11];
  std::snprintf(pid, sizeof(pid), "%010d", static_cast<int>(getpid()));
  std::vector<std::string> all;
  if (!tessera_test::ExchangeWithRanks(pid + ucx->worker_address(), &all, Milliseconds(20000))) {
    return "worker addresses not exchanged (" + std::to_string(ucx->worker_address().size()) + " bytes here)";
  }
  std::vector<LocalRank> local;  // every rank of the test is on this host, as the plugin would say
  for (int r = 0; r < ctx.nranks; ++r) {
    local.push_back(LocalRank{r, std::stoi(all[r].substr(0, 10))});
    all[r].erase(0, 10);
  }
  s = ucx->SetPeerAddresses(all);
  if (!s.ok()) return "SetPeerAddresses: " + s.ToString();
  ucx->WatchLocalPeers(local);
  std::vector<std::unique_ptr<Transport>> transports;
  transports.push_back(std::move(ucx));
  auto links = std::make_unique<LinkTable>(ctx.nranks, std::move(transports));
  std::string result = body(Rank{ctx.rank, ctx.nranks, links.get()});
  // Teardown (endpoints closed, worker and context destroyed) is bounded in time,
  // whatever happened to the peers.
  const auto start = Clock::now();
  links.reset();
  const double ms = MsSince(start);
  if (ms > 3000) result += "transport teardown took " + std::to_string(ms) + " ms\n";
  return result;
}

std::vector<RankResult> RunRanks(const RunConfig& cfg, const Body& body) {
  tessera_test::RankOptions opts;
  opts.timeout = Milliseconds(cfg.limit_ms);
  opts.unique_ids = 0;  // below the communicator: no tessera ids
  return tessera_test::RunRanksRaw(
      cfg.nranks, [&](const tessera_test::RankContext& ctx) { return RunUcxRank(cfg, ctx, body); }, opts);
}

// System V shared memory segments created by these processes that still exist (UCX's
// sysv transport marks its segments for removal at once, so there should be none).
std::string LeftoverSysvSegments(const std::vector<RankResult>& outcomes) {
  std::string found;
  FILE* f = std::fopen("/proc/sysvipc/shm", "r");
  if (f == nullptr) return found;
  char line[512];
  std::fgets(line, sizeof(line), f);  // header
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long key, shmid, perms, size, cpid;
    if (std::sscanf(line, "%lld %lld %llo %lld %lld", &key, &shmid, &perms, &size, &cpid) != 5) continue;
    for (const RankResult& o : outcomes) {
      if (o.pid == cpid) found += "segment " + std::to_string(shmid) + " of pid " + std::to_string(cpid) + "\n";
    }
  }
  std::fclose(f);
  return found;
}

// --- Data ----------------------------------------------------------------------------

uint8_t PatternByte(int rank, int message, size_t i) {
  return static_cast<uint8_t>(i * 131 + (i >> 9) + message * 17 + rank * 89 + 1);
}

void Fill(std::vector<uint8_t>* v, int rank, int message) {
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] = PatternByte(rank, message, i);
}

// "" or where the first wrong byte is.
std::string CheckPattern(const uint8_t* p, size_t len, int rank, int message) {
  for (size_t i = 0; i < len; ++i) {
    if (p[i] != PatternByte(rank, message, i)) {
      return "message " + std::to_string(message) + " (" + std::to_string(len) + " bytes) from rank " +
             std::to_string(rank) + ": byte " + std::to_string(i) + " is " + std::to_string(p[i]) + ", want " +
             std::to_string(PatternByte(rank, message, i)) + "\n";
    }
  }
  return "";
}

void SumFloats(void* dst, const void* a, const void* b, size_t count) {
  float* d = static_cast<float*>(dst);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < count; ++i) d[i] = x[i] + y[i];
}
const Reducer kFloatSum{SumFloats, sizeof(float)};

// Small integers, so float sums are exact.
float Value(int rank, size_t i) { return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 1021); }

std::vector<float> Values(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = Value(rank, i);
  return v;
}

std::string CheckSum(const float* got, size_t count, const std::vector<int>& ranks, const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r : ranks) want += Value(r, i);
    if (got[i] != want) {
      return what + ": element " + std::to_string(i) + " of " + std::to_string(count) + " is " +
             std::to_string(got[i]) + ", want " + std::to_string(want) + "\n";
    }
  }
  return "";
}

// --- Ring allreduce, the pattern of collectives/ring_allreduce.cc -------------------

struct Block {
  size_t offset, count;  // elements
};
Block RingBlock(size_t count, int p, int index) {
  const size_t n = static_cast<size_t>(p), i = static_cast<size_t>(index);
  const size_t base = count / n, extra = count % n;
  return Block{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}
int Mod(int a, int p) { return ((a % p) + p) % p; }

// Every step in one exchange; each send forwards the block the previous receive made.
Status RingAllReduce(const Rank& me, const float* send, float* recv, size_t count, int64_t timeout_ms) {
  const int p = me.nranks, r = me.rank;
  std::string error;
  Link* right = me.Get(Mod(r + 1, p), &error);
  Link* left = me.Get(Mod(r - 1, p), &error);
  if (right == nullptr || left == nullptr) return InternalError(error);
  const char* s = reinterpret_cast<const char*>(send);
  char* d = reinterpret_cast<char*>(recv);
  auto bytes = [&](int b) {
    Block blk = RingBlock(count, p, b);
    return Block{blk.offset * sizeof(float), blk.count * sizeof(float)};
  };
  std::vector<Transfer> t;
  for (int step = 0; step < p - 1; ++step) {  // reduce-scatter
    const Block out = bytes(Mod(r - step, p));
    const Block in = bytes(Mod(r - step - 1, p));
    if (step == 0) {
      t.push_back(Transfer::Send(right, s + out.offset, out.count));
    } else {
      t.push_back(Transfer::SendAfter(right, d + out.offset, out.count, static_cast<int>(t.size()) - 1));
    }
    t.push_back(Transfer::RecvReduce(left, d + in.offset, s + in.offset, &kFloatSum, in.count));
  }
  for (int step = 0; step < p - 1; ++step) {  // allgather
    const Block out = bytes(Mod(r + 1 - step, p));
    const Block in = bytes(Mod(r - step, p));
    t.push_back(Transfer::SendAfter(right, d + out.offset, out.count, static_cast<int>(t.size()) - 1));
    t.push_back(Transfer::Recv(left, d + in.offset, in.count));
  }
  return Exchange(t.data(), t.size(), me.Options(timeout_ms));
}

// --- Tests ---------------------------------------------------------------------------

// One way of running the transport: UCX_TLS (null: unset) and Options::eager.
struct UcxPath {
  const char* tls;
  bool eager;
  const char* rndv_thresh;  // UCX_RNDV_THRESH for the ranks; null: unset
};

class UcxTransportTest : public ::testing::TestWithParam<UcxPath> {
 protected:
  RunConfig Config(int nranks, int64_t chunk_bytes = 65536, int64_t in_flight = 4) const {
    RunConfig c;
    c.tls = GetParam().tls;
    c.options.eager = GetParam().eager;
    c.rndv_thresh = GetParam().rndv_thresh;
    c.nranks = nranks;
    c.options.chunk_bytes = chunk_bytes;
    c.options.chunks_in_flight = in_flight;
    return c;
  }
};

// Both ranks send each other messages of many sizes, all queued in one exchange, so
// that they also check the order of messages on a link.
TEST_P(UcxTransportTest, SendRecvManySizes) {
  const std::vector<size_t> sizes = {0, 1, 7, 4099, 65535, 65536, 65537, 3 * 65536 + 5, 1 << 20, 64u << 20};
  auto out = RunRanks(Config(2), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    std::vector<std::vector<uint8_t>> send(sizes.size()), recv(sizes.size());
    std::vector<Transfer> t;
    for (size_t m = 0; m < sizes.size(); ++m) {
      send[m].resize(sizes[m]);
      Fill(&send[m], me.rank, static_cast<int>(m));
      recv[m].assign(sizes[m], 0);
      t.push_back(Transfer::Send(peer, send[m].data(), sizes[m]));
      t.push_back(Transfer::Recv(peer, recv[m].data(), sizes[m]));
    }
    Status s = Exchange(t.data(), t.size(), me.Options(30000));
    if (!s.ok()) return "exchange: " + s.ToString();
    for (size_t m = 0; m < sizes.size(); ++m) f += CheckPattern(recv[m].data(), sizes[m], 1 - me.rank, static_cast<int>(m));
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// Receives that reduce: dst = acc + incoming, out of place and in place, for sizes
// that end inside a chunk and on its boundary.
TEST_P(UcxTransportTest, ReduceIntoDestination) {
  const std::vector<size_t> counts = {1, 1001, 16384, 16384 * 3 + 5, 4u << 20};
  auto out = RunRanks(Config(2), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    for (size_t count : counts) {
      const std::vector<float> mine = Values(me.rank, count);
      std::vector<float> dst(count, -1.0f), inplace = mine;
      Transfer t[] = {
          Transfer::Send(peer, mine.data(), count * sizeof(float)),
          Transfer::RecvReduce(peer, dst.data(), mine.data(), &kFloatSum, count * sizeof(float)),
          Transfer::Send(peer, mine.data(), count * sizeof(float)),
          Transfer::RecvReduce(peer, inplace.data(), inplace.data(), &kFloatSum, count * sizeof(float)),
      };
      Status s = Exchange(t, 4, me.Options(30000));
      if (!s.ok()) return "exchange of " + std::to_string(count) + " floats: " + s.ToString();
      f += CheckSum(dst.data(), count, {0, 1}, "out of place");
      f += CheckSum(inplace.data(), count, {0, 1}, "in place");
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// ready_bytes() is a contiguous prefix that is final, and it grows chunk by chunk
// (never by more than the chunks in flight at once), both when copying and reducing.
TEST_P(UcxTransportTest, ReadyBytesGrowChunkByChunk) {
  constexpr size_t kChunk = 65536, kInFlight = 4, kLen = 8u << 20;
  auto out = RunRanks(Config(2, kChunk, kInFlight), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    const size_t count = kLen / sizeof(float);
    if (me.rank == 0) {
      std::vector<uint8_t> data(kLen);
      Fill(&data, 0, 0);
      const std::vector<float> values = Values(0, count);
      Transfer t[] = {Transfer::Send(peer, data.data(), kLen), Transfer::Send(peer, values.data(), kLen)};
      Status s = Exchange(t, 2, me.Options(30000));
      return s.ok() ? f : "sending: " + s.ToString();
    }
    for (int reducing = 0; reducing < 2; ++reducing) {
      std::vector<uint8_t> dst(kLen, 0);
      const std::vector<float> acc = Values(1, count);
      if (reducing) {
        peer->BeginRecv(dst.data(), kLen, acc.data(), &kFloatSum);
      } else {
        peer->BeginRecv(dst.data(), kLen, nullptr, nullptr);
      }
      size_t ready = 0, steps = 0;
      bool done = false;
      const Deadline deadline = Deadline::AfterMs(30000);
      while (!done && f.empty()) {
        bool progressed = false;
        Status s = peer->ProgressRecv(&progressed, &done);
        if (!s.ok()) return "receiving: " + s.ToString();
        const size_t now = peer->ready_bytes();
        if (now < ready) f += "ready_bytes went back from " + std::to_string(ready) + " to " + std::to_string(now) + "\n";
        if (now != kLen && now % kChunk != 0) f += "ready_bytes " + std::to_string(now) + " is not a chunk boundary\n";
        if (now > ready + kInFlight * kChunk) f += "ready_bytes jumped by " + std::to_string(now - ready) + "\n";
        if (now > ready) {
          ++steps;
          // The new part of the prefix must already hold its final value.
          if (reducing) {
            const float* got = reinterpret_cast<const float*>(dst.data());
            for (size_t i = ready / sizeof(float); i < now / sizeof(float) && f.empty(); ++i) {
              if (got[i] != Value(0, i) + Value(1, i)) f += "ready element " + std::to_string(i) + " is wrong\n";
            }
          } else {
            for (size_t i = ready; i < now && f.empty(); ++i) {
              if (dst[i] != PatternByte(0, 0, i)) f += "ready byte " + std::to_string(i) + " is wrong\n";
            }
          }
          ready = now;
        }
        if (deadline.Expired()) return "receive did not finish: " + std::to_string(ready) + " bytes ready\n";
      }
      if (ready != kLen) f += "finished with ready_bytes " + std::to_string(ready) + "\n";
      if (steps < kLen / (kChunk * kInFlight)) f += "ready_bytes grew in only " + std::to_string(steps) + " steps\n";
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// The pipelined ring allreduce of collectives/ring_allreduce.cc over UCX links: sends
// gated on the receives they forward, on 3 and 4 ranks, out of place and in place.
TEST_P(UcxTransportTest, GatedRingAllReduce) {
  for (int p : {3, 4}) {
    const std::vector<size_t> counts = {1, 5, 65537, 3u << 20};
    auto out = RunRanks(Config(p), [&](const Rank& me) {
      std::string f;
      std::vector<int> all;
      for (int r = 0; r < me.nranks; ++r) all.push_back(r);
      for (size_t count : counts) {
        const std::vector<float> send = Values(me.rank, count);
        std::vector<float> recv(count, -1.0f);
        Status s = RingAllReduce(me, send.data(), recv.data(), count, 30000);
        if (!s.ok()) return "allreduce of " + std::to_string(count) + ": " + s.ToString();
        f += CheckSum(recv.data(), count, all, "out of place, count " + std::to_string(count));
        std::vector<float> inplace = send;
        s = RingAllReduce(me, inplace.data(), inplace.data(), count, 30000);
        if (!s.ok()) return "in-place allreduce of " + std::to_string(count) + ": " + s.ToString();
        f += CheckSum(inplace.data(), count, all, "in place, count " + std::to_string(count));
      }
      return f;
    });
    EXPECT_EQ(Failures(out), "") << p << " ranks";
  }
}

// A receiver expecting another length than was sent gets InvalidUsage naming the
// sender: fewer chunks, more chunks, and the same chunk count with a different tail.
TEST_P(UcxTransportTest, SizeMismatchIsInvalidUsage) {
  struct Case {
    size_t sent, expected;
    const char* says;
  };
  const Case cases[] = {{100000, 300000, "rank 0 sent 100000 bytes"},
                        {300000, 100000, "rank 0 sent more than 100000 bytes"},
                        {1000, 2000, "rank 0 sent 1000 bytes"},
                        {2000, 1000, "rank 0 sent more than 1000 bytes"}};
  for (const Case& c : cases) {
    auto out = RunRanks(Config(2), [&](const Rank& me) {
      std::string f;
      Link* peer = me.Get(1 - me.rank, &f);
      if (peer == nullptr) return f;
      std::vector<uint8_t> buf(std::max(c.sent, c.expected), 1);
      if (me.rank == 0) {
        // The sender may finish, or fail once the receiver has gone: either is fine,
        // as long as it does not hang. It stays until the receiver is done, so that
        // the receiver meets the mismatch, not a peer that has gone.
        Transfer t = Transfer::Send(peer, buf.data(), c.sent);
        Exchange(&t, 1, me.Options(10000));
        if (!WaitForRanksDone({1}, Milliseconds(20000))) f += "the receiver did not finish\n";
        return f;
      }
      Transfer t = Transfer::Recv(peer, buf.data(), c.expected);
      Status s = Exchange(&t, 1, me.Options(10000));
      if (s.code() != Code::kInvalidUsage || s.message().find(c.says) == std::string::npos ||
          s.message().find("mismatch") == std::string::npos) {
        f += "want InvalidUsage saying \"" + std::string(c.says) + "\", got " + s.ToString() + "\n";
      }
      return f;
    });
    EXPECT_EQ(Failures(out), "") << c.sent << " bytes sent, " << c.expected << " expected";
  }
}

// A rank killed in the middle of a 64 MiB transfer: the ranks sending to it and
// receiving from it get RemoteError naming it within a few seconds, not a hang.
// Eager chunks to it may all complete before it dies (its worker takes them in while
// it sends), so the sender also waits for a reply the dead rank never sends.
TEST_P(UcxTransportTest, PeerKilledMidTransfer) {
  constexpr size_t kLen = 64u << 20;
  auto out = RunRanks(Config(3, 1 << 20, 4), [&](const Rank& me) {
    std::string f;
    std::vector<uint8_t> buf(kLen, 7);
    if (me.rank == 2) {
      // Once all are connected, sends the first quarter of a message to rank 0 (the
      // rest is never produced), then dies without a word.
      Link* to0 = me.Get(0, &f);
      if (to0 == nullptr || !ArriveAndWait(0, 3, Milliseconds(20000))) return f + "set-up failed\n";
      to0->BeginSend(buf.data(), kLen);
      const Deadline d = Deadline::AfterMs(20000);
      while (to0->sent_bytes() < kLen / 4 && !d.Expired()) {
        bool p = false, done = false;
        if (!to0->ProgressSend(kLen / 4, &p, &done).ok()) break;
      }
      raise(SIGKILL);
    }
    Link* l = me.Get(2, &f);
    if (l == nullptr || !ArriveAndWait(0, 3, Milliseconds(20000))) return f + "set-up failed\n";
    uint64_t reply = 0;
    Transfer t[2] = {me.rank == 0 ? Transfer::Recv(l, buf.data(), kLen) : Transfer::Send(l, buf.data(), kLen),
                     Transfer::Recv(l, &reply, sizeof(reply))};
    const auto start = Clock::now();
    Status s = Exchange(t, me.rank == 0 ? 1 : 2, me.Options(30000));
    const double ms = MsSince(start);
    if (s.code() != Code::kRemoteError || s.message().find("rank 2") == std::string::npos) {
      f += "want RemoteError naming rank 2, got " + s.ToString() + "\n";
    }
    if (ms > 8000) f += "noticed after " + std::to_string(ms) + " ms\n";
    std::fprintf(stderr, "[rank %d] after rank 2 died (%.0f ms): %s\n", me.rank, ms, s.ToString().c_str());
    return f;
  });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[2].died() && out[2].signal == SIGKILL) << out[2].Describe();
  EXPECT_EQ(LeftoverSysvSegments(out), "");
  out.pop_back();
  EXPECT_EQ(Failures(out), "");
}

// A receiver busy elsewhere (its worker progressing, no receive posted) holds at most
// the sender's window of a large message: eager chunks of it complete only once
// matched, so the sender does not pour the whole message into the receiver's memory.
TEST_P(UcxTransportTest, BusyReceiverHoldsAtMostTheWindow) {
  constexpr size_t kLen = 64u << 20, kChunk = 512 << 10, kWindow = 8;
  auto out = RunRanks(Config(2, kChunk, kWindow), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr || !ArriveAndWait(0, 2, Milliseconds(20000))) return f + "set-up failed\n";
    std::vector<uint8_t> buf(kLen, static_cast<uint8_t>(me.rank + 1));
    uint64_t word = 7;
    // Rank 0 sends the large message and counts what completed after 300 ms; rank 1
    // sends a word, which keeps its worker progressing, and posts its receive only
    // after 600 ms (well after rank 0 counted, whatever their start skew).
    const size_t send_len = me.rank == 0 ? kLen : sizeof(word);
    peer->BeginSend(me.rank == 0 ? static_cast<void*>(buf.data()) : &word, send_len);
    bool sent = false, received = false;
    auto drive = [&](bool receiving) -> Status {
      bool p = false;
      TESSERA_RETURN_IF_ERROR(peer->ProgressSend(send_len, &p, &sent));
      if (receiving && !received) TESSERA_RETURN_IF_ERROR(peer->ProgressRecv(&p, &received));
      // The worker progressing while no receive is posted, as in a rank busy with other
      // exchanges: the transport's notice check turns it.
      if (!receiving) TESSERA_RETURN_IF_ERROR(me.links->CheckNotices(0));
      return Status::Ok();
    };
    const Deadline busy = Deadline::AfterMs(me.rank == 0 ? 300 : 600);
    while (!busy.Expired()) {
      Status s = drive(false);
      if (!s.ok()) return "while busy: " + s.ToString();
    }
    if (me.rank == 0 && peer->sent_bytes() > kWindow * kChunk) {
      f += std::to_string(peer->sent_bytes()) + " bytes completed before the receiver posted, more than the window\n";
    }
    if (me.rank == 0) {
      peer->BeginRecv(&word, sizeof(word), nullptr, nullptr);
    } else {
      peer->BeginRecv(buf.data(), kLen, nullptr, nullptr);
    }
    const Deadline finish = Deadline::AfterMs(30000);
    while (!(sent && received) && !finish.Expired()) {
      Status s = drive(true);
      if (!s.ok()) return f + "finishing: " + s.ToString();
    }
    if (!(sent && received)) f += "not finished in 30 s\n";
    if (me.rank == 1 && (buf.front() != 1 || buf.back() != 1)) f += "received the wrong bytes\n";
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// Small messages cost credits by their bytes (one 8 KiB unit each), not a whole
// chunk's: a busy receiver holds at most a window's worth of them (4 chunks of 64 KiB:
// 32 units), and once it receives, credits flow back and the rest arrive.
TEST_P(UcxTransportTest, SmallMessagesToABusyReceiverStayWithinTheWindow) {
  if (!GetParam().eager) GTEST_SKIP() << "credits are for eager links";
  constexpr int kMessages = 200;
  constexpr size_t kWindowUnits = 4 * (65536 / 8192);
  auto out = RunRanks(Config(2, 65536, 4), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr || !ArriveAndWait(0, 2, Milliseconds(20000))) return f + "set-up failed\n";
    if (me.rank == 1) {
      // Busy for 600 ms, its worker progressing (the transport's notice check turns
      // it, as a rank busy with other exchanges would), then takes all.
      uint64_t word = 0;
      const Deadline busy = Deadline::AfterMs(600);
      while (!busy.Expired()) {
        Status s = me.links->CheckNotices(0);
        if (!s.ok()) return "while busy: " + s.ToString();
      }
      for (int m = 0; m < kMessages; ++m) {
        Transfer t = Transfer::Recv(peer, &word, sizeof(word));
        Status s = Exchange(&t, 1, me.Options(10000));
        if (!s.ok()) return "receiving message " + std::to_string(m) + ": " + s.ToString();
        if (word != static_cast<uint64_t>(m)) f += "message " + std::to_string(m) + " holds " + std::to_string(word) + "\n";
      }
      return f;
    }
    // Rank 0 sends one after another; what completed in 300 ms is what rank 1 holds.
    const Deadline count_at = Deadline::AfterMs(300), give_up = Deadline::AfterMs(20000);
    std::vector<uint64_t> words(kMessages);
    int done = -1;  // messages complete at count_at
    for (int m = 0; m < kMessages; ++m) {
      words[m] = static_cast<uint64_t>(m);
      peer->BeginSend(&words[m], sizeof(uint64_t));
      bool p = false, sent = false;
      while (!sent) {
        if (done < 0 && count_at.Expired()) done = m;
        if (give_up.Expired()) return f + "message " + std::to_string(m) + " not sent in 20 s\n";
        Status s = peer->ProgressSend(sizeof(uint64_t), &p, &sent);
        if (!s.ok()) return "sending message " + std::to_string(m) + ": " + s.ToString();
      }
    }
    if (done > static_cast<int>(kWindowUnits) || done < 0) {
      f += std::to_string(done < 0 ? kMessages : done) +
           " small messages completed before the receiver took any, more than the window's " +
           std::to_string(kWindowUnits) + "\n";
    }
    if (done >= 0 && done < 2) f += "only " + std::to_string(done) + " small messages went before the receiver took any\n";
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// A window of one chunk: after a small message the sender needs a whole chunk's
// credits for the next, which the receiver must hand back though it took in less than
// half a window.
TEST_P(UcxTransportTest, OneChunkWindowAfterASmallMessage) {
  constexpr size_t kChunk = 65536;
  auto out = RunRanks(Config(2, kChunk, 1), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    std::vector<std::vector<uint8_t>> bufs = {std::vector<uint8_t>(8), std::vector<uint8_t>(kChunk),
                                              std::vector<uint8_t>(8), std::vector<uint8_t>(kChunk)};
    std::vector<Transfer> t;
    for (size_t m = 0; m < bufs.size(); ++m) {
      if (me.rank == 0) {
        Fill(&bufs[m], 0, static_cast<int>(m));
        t.push_back(Transfer::Send(peer, bufs[m].data(), bufs[m].size()));
      } else {
        t.push_back(Transfer::Recv(peer, bufs[m].data(), bufs[m].size()));
      }
    }
    Status s = Exchange(t.data(), t.size(), me.Options(10000));
    if (!s.ok()) return "exchange: " + s.ToString();
    if (me.rank == 1) {
      for (size_t m = 0; m < bufs.size(); ++m) f += CheckPattern(bufs[m].data(), bufs[m].size(), 0, static_cast<int>(m));
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// A peer that is alive but never takes part: the exchange times out naming it, and
// the interrupted sends and receives are abandoned and torn down in bounded time (the
// harness checks teardown).
TEST_P(UcxTransportTest, SilentPeerTimesOutAndTearsDown) {
  constexpr size_t kLen = 64u << 20;
  auto out = RunRanks(Config(2, 1 << 20, 4), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    if (me.rank == 1) {
      if (!WaitForRanksDone({0}, Milliseconds(20000))) f += "rank 0 did not finish\n";
      return f;
    }
    std::vector<uint8_t> send(kLen, 1), recv(kLen, 0);
    Transfer t[] = {Transfer::Send(peer, send.data(), kLen), Transfer::Recv(peer, recv.data(), kLen)};
    Status s = Exchange(t, 2, me.Options(1000));
    if (s.code() != Code::kTimeout || s.message().find("rank 1") == std::string::npos) {
      f += "want a timeout naming rank 1, got " + s.ToString() + "\n";
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// Teardown right after a peer died, before UCX has noticed (the exchange gives up
// first): the interrupted transfer's endpoint is closed by force, without crashing
// and in bounded time.
TEST_P(UcxTransportTest, TeardownRightAfterPeerDeath) {
  constexpr size_t kLen = 64u << 20;
  auto out = RunRanks(Config(2, 1 << 20, 4), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr || !ArriveAndWait(0, 2, Milliseconds(20000))) return f + "set-up failed\n";
    std::vector<uint8_t> buf(kLen, 1);
    if (me.rank == 1) {
      peer->BeginRecv(buf.data(), kLen, nullptr, nullptr);
      const Deadline d = Deadline::AfterMs(20000);
      while (peer->received_bytes() < kLen / 8 && !d.Expired()) {
        bool p = false, done = false;
        if (!peer->ProgressRecv(&p, &done).ok()) break;
      }
      raise(SIGKILL);
    }
    Transfer t = Transfer::Send(peer, buf.data(), kLen);
    Status s = Exchange(&t, 1, me.Options(300));
    if (s.ok()) f += "the send to a dead rank succeeded\n";
    return f;
  });
  ASSERT_EQ(out.size(), 2u);
  out.pop_back();
  EXPECT_EQ(Failures(out), "");
}

// A rank whose communicator broke publishes why; a peer blocked on it fails at once
// with that root cause rather than timing out.
TEST_P(UcxTransportTest, FailureNoticeCarriesRootCause) {
  auto out = RunRanks(Config(2), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    if (me.rank == 1) {
      me.links->PublishFailure(InvalidArgument("count differs on rank 1"));
      if (!WaitForRanksDone({0}, Milliseconds(20000))) f += "rank 0 did not finish\n";
      return f;
    }
    std::vector<uint8_t> buf(1000);
    Transfer t = Transfer::Recv(peer, buf.data(), buf.size());
    const auto start = Clock::now();
    Status s = Exchange(&t, 1, me.Options(15000));
    const std::string want = "rank 1 failed: count differs on rank 1";
    if (s.code() != Code::kInvalidArgument || s.message().find(want) == std::string::npos) {
      f += "want the notice from rank 1, got " + s.ToString() + "\n";
    }
    if (MsSince(start) > 3000) f += "notice arrived after " + std::to_string(MsSince(start)) + " ms\n";
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// A rank waiting for a message that comes late sleeps on the worker's event fd: it
// uses little CPU while idle, and wakes as soon as the message arrives.
TEST_P(UcxTransportTest, IdleWaitSleepsAndWakesPromptly) {
  constexpr int kRounds = 5;
  constexpr int64_t kIdleMs = 300;
  auto out = RunRanks(Config(2), [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    uint64_t word = 0;
    std::vector<int64_t> delays;
    double cpu_ms = 0, wall_ms = 0;
    for (int i = 0; i < kRounds; ++i) {
      // Both ranks start the round together (a small exchange), then rank 0 idles.
      Transfer sync[2] = {Transfer::Send(peer, &word, sizeof(word)), Transfer::Recv(peer, &word, sizeof(word))};
      Status s = Exchange(sync, 2, me.Options(10000));
      if (!s.ok()) return "sync: " + s.ToString();
      if (me.rank == 0) {
        usleep(kIdleMs * 1000);
        word = static_cast<uint64_t>(NowMicros());  // the send time travels in the message
        Transfer t = Transfer::Send(peer, &word, sizeof(word));
        s = Exchange(&t, 1, me.Options(10000));
      } else {
        timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        const auto start = Clock::now();
        Transfer t = Transfer::Recv(peer, &word, sizeof(word));
        s = Exchange(&t, 1, me.Options(10000));
        delays.push_back(NowMicros() - static_cast<int64_t>(word));
        wall_ms += MsSince(start);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        cpu_ms += (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
      }
      if (!s.ok()) return "round " + std::to_string(i) + ": " + s.ToString();
    }
    if (me.rank == 1) {
      std::sort(delays.begin(), delays.end());
      std::fprintf(stderr, "UCX_TLS=%s idle wait: %.0f ms CPU in %.0f ms waiting; wake-up after the send %lld us median\n",
                   GetParam().tls ? GetParam().tls : "(default)", cpu_ms, wall_ms,
                   static_cast<long long>(delays[delays.size() / 2]));
      if (cpu_ms > 0.25 * wall_ms) {
        f += "used " + std::to_string(cpu_ms) + " ms of CPU in " + std::to_string(wall_ms) + " ms idle\n";
      }
      // Sleeping in the engine's 20 ms slices alone would give ~10 ms.
      const int64_t median = delays[delays.size() / 2];
      if (median > 5000) f += "woke " + std::to_string(median) + " us after the send\n";
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

// 2-rank bandwidth of 64 MiB messages (one direction, with an 8-byte acknowledgement
// per message): printed for comparison with ucx_perftest -t tag_bw. For measuring,
// UCX_TEST_TLS replaces the transports, UCX_TEST_CHUNK_BYTES and
// UCX_TEST_CHUNKS_IN_FLIGHT the options, UCX_TEST_SPIN_US the engine's spin (50 us).
TEST_P(UcxTransportTest, Bandwidth64MiB) {
  constexpr size_t kLen = 64u << 20;
  constexpr int kIters = 6;
  const char* chunk_env = std::getenv("UCX_TEST_CHUNK_BYTES");
  const char* flight_env = std::getenv("UCX_TEST_CHUNKS_IN_FLIGHT");
  RunConfig cfg = Config(2, chunk_env ? std::atoll(chunk_env) : UcxTransport::Options().chunk_bytes,
                         flight_env ? std::atoll(flight_env) : UcxTransport::Options().chunks_in_flight);
  if (std::getenv("UCX_TEST_TLS") != nullptr) cfg.tls = std::getenv("UCX_TEST_TLS");
  auto out = RunRanks(cfg, [&](const Rank& me) {
    std::string f;
    Link* peer = me.Get(1 - me.rank, &f);
    if (peer == nullptr) return f;
    std::vector<uint8_t> buf(kLen, static_cast<uint8_t>(me.rank));
    uint64_t ack = 0;
    std::vector<double> gbps;
    for (int i = 0; i < kIters; ++i) {
      const auto start = Clock::now();
      Transfer t[2];
      if (me.rank == 0) {
        t[0] = Transfer::Send(peer, buf.data(), kLen);
        t[1] = Transfer::Recv(peer, &ack, sizeof(ack));
      } else {
        t[0] = Transfer::Recv(peer, buf.data(), kLen);
        t[1] = Transfer::Send(peer, &ack, sizeof(ack));
      }
      Status s = Exchange(t, 2, me.Options(30000));
      if (!s.ok()) return "iteration " + std::to_string(i) + ": " + s.ToString();
      if (i > 0) gbps.push_back(kLen / (MsSince(start) * 1e6));  // the first one warms up
    }
    if (me.rank == 0) {
      std::sort(gbps.begin(), gbps.end());
      std::fprintf(stderr, "UCX_TLS=%s%s chunk %lld x %lld in flight: 64 MiB at %.2f GB/s median, %.2f best\n",
                   cfg.tls ? cfg.tls : "(default)", cfg.options.eager ? " eager" : "",
                   static_cast<long long>(cfg.options.chunk_bytes),
                   static_cast<long long>(cfg.options.chunks_in_flight), gbps[gbps.size() / 2], gbps.back());
    }
    return f;
  });
  EXPECT_EQ(Failures(out), "");
}

INSTANTIATE_TEST_SUITE_P(Tcp, UcxTransportTest, ::testing::Values(UcxPath{"tcp,self", true, nullptr}));
INSTANTIATE_TEST_SUITE_P(SharedMemory, UcxTransportTest, ::testing::Values(UcxPath{"posix,sysv,cma,self", true, nullptr}));
INSTANTIATE_TEST_SUITE_P(UcxDefault, UcxTransportTest, ::testing::Values(UcxPath{nullptr, true, nullptr}));
// UCX's rendezvous for every chunk of 16 KiB and more: the tests' chunks are 64 KiB.
INSTANTIATE_TEST_SUITE_P(Rendezvous, UcxTransportTest, ::testing::Values(UcxPath{nullptr, false, "16k"}));

}  // namespace
}  // namespace tessera
