#include "bootstrap/rendezvous.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/random.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace tessera {
namespace {

constexpr char kIdMagic[8] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', '1'};
constexpr uint64_t kHelloMagic = 0x7465737365726131ull;  // "tessera1"

struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  RankInfo info;
};
static_assert(sizeof(Hello) == kJoinRequestBytes, "the request's size is part of the wire");

struct Reply {
  int32_t code;  // Code
  int32_t nranks;
  char message[512];
};
static_assert(sizeof(Reply) == kJoinReplyBytes, "the answer's size is part of the wire");

std::string MissingRanks(const std::vector<Socket>& joined) {
  std::string out;
  int listed = 0;
  for (size_t r = 0; r < joined.size(); ++r) {
    if (joined[r].valid()) continue;
    if (listed++ == 16) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out;
}

// The agreed settings as lines, at most the bytes the struct holds.
std::vector<std::string> AgreedLines(const RankInfo& info) {
  const std::string text(info.agreed, std::min<size_t>(info.agreed_len, sizeof(info.agreed)));
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::string SettingMismatch(const RankInfo& a, const RankInfo& b) {
  const std::vector<std::string> x = AgreedLines(a), y = AgreedLines(b);
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    if (i < x.size() && i < y.size() && x[i] == y[i]) continue;
    const std::string& line = i < x.size() ? x[i] : y[i];
    return line.substr(0, line.find('='));
  }
  return "";
}

namespace {

// Services running in this process, by secret. A rank whose process hosts the service
// must not return (and perhaps exit) before the service has answered every rank.
struct RunningServices {
  std::mutex mu;
  std::condition_variable changed;
  std::map<uint64_t, int> running;  // secret -> count
};
RunningServices& Services() {
  static auto* services = new RunningServices();
  return *services;
}

void WaitForLocalService(uint64_t secret, const Deadline& deadline) {
  // (Waits only in the process that runs the service for this secret.)
  RunningServices& s = Services();
  std::unique_lock<std::mutex> lock(s.mu);
  s.changed.wait_until(lock, deadline.when(), [&] { return s.running.count(secret) == 0; });
}

// The service's state for one communicator being formed.
class RendezvousService {
 public:
  RendezvousService(Socket listener, uint64_t secret, int64_t timeout_ms)
      : listener_(std::move(listener)), secret_(secret), deadline_(Deadline::AfterMs(timeout_ms)),
        timeout_ms_(timeout_ms) {}

  void Run() {
    while (!deadline_.Expired()) {
      WaitForInput();
      AcceptNew();
      ReadArriving();
      if (failure_.ok() && nranks_ > 0 && joined_count_ == nranks_) {
        SendTable();
        return;
      }
    }
    if (failure_.ok()) {
      if (nranks_ <= 0) return;  // nobody came
      failure_ = TimeoutError("rendezvous timed out after " + std::to_string(timeout_ms_) + " ms: " +
                              std::to_string(joined_count_) + " of " + std::to_string(nranks_) +
                              " ranks joined; missing rank(s) " + MissingRanks(joined_) + " [culprit: " +
                              (nranks_ - joined_count_ == 1 ? "rank " : "ranks ") + MissingRanks(joined_) + "]");
    }
    FailAll();
  }

 private:
  // A connection whose join request is still arriving. Requests are read as their bytes
  // come, from every connection at once, so a client that sends half a request, or
  // nothing, delays no one; it is dropped after kArrivalMs.
  struct Arriving {
    Socket socket;
    std::string bytes;
    Deadline deadline;
  };
  static constexpr int64_t kArrivalMs = 5000;
  static constexpr size_t kMaxArriving = 256;

  void WaitForInput() {
    std::vector<pollfd> fds{pollfd{listener_.fd(), POLLIN, 0}};
    for (const Arriving& a : arriving_) fds.push_back(pollfd{a.socket.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), std::min(deadline_.RemainingMs(), 100));
  }

  void AcceptNew() {
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      Socket client(fd);
      if (arriving_.size() >= kMaxArriving) continue;  // closed: too many half-open
      arriving_.push_back(
          Arriving{std::move(client), std::string(), Deadline::AfterMs(std::min<int64_t>(kArrivalMs, deadline_.RemainingMs()))});
    }
  }

  void ReadArriving() {
    for (size_t i = 0; i < arriving_.size();) {
      Arriving& a = arriving_[i];
      std::string chunk(kJoinRequestBytes - a.bytes.size(), '\0');
      size_t moved = 0;
      const bool alive = RecvSome(a.socket.fd(), &chunk[0], chunk.size(), &moved).ok();
      a.bytes.append(chunk, 0, moved);
      if (alive && a.bytes.size() < kJoinRequestBytes && !a.deadline.Expired()) {
        ++i;
        continue;
      }
      Arriving done = std::move(a);
      arriving_.erase(arriving_.begin() + static_cast<std::ptrdiff_t>(i));
      if (done.bytes.size() == kJoinRequestBytes) Handle(std::move(done.socket), done.bytes);  // else: not a rank
    }
  }

  void Handle(Socket client, const std::string& bytes) {
    Deadline hello_deadline = Deadline::AfterMs(1000);  // the reply is small: it fits the socket's buffer
    JoinRequest hello;
    const Status decoded = DecodeJoinRequest(bytes, secret_, &hello);
    if (decoded.code() == Code::kInvalidArgument || !failure_.ok()) {
      // Not of this communicator (refused alone), or it has already failed.
      const std::string r = EncodeJoinReply(decoded.code() == Code::kInvalidArgument ? decoded : failure_, 0);
      SendAll(client, r.data(), r.size(), hello_deadline);
      return;
    }
    failure_ = decoded.ok() ? Admit(hello) : decoded;
    if (!failure_.ok()) {
      const std::string r = EncodeJoinReply(failure_, 0);
      SendAll(client, r.data(), r.size(), hello_deadline);
      FailAll();
      return;
    }
    joined_[hello.rank] = std::move(client);
    infos_[hello.rank] = hello.info;
    ++joined_count_;
  }

  // Checks a well-formed request against those before it: OK when the rank may join.
  Status Admit(const JoinRequest& hello) {
    const int rank = hello.rank;
    if (nranks_ == 0) {
      nranks_ = hello.nranks;
      first_rank_ = rank;
      first_info_ = hello.info;
      joined_.resize(nranks_);
      infos_.resize(nranks_);
    }
    if (hello.nranks != nranks_) {
      return InvalidUsage("nranks differs between ranks: rank " + std::to_string(rank) + " says " +
                          std::to_string(hello.nranks) + ", rank " + std::to_string(first_rank_) + " says " +
                          std::to_string(nranks_));
    }
    if (joined_[rank].valid()) return InvalidUsage("two processes joined as rank " + std::to_string(rank));
    if (std::string name = SettingMismatch(first_info_, hello.info); !name.empty()) {
      return InvalidUsage(name + " differs between rank " + std::to_string(first_rank_) + " and rank " +
                          std::to_string(rank) + "; it must be the same on every rank");
    }
    return Status::Ok();
  }

  void SendTable() {
    const std::string r = EncodeJoinReply(Status::Ok(), nranks_);
    for (Socket& s : joined_) {
      Deadline d = Deadline::AfterMs(std::min<int64_t>(5000, std::max(deadline_.RemainingMs(), 1000)));
      if (SendAll(s, r.data(), r.size(), d).ok()) {
        SendAll(s, infos_.data(), infos_.size() * sizeof(RankInfo), d);
      }
      s.Close();
    }
  }

  void FailAll() {
    const std::string r = EncodeJoinReply(failure_, 0);
    for (Socket& s : joined_) {
      if (!s.valid()) continue;
      SendAll(s, r.data(), r.size(), Deadline::AfterMs(1000));
      s.Close();
    }
  }

  Socket listener_;
  const uint64_t secret_;
  const Deadline deadline_;
  const int64_t timeout_ms_;
  int nranks_ = 0;
  int first_rank_ = 0;
  RankInfo first_info_;
  int joined_count_ = 0;
  std::vector<Socket> joined_;
  std::vector<RankInfo> infos_;
  std::vector<Arriving> arriving_;
  Status failure_;
};

}  // namespace

void EncodeUniqueId(const UniqueIdData& id, char out[kUniqueIdBytes]) {
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, kIdMagic, sizeof(kIdMagic));
  std::memcpy(out + 8, &id.root.ip_be, sizeof(id.root.ip_be));
  std::memcpy(out + 12, &id.root.port_be, sizeof(id.root.port_be));
  std::memcpy(out + 16, &id.secret, sizeof(id.secret));
  std::memcpy(out + 24, &id.root_pid, sizeof(id.root_pid));
  std::memcpy(out + 28, &id.root_rank, sizeof(id.root_rank));
  std::memcpy(out + 32, id.root_host.data(), std::min<size_t>(id.root_host.size(), kUniqueIdBytes - 33));
}

Status AddAgreed(const std::string& lines, RankInfo* info) {
  if (info->agreed_len + lines.size() > sizeof(info->agreed)) {
    return InvalidArgument("agreed settings exceed " + std::to_string(sizeof(info->agreed)) + " bytes");
  }
  std::memcpy(info->agreed + info->agreed_len, lines.data(), lines.size());
  info->agreed_len += static_cast<uint32_t>(lines.size());
  return Status::Ok();
}

Status AddCard(const std::string& name, const std::string& bytes, RankInfo* info) {
  const size_t record = 1 + name.size() + 2 + bytes.size();
  if (name.size() > 255 || bytes.size() > 65535 || info->cards_len + record > sizeof(info->cards)) {
    return InvalidArgument("the " + name + " transport's card of " + std::to_string(bytes.size()) +
                           " bytes does not fit the rendezvous' " + std::to_string(sizeof(info->cards)) +
                           " bytes beside the others' " + std::to_string(info->cards_len));
  }
  char* p = info->cards + info->cards_len;
  *p++ = static_cast<char>(name.size());
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = static_cast<char>(bytes.size() & 0xff);
  *p++ = static_cast<char>(bytes.size() >> 8);
  std::memcpy(p, bytes.data(), bytes.size());
  info->cards_len += static_cast<uint32_t>(record);
  return Status::Ok();
}

Status FindCard(const RankInfo& info, const std::string& name, std::string* bytes) {
  bytes->clear();
  const size_t end = std::min<size_t>(info.cards_len, sizeof(info.cards));
  const unsigned char* c = reinterpret_cast<const unsigned char*>(info.cards);
  for (size_t at = 0; at < end;) {
    const size_t name_len = c[at];
    if (at + 1 + name_len + 2 > end) return InvalidArgument("malformed transport cards (a name overruns)");
    const std::string card_name(info.cards + at + 1, name_len);
    const size_t len_at = at + 1 + name_len;
    const size_t len = c[len_at] | (static_cast<size_t>(c[len_at + 1]) << 8);
    if (len_at + 2 + len > end) return InvalidArgument("malformed transport cards (the " + card_name + " card overruns)");
    if (card_name == name) {
      bytes->assign(info.cards + len_at + 2, len);
      return Status::Ok();
    }
    at = len_at + 2 + len;
  }
  return Status::Ok();
}

std::string EncodeJoinRequest(uint64_t secret, const JoinRequest& request) {
  Hello hello{};
  hello.magic = kHelloMagic;
  hello.secret = secret;
  hello.rank = request.rank;
  hello.nranks = request.nranks;
  hello.info = request.info;
  return std::string(reinterpret_cast<const char*>(&hello), sizeof(hello));
}

Status DecodeJoinRequest(const std::string& bytes, uint64_t secret, JoinRequest* out) {
  Hello hello;
  if (bytes.size() != sizeof(hello)) return InvalidArgument("a join request of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&hello, bytes.data(), sizeof(hello));
  if (hello.magic != kHelloMagic || hello.secret != secret) {
    return InvalidArgument("the unique id's secret does not match this communicator's (stale or foreign id)");
  }
  if (hello.nranks < 1 || hello.nranks > kMaxRendezvousRanks) {
    return InvalidUsage("rank " + std::to_string(hello.rank) + " says nranks is " + std::to_string(hello.nranks) +
                        ", outside [1, " + std::to_string(kMaxRendezvousRanks) + "]");
  }
  if (hello.rank < 0 || hello.rank >= hello.nranks) {
    return InvalidUsage("rank " + std::to_string(hello.rank) + " out of range for nranks " +
                        std::to_string(hello.nranks));
  }
  out->rank = hello.rank;
  out->nranks = hello.nranks;
  out->info = hello.info;
  return Status::Ok();
}

std::string EncodeJoinReply(const Status& status, int nranks) {
  Reply r;
  std::memset(&r, 0, sizeof(r));
  r.code = static_cast<int32_t>(status.code());
  r.nranks = nranks;
  std::strncpy(r.message, status.message().c_str(), sizeof(r.message) - 1);
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

Status DecodeJoinReply(const std::string& bytes, int nranks) {
  Reply r;
  if (bytes.size() != sizeof(r)) return InternalError("an answer of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&r, bytes.data(), sizeof(r));
  if (r.code != 0) return FailureFromWire(r.code, r.message, sizeof(r.message));
  if (r.nranks != nranks) return InternalError("table of the wrong size");
  return Status::Ok();
}

Status DecodeUniqueId(const char in[kUniqueIdBytes], UniqueIdData* out) {
  if (std::memcmp(in, kIdMagic, sizeof(kIdMagic)) != 0) {
    return InvalidArgument("commId is not a tessera unique id (bad magic); create it with tesseraGetUniqueId");
  }
  std::memcpy(&out->root.ip_be, in + 8, sizeof(out->root.ip_be));
  std::memcpy(&out->root.port_be, in + 12, sizeof(out->root.port_be));
  std::memcpy(&out->secret, in + 16, sizeof(out->secret));
  std::memcpy(&out->root_pid, in + 24, sizeof(out->root_pid));
  std::memcpy(&out->root_rank, in + 28, sizeof(out->root_rank));
  out->root_host.assign(in + 32, strnlen(in + 32, kUniqueIdBytes - 33));
  if (out->root.port() == 0) return InvalidArgument("commId has no rendezvous port");
  return Status::Ok();
}

uint64_t RandomSecret() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(NowMicros()) * 0x9E3779B97F4A7C15ull;
  }
  return v;
}

Status StartRendezvous(const std::string& listen_ip, int port, uint64_t secret, int64_t timeout_ms,
                       SocketAddress* bound) {
  Socket listener;
  TESSERA_RETURN_IF_ERROR(Listen(listen_ip, port, &listener, bound).Annotate("rendezvous service"));
  auto service = std::make_shared<RendezvousService>(std::move(listener), secret, timeout_ms);
  {
    std::lock_guard<std::mutex> lock(Services().mu);
    ++Services().running[secret];
  }
  std::thread([service, secret] {
    service->Run();
    RunningServices& s = Services();
    std::lock_guard<std::mutex> lock(s.mu);
    if (--s.running[secret] == 0) s.running.erase(secret);
    s.changed.notify_all();
  }).detach();
  return Status::Ok();
}

static Status JoinRendezvousOnce(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                                 int64_t timeout_ms, std::vector<RankInfo>* all);

Status JoinRendezvous(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine, int64_t timeout_ms,
                      std::vector<RankInfo>* all) {
  // Whatever the outcome, a process hosting this rendezvous waits (a little past the
  // deadline, so a service telling everyone of a timeout can finish) until the service
  // has answered every rank: returning might end the process and cut the others off.
  struct WaitOnReturn {
    uint64_t secret;
    int64_t timeout_ms;
    ~WaitOnReturn() { WaitForLocalService(secret, Deadline::AfterMs(std::min<int64_t>(timeout_ms, 5000))); }
  } wait_on_return{id.secret, timeout_ms};
  return JoinRendezvousOnce(id, rank, nranks, mine, timeout_ms, all);
}

// The rendezvous service is gone or stopped: it lives in the process that created the
// id, so that process is the culprit, by rank where the id knows it.
static std::string RendezvousHostBlamed(const UniqueIdData& id) {
  std::string who = "the process serving the rendezvous";
  if (id.root_pid != 0) who += " (pid " + std::to_string(id.root_pid) + " on host " + id.root_host + ")";
  if (id.root_rank >= 0) who = "rank " + std::to_string(id.root_rank) + ", " + who + ",";
  const std::string tag = id.root_rank >= 0 ? "[culprit: rank " + std::to_string(id.root_rank) + "]"
                          : id.root_pid != 0 ? "[culprit: rendezvous host pid " + std::to_string(id.root_pid) + "]"
                                             : "[culprit: rendezvous host]";
  return who + " is gone or stopped (it created the unique id) " + tag;
}

static Status JoinRendezvousOnce(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                                 int64_t timeout_ms, std::vector<RankInfo>* all) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms);
  const std::string where = "rendezvous at " + id.root.ToString() + " (rank " + std::to_string(rank) + ")";
  Socket s;
  Status connected = Connect(id.root, deadline, &s);
  if (!connected.ok()) return connected.Annotate(where + ": " + RendezvousHostBlamed(id));
  JoinRequest request;
  request.rank = rank;
  request.nranks = nranks;
  request.info = mine;
  const std::string hello = EncodeJoinRequest(id.secret, request);
  TESSERA_RETURN_IF_ERROR(SendAll(s, hello.data(), hello.size(), deadline).Annotate(where));
  std::string reply(kJoinReplyBytes, '\0');
  Status st = RecvAll(s, &reply[0], reply.size(), deadline);
  if (st.code() == Code::kRemoteError) {
    return RemoteError(where + ": the service closed the connection: " + RendezvousHostBlamed(id));
  }
  // The service answers by its deadline, which came before ours: it has stopped.
  if (st.code() == Code::kTimeout) return st.Annotate(where + ": no table and no answer: " + RendezvousHostBlamed(id));
  TESSERA_RETURN_IF_ERROR(st.Annotate(where + ": waiting for all ranks to join"));
  TESSERA_RETURN_IF_ERROR(DecodeJoinReply(reply, nranks).Annotate(where));
  all->resize(nranks);
  return RecvAll(s, all->data(), nranks * sizeof(RankInfo), deadline).Annotate(where);
}

}  // namespace tessera
