#include "diagnosis/watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace tessera {
namespace {

constexpr uint64_t kRequestMagic = 0x7465737377617463ull;  // "tesswatc"
constexpr uint64_t kReplyMagic = 0x7465737377617472ull;    // "tesswatr"
constexpr uint64_t kTimingsMagic = 0x7465737374696d65ull;  // "tesstime"
// How long one client may take to send its request or read the answer.
constexpr int kClientMs = 200;

struct RequestWire {
  uint64_t magic;
  uint64_t secret;
  uint32_t kind;
  int32_t from_rank;
};

static_assert(sizeof(RequestWire) == kWatchRequestBytes, "the request's size is part of the wire");

struct ReplyHeader {
  uint64_t magic;
  int32_t rank;
  int32_t pid;
  uint8_t state;
  uint8_t reserved[3];
  uint32_t last_done_seq;
  CallStamp call;
  int64_t in_state_us;
  int64_t since_progress_us;
  uint32_t waiting;
  uint32_t culprits;
  uint32_t verdict_bytes;
  uint32_t reserved2;
};

struct VerdictWire {
  int32_t rank;
  uint32_t window_calls;
  uint32_t last_calls;
  uint32_t waiters;
  int64_t median_lag_us;
  uint32_t wait_permille;
  uint32_t cost_permille;
};
static_assert(sizeof(VerdictWire) + 4 * kMaxVerdictWaiters == kMaxStragglerVerdictBytes, "the verdict's bound");

struct TimingsHeader {
  uint64_t magic;
  int32_t rank;
  uint32_t count;
  uint32_t last_seq;
  uint32_t covered_from;
};

struct TimingWire {
  uint32_t seq;
  uint32_t stalled_us;
  int32_t waited_on;
  uint8_t kind;
  uint8_t reserved[3];
  int64_t began_us;
};
static_assert(sizeof(TimingsHeader) + sizeof(TimingWire) * Activity::kTimingSlots == kMaxTimingsReplyBytes,
              "the timings reply's bound");

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendRanks(std::string* out, const std::vector<int32_t>& ranks) {
  for (size_t i = 0; i < ranks.size() && i < kMaxWatchPeers; ++i) Append(out, ranks[i]);
}

// Reads `count` ranks written by AppendRanks at *p (any alignment) and moves *p past
// them. An empty vector's data() may be null, which memcpy must not get even for 0 bytes
// (UBSan's nonnull-attribute check caught it when a rank waited on nobody).
void ReadRanks(const char** p, uint32_t count, std::vector<int32_t>* ranks) {
  ranks->resize(count);
  if (count > 0) std::memcpy(ranks->data(), *p, sizeof(int32_t) * size_t{count});
  *p += sizeof(int32_t) * size_t{count};
}

}  // namespace

std::string EncodeSnapshot(int rank, int pid, const ActivitySnapshot& s) {
  ReplyHeader h{};
  h.magic = kReplyMagic;
  h.rank = rank;
  h.pid = pid;
  h.state = static_cast<uint8_t>(s.state);
  h.last_done_seq = s.last_done_seq;
  h.call = s.call;
  h.in_state_us = s.in_state_us;
  h.since_progress_us = s.since_progress_us;
  h.waiting = static_cast<uint32_t>(std::min(s.waiting_on.size(), kMaxWatchPeers));
  h.culprits = static_cast<uint32_t>(std::min(s.culprits.size(), kMaxWatchPeers));
  h.verdict_bytes = static_cast<uint32_t>(std::min(s.verdict.size(), kMaxVerdictBytes));
  std::string out;
  Append(&out, h);
  AppendRanks(&out, s.waiting_on);
  AppendRanks(&out, s.culprits);
  out.append(s.verdict, 0, h.verdict_bytes);
  return out;
}

Status DecodeSnapshot(const std::string& bytes, int* rank, int* pid, ActivitySnapshot* s) {
  ReplyHeader h;
  if (bytes.size() < sizeof(h)) return InvalidArgument("watch reply of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kReplyMagic) return InvalidArgument("watch reply without its magic");
  if (h.state > static_cast<uint8_t>(ActivitySnapshot::State::kBroken)) return InvalidArgument("watch reply: bad state");
  if (h.waiting > kMaxWatchPeers || h.culprits > kMaxWatchPeers || h.verdict_bytes > kMaxVerdictBytes) {
    return InvalidArgument("watch reply: lengths out of range");
  }
  const size_t want = sizeof(h) + 4 * (size_t{h.waiting} + h.culprits) + h.verdict_bytes;
  if (bytes.size() != want) {
    return InvalidArgument("watch reply of " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(want));
  }
  *rank = h.rank;
  *pid = h.pid;
  s->state = static_cast<ActivitySnapshot::State>(h.state);
  s->last_done_seq = h.last_done_seq;
  s->call = h.call;
  s->in_state_us = h.in_state_us;
  s->since_progress_us = h.since_progress_us;
  const char* p = bytes.data() + sizeof(h);
  ReadRanks(&p, h.waiting, &s->waiting_on);  // (also found by tests/fuzz:watch_fuzz)
  ReadRanks(&p, h.culprits, &s->culprits);
  s->verdict.assign(p, h.verdict_bytes);
  return Status::Ok();
}

std::string EncodeStragglerVerdict(const StragglerVerdict& v) {
  VerdictWire w{v.rank,           v.window_calls,    v.last_calls,
                static_cast<uint32_t>(std::min(v.waiters.size(), kMaxVerdictWaiters)),
                v.median_lag_us,  v.wait_permille,   v.cost_permille};
  std::string out;
  Append(&out, w);
  for (uint32_t i = 0; i < w.waiters; ++i) Append(&out, v.waiters[i]);
  return out;
}

Status DecodeStragglerVerdict(const std::string& bytes, int nranks, StragglerVerdict* v) {
  VerdictWire w;
  if (bytes.size() < sizeof(w)) return InvalidArgument("a straggler verdict of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&w, bytes.data(), sizeof(w));
  if (w.waiters > kMaxVerdictWaiters || bytes.size() != sizeof(w) + 4 * size_t{w.waiters}) {
    return InvalidArgument("a straggler verdict of " + std::to_string(bytes.size()) + " bytes with " +
                           std::to_string(w.waiters) + " waiters");
  }
  if (w.rank < -1 || w.rank >= nranks || w.last_calls > w.window_calls || w.median_lag_us < 0 ||
      w.wait_permille > 1000 || w.cost_permille > 1000) {
    return InvalidArgument("a straggler verdict out of range");
  }
  StragglerVerdict out;
  out.rank = w.rank;
  out.window_calls = w.window_calls;
  out.last_calls = w.last_calls;
  out.median_lag_us = w.median_lag_us;
  out.wait_permille = w.wait_permille;
  out.cost_permille = w.cost_permille;
  const char* p = bytes.data() + sizeof(w);
  ReadRanks(&p, w.waiters, &out.waiters);
  for (int32_t r : out.waiters) {
    if (r < 0 || r >= nranks) return InvalidArgument("a straggler verdict naming rank " + std::to_string(r));
  }
  *v = std::move(out);
  return Status::Ok();
}

std::string EncodeTimings(int rank, const RankTimings& timings) {
  const size_t n = std::min(timings.stalls.size(), Activity::kTimingSlots);
  std::string out;
  Append(&out, TimingsHeader{kTimingsMagic, rank, static_cast<uint32_t>(n), timings.last_seq, timings.covered_from});
  for (size_t i = 0; i < n; ++i) {
    const CallTiming& t = timings.stalls[i];
    Append(&out, TimingWire{t.seq, t.stalled_us, t.waited_on, t.kind, {0, 0, 0}, t.began_us});
  }
  return out;
}

Status DecodeTimings(const std::string& bytes, int* rank, RankTimings* timings) {
  TimingsHeader h;
  if (bytes.size() < sizeof(h)) return InvalidArgument("timings reply of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kTimingsMagic) return InvalidArgument("timings reply without its magic");
  if (h.count > Activity::kTimingSlots || bytes.size() != sizeof(h) + sizeof(TimingWire) * size_t{h.count}) {
    return InvalidArgument("timings reply of " + std::to_string(bytes.size()) + " bytes for " +
                           std::to_string(h.count) + " calls");
  }
  if (h.covered_from == 0) return InvalidArgument("timings reply covering calls from 0");
  *rank = h.rank;
  timings->last_seq = h.last_seq;
  timings->covered_from = h.covered_from;
  timings->stalls.resize(h.count);
  for (uint32_t i = 0; i < h.count; ++i) {
    TimingWire w;
    std::memcpy(&w, bytes.data() + sizeof(h) + i * sizeof(w), sizeof(w));
    timings->stalls[i] = CallTiming{w.seq, w.kind, w.waited_on, w.stalled_us, w.began_us};
  }
  return Status::Ok();
}

// --- The dump signal ------------------------------------------------------------------

namespace {

std::atomic<uint64_t> g_dump_signals{0};  // bumped by the handler (lock-free, signal-safe)
std::mutex g_signal_mu;
int g_signal = 0;  // the signal installed, 0 = none

void OnDumpSignal(int) { g_dump_signals.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

Status InstallDumpSignal(int signo) {
  std::lock_guard<std::mutex> lock(g_signal_mu);
  if (g_signal == signo) return Status::Ok();
  if (g_signal != 0) {
    return InvalidUsage("the flight-record dump signal is already " + std::to_string(g_signal) + ", not " +
                        std::to_string(signo));
  }
  struct sigaction action {};
  action.sa_handler = OnDumpSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (signo <= 0 || signo == SIGKILL || signo == SIGSTOP || sigaction(signo, &action, nullptr) != 0) {
    return InvalidArgument("signal " + std::to_string(signo) + " cannot be caught for flight-record dumps");
  }
  g_signal = signo;
  return Status::Ok();
}

// --- The service ----------------------------------------------------------------------

Status WatchService::Start(const std::string& ip, uint64_t secret, int rank, int nranks, Activity* activity,
                           std::function<void()> dump, bool dump_on_signal, std::unique_ptr<WatchService>* out) {
  std::unique_ptr<WatchService> w(new WatchService());
  TESSERA_RETURN_IF_ERROR(Listen(ip, 0, &w->listener_, &w->address_).Annotate("watch service"));
  w->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->wake_fd_ < 0) return ErrnoError("watch service: eventfd", errno);
  w->secret_ = secret;
  w->rank_ = rank;
  w->nranks_ = nranks;
  w->pid_ = static_cast<int>(getpid());
  w->activity_ = activity;
  w->dump_ = std::move(dump);
  w->dump_on_signal_ = dump_on_signal;
  w->signals_seen_ = g_dump_signals.load();  // before the thread: a signal from now on counts
  w->thread_ = std::thread([raw = w.get()] { raw->Serve(); });
  *out = std::move(w);
  return Status::Ok();
}

WatchService::~WatchService() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

void WatchService::Serve() {
  for (;;) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, dump_on_signal_ ? kSignalCheckMs : -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    const uint64_t signals = g_dump_signals.load(std::memory_order_relaxed);
    if (dump_on_signal_ && signals != signals_seen_ && dump_) dump_();
    signals_seen_ = signals;
    if (fds[0].revents == 0) continue;
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      Answer(Socket(fd));
    }
  }
}

void WatchService::SetOffer(const std::string& bytes) {
  std::lock_guard<std::mutex> lock(offer_mu_);
  offer_ = bytes.substr(0, kMaxOfferBytes);
}

std::string EncodeWatchRequest(uint64_t secret, WatchRequest kind, int from_rank) {
  const RequestWire req{kRequestMagic, secret, static_cast<uint32_t>(kind), from_rank};
  return std::string(reinterpret_cast<const char*>(&req), sizeof(req));
}

Status DecodeWatchRequest(const std::string& bytes, uint64_t secret, WatchRequest* kind) {
  RequestWire req;
  if (bytes.size() != sizeof(req)) return InvalidArgument("a watch request of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&req, bytes.data(), sizeof(req));
  if (req.magic != kRequestMagic || req.secret != secret) return InvalidArgument("not a watch request of this job");
  if (req.kind != static_cast<uint32_t>(WatchRequest::kStatus) &&
      req.kind != static_cast<uint32_t>(WatchRequest::kStatusAndDump) &&
      req.kind != static_cast<uint32_t>(WatchRequest::kOffer) &&
      req.kind != static_cast<uint32_t>(WatchRequest::kTimings)) {
    return InvalidArgument("watch request of unknown kind " + std::to_string(req.kind));
  }
  *kind = static_cast<WatchRequest>(req.kind);
  return Status::Ok();
}

void WatchService::Answer(Socket client) {
  const Deadline deadline = Deadline::AfterMs(kClientMs);
  std::string bytes(kWatchRequestBytes, '\0');
  if (!RecvAll(client, &bytes[0], bytes.size(), deadline).ok()) return;
  WatchRequest kind;
  if (!DecodeWatchRequest(bytes, secret_, &kind).ok()) return;
  std::string reply;
  if (kind == WatchRequest::kOffer) {
    std::lock_guard<std::mutex> lock(offer_mu_);
    reply = offer_;
  } else if (kind == WatchRequest::kTimings) {
    if (!AnswerTimings(client, deadline, &reply)) return;
  } else {
    if (kind == WatchRequest::kStatusAndDump && dump_) dump_();
    reply = EncodeSnapshot(rank_, pid_, activity_->Snapshot());
  }
  const uint32_t length = static_cast<uint32_t>(reply.size());
  if (SendAll(client, &length, sizeof(length), deadline).ok()) SendAll(client, reply.data(), reply.size(), deadline);
}

bool WatchService::AnswerTimings(const Socket& client, const Deadline& deadline, std::string* reply) {
  uint32_t length = 0;
  if (!RecvAll(client, &length, sizeof(length), deadline).ok() || length > kMaxStragglerVerdictBytes) return false;
  std::string bytes(length, '\0');
  if (!RecvAll(client, &bytes[0], length, deadline).ok()) return false;
  StragglerVerdict verdict;
  if (!DecodeStragglerVerdict(bytes, nranks_, &verdict).ok()) return false;
  activity_->SetStraggler(verdict);
  *reply = EncodeTimings(rank_, activity_->Timings());
  return true;
}

// --- The client -----------------------------------------------------------------------

Status AskOffer(const SocketAddress& peer, uint64_t secret, int my_rank, const Deadline& deadline, std::string* offer) {
  const std::string where = "asking rank's watch service at " + peer.ToString() + " for its offer";
  Socket s;
  TESSERA_RETURN_IF_ERROR(Connect(peer, deadline, &s, /*retry_refused=*/false).Annotate(where));
  const std::string req = EncodeWatchRequest(secret, WatchRequest::kOffer, my_rank);
  TESSERA_RETURN_IF_ERROR(SendAll(s, req.data(), req.size(), deadline).Annotate(where));
  uint32_t length = 0;
  TESSERA_RETURN_IF_ERROR(RecvAll(s, &length, sizeof(length), deadline).Annotate(where));
  if (length > kMaxOfferBytes) return InvalidArgument(where + ": an offer of " + std::to_string(length) + " bytes");
  offer->assign(length, '\0');
  return RecvAll(s, &(*offer)[0], length, deadline).Annotate(where);
}

const char* PeerAnswerName(PeerAnswer::Kind kind) {
  switch (kind) {
    case PeerAnswer::Kind::kAnswered: return "answered";
    case PeerAnswer::Kind::kRefused: return "refused";
    case PeerAnswer::Kind::kLocalError: return "local network error";
    case PeerAnswer::Kind::kSilent: return "silent";
    case PeerAnswer::Kind::kBadReply: return "bad reply";
  }
  return "unknown";
}

namespace {

// One question in flight.
struct Query {
  int peer = -1;
  Socket socket;
  enum class Step { kConnecting, kReceiving, kDone } step = Step::kConnecting;
  std::string in;  // the length word, then the reply
};

PeerAnswer::Kind KindOfErrno(int e) {
  switch (e) {
    case ECONNREFUSED: case ECONNRESET: case EPIPE: return PeerAnswer::Kind::kRefused;
    case ENETUNREACH: case ENETDOWN: case EPERM: case EACCES: return PeerAnswer::Kind::kLocalError;
    default: return PeerAnswer::Kind::kSilent;
  }
}

void Fail(Query* q, PeerAnswer* a, int e, const char* what) {
  a->kind = KindOfErrno(e);
  a->error = std::string(what) + ": " + std::strerror(e);
  q->step = Query::Step::kDone;
  q->socket.Close();
}

void StartQuery(const SocketAddress& to, Query* q, PeerAnswer* a) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(q, a, errno, "socket");
  q->socket = Socket(fd);
  const sockaddr_in addr = to.ToSockaddr();
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0 && errno != EINPROGRESS) {
    return Fail(q, a, errno, "connect");
  }
}

// The connection is writable: check it connected and send the request (small: one send).
void SendRequest(const std::string& request, Query* q, PeerAnswer* a) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(q->socket.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Fail(q, a, err, "connect");
  const ssize_t n = ::send(q->socket.fd(), request.data(), request.size(), MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(request.size())) return Fail(q, a, n < 0 ? errno : EPIPE, "send");
  q->step = Query::Step::kReceiving;
}

// Reads what has arrived; hands the whole reply to `decode` once it is in. Returns
// what `decode` did (true: go on asking).
bool ReadReply(size_t max_reply, const ReplyDecoder& decode, Query* q, PeerAnswer* a) {
  char buf[4096];
  const ssize_t n = ::recv(q->socket.fd(), buf, sizeof(buf), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (n <= 0) {
    Fail(q, a, n < 0 ? errno : ECONNRESET, "receive");
    return true;
  }
  q->in.append(buf, static_cast<size_t>(n));
  uint32_t length = 0;
  if (q->in.size() < sizeof(length)) return true;
  std::memcpy(&length, q->in.data(), sizeof(length));
  bool go_on = true;
  if (length > max_reply || q->in.size() > sizeof(length) + length) {
    a->kind = PeerAnswer::Kind::kBadReply;
    a->error = "watch reply too long";
  } else if (q->in.size() < sizeof(length) + length) {
    return true;
  } else {
    go_on = decode(q->peer, q->in.substr(sizeof(length)), a);
  }
  q->step = Query::Step::kDone;
  q->socket.Close();
  return go_on;
}

}  // namespace

void AskPeers(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, const std::string& request,
              size_t max_reply, const Deadline& deadline, const ReplyDecoder& decode, std::vector<PeerAnswer>* answers) {
  answers->assign(peers.size(), PeerAnswer());
  std::vector<Query> queries;
  for (size_t r = 0; r < peers.size(); ++r) {
    if (r < skip.size() && skip[r]) continue;
    queries.emplace_back();
    queries.back().peer = static_cast<int>(r);
    StartQuery(peers[r], &queries.back(), &(*answers)[r]);
  }
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Query*> open;
    for (Query& q : queries) {
      if (q.step == Query::Step::kDone) continue;
      fds.push_back(pollfd{q.socket.fd(), static_cast<short>(q.step == Query::Step::kConnecting ? POLLOUT : POLLIN), 0});
      open.push_back(&q);
    }
    if (open.empty() || deadline.Expired()) break;
    if (::poll(fds.data(), fds.size(), deadline.RemainingMs()) <= 0) continue;
    for (size_t i = 0; i < open.size(); ++i) {
      if (fds[i].revents == 0) continue;
      PeerAnswer* a = &(*answers)[open[i]->peer];
      if (open[i]->step == Query::Step::kConnecting) {
        SendRequest(request, open[i], a);
      } else if (!ReadReply(max_reply, decode, open[i], a)) {
        return;
      }
    }
  }
  for (Query& q : queries) {
    if (q.step != Query::Step::kDone) (*answers)[q.peer].error = "no answer by the deadline";
  }
}

void QueryPeers(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, uint64_t secret, int my_rank,
                WatchRequest request, const Deadline& deadline, bool stop_on_verdict, std::vector<PeerAnswer>* answers) {
  auto decode = [stop_on_verdict](int peer, const std::string& reply, PeerAnswer* a) {
    int rank = -1;
    const Status s = DecodeSnapshot(reply, &rank, &a->pid, &a->snapshot);
    a->kind = s.ok() && rank == peer ? PeerAnswer::Kind::kAnswered : PeerAnswer::Kind::kBadReply;
    a->error = s.ok() ? (rank == peer ? "" : "answered as rank " + std::to_string(rank)) : s.message();
    return !(stop_on_verdict && a->kind == PeerAnswer::Kind::kAnswered && !a->snapshot.verdict.empty());
  };
  AskPeers(peers, skip, EncodeWatchRequest(secret, request, my_rank),
           sizeof(ReplyHeader) + 8 * kMaxWatchPeers + kMaxVerdictBytes, deadline, decode, answers);
}

void QueryTimings(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, uint64_t secret,
                  int my_rank, const StragglerVerdict& verdict, const Deadline& deadline,
                  std::vector<PeerAnswer>* answers, std::vector<RankTimings>* timings) {
  timings->assign(peers.size(), RankTimings());
  auto decode = [timings](int peer, const std::string& reply, PeerAnswer* a) {
    int rank = -1;
    const Status s = DecodeTimings(reply, &rank, &(*timings)[peer]);
    a->kind = s.ok() && rank == peer ? PeerAnswer::Kind::kAnswered : PeerAnswer::Kind::kBadReply;
    a->error = s.ok() ? (rank == peer ? "" : "answered as rank " + std::to_string(rank)) : s.message();
    if (a->kind != PeerAnswer::Kind::kAnswered) (*timings)[peer] = RankTimings();
    return true;
  };
  const std::string v = EncodeStragglerVerdict(verdict);
  std::string request = EncodeWatchRequest(secret, WatchRequest::kTimings, my_rank);
  Append(&request, static_cast<uint32_t>(v.size()));
  request += v;
  AskPeers(peers, skip, request, kMaxTimingsReplyBytes, deadline, decode, answers);
}

}  // namespace tessera
