#include "bootstrap/rendezvous.h"

#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/process.h"
#include "topology/host_identity.h"

namespace tessera {
namespace {

template <typename T>
std::string AsBytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

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

// Connections whose request is still arriving. Requests are read as their bytes come,
// from every connection at once, so a client that sends half a request, or nothing,
// delays no one (unless kMaxArriving of them hold every place); it is dropped after
// kArrivalMs.
class Arrivals {
 public:
  struct Done {
    Socket socket;
    std::string bytes;
    size_t wanted;
  };
  // wanted(bytes so far): how many bytes the whole request has, as far as they tell.
  using Length = std::function<size_t(const std::string&)>;

  Arrivals(const Socket* listener, const Deadline* overall, Length wanted)
      : listener_(listener), overall_(overall), wanted_(std::move(wanted)) {}

  // Sleeps until a connection or bytes arrive (not on the listener while the list of
  // arrivals is full: those connections wait in the kernel's queue).
  void Wait() {
    std::vector<pollfd> fds;
    if (arriving_.size() < kMaxArriving) fds.push_back(pollfd{listener_->fd(), POLLIN, 0});
    for (const Arriving& a : arriving_) fds.push_back(pollfd{a.socket.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), std::min(overall_->RemainingMs(), 100));
  }

  // Accepts while there is room. A burst of joins (thousands of ranks at once) waits in
  // the listener's queue for its turn; none is refused.
  void Accept() {
    while (arriving_.size() < kMaxArriving) {
      const int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      arriving_.push_back(Arriving{Socket(fd), std::string(),
                                   Deadline::AfterMs(std::min<int64_t>(kArrivalMs, overall_->RemainingMs()))});
    }
  }

  // Reads what has come; returns the connections done with: whole (bytes.size() ==
  // wanted) or not (closed, or late).
  std::vector<Done> Read() {
    std::vector<Done> done;
    for (size_t i = 0; i < arriving_.size();) {
      Arriving& a = arriving_[i];
      bool alive = true;
      size_t wanted = wanted_(a.bytes);
      while (alive && a.bytes.size() < wanted) {
        std::string chunk(wanted - a.bytes.size(), '\0');
        size_t moved = 0;
        alive = RecvSome(a.socket.fd(), &chunk[0], chunk.size(), &moved).ok();
        a.bytes.append(chunk, 0, moved);
        if (moved == 0) break;
        wanted = wanted_(a.bytes);
      }
      if (alive && a.bytes.size() < wanted && !a.deadline.Expired()) {
        ++i;
        continue;
      }
      done.push_back(Done{std::move(a.socket), std::move(a.bytes), wanted});
      arriving_.erase(arriving_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return done;
  }

 private:
  struct Arriving {
    Socket socket;
    std::string bytes;
    Deadline deadline;
  };
  static constexpr int64_t kArrivalMs = 5000;
  static constexpr size_t kMaxArriving = 256;

  const Socket* listener_;
  const Deadline* overall_;
  Length wanted_;
  std::vector<Arriving> arriving_;
};

// How long one peer may take to take its answer and table (the answer is small and fits
// the socket's buffer; a table may not).
Deadline SendDeadline(const Deadline& overall) {
  return Deadline::AfterMs(std::min<int64_t>(5000, std::max(overall.RemainingMs(), 1000)));
}

// The table as it travels: its length (8 bytes), then its bytes.
std::string TableMessage(const std::string& table) {
  return AsBytes(static_cast<uint64_t>(table.size())) + table;
}

Status RecvTable(const Socket& s, int nranks, const Deadline& deadline, std::string* table) {
  uint64_t len = 0;
  TESSERA_RETURN_IF_ERROR(RecvAll(s, &len, sizeof(len), deadline));
  if (len > RankTable::MaxBytes(nranks)) return InvalidArgument("a rank table of " + std::to_string(len) + " bytes");
  table->assign(len, '\0');
  return RecvAll(s, &(*table)[0], len, deadline);
}

// Reads one reply (header, then message) from `s`.
Status RecvReply(const Socket& s, int nranks, const Deadline& deadline, JoinReply* reply) {
  std::string bytes(kJoinReplyHeaderBytes, '\0');
  TESSERA_RETURN_IF_ERROR(RecvAll(s, &bytes[0], bytes.size(), deadline));
  bytes.resize(JoinReplyBytes(bytes));
  if (bytes.size() > kJoinReplyHeaderBytes) {
    TESSERA_RETURN_IF_ERROR(RecvAll(s, &bytes[kJoinReplyHeaderBytes], bytes.size() - kJoinReplyHeaderBytes, deadline));
  }
  DecodeJoinReply(bytes, nranks, reply);
  return Status::Ok();
}

// The service keeps a connection per rank until it answers them all (so a rank sees at
// once when the service is gone): a process that may open fewer files than that (ulimit
// -n; often 1024) raises its soft limit as far as the hard one allows, or fails the
// rendezvous saying so, instead of leaving ranks unaccepted until they time out.
Status EnsureDescriptors(int nranks) {
  constexpr rlim_t kOthers = 256;  // what the process has open besides
  const rlim_t need = static_cast<rlim_t>(nranks) + kOthers;
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= need) return Status::Ok();
  rlimit raised = limit;
  raised.rlim_cur = std::min(need, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0 && raised.rlim_cur >= need) return Status::Ok();
  return InvalidUsage("the rendezvous keeps a connection per rank: " + std::to_string(nranks) + " ranks need about " +
                      std::to_string(need) + " file descriptors in the process serving it, which may open " +
                      std::to_string(limit.rlim_max) + " at most (ulimit -Hn); raise that limit");
}

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
  RendezvousService(Socket listener, uint64_t secret, int64_t timeout_ms, int fanout)
      : listener_(std::move(listener)), secret_(secret), deadline_(Deadline::AfterMs(timeout_ms)),
        timeout_ms_(timeout_ms), fanout_(std::max(fanout, 1)),
        arrivals_(&listener_, &deadline_, [secret](const std::string& bytes) {
          size_t total = kJoinHeaderBytes;
          if (bytes.size() < kJoinHeaderBytes) return total;
          // A header that is not one of ours is refused as it is.
          return JoinRequestBytes(bytes.substr(0, kJoinHeaderBytes), secret, &total).ok() ? total : kJoinHeaderBytes;
        }) {}

  void Run() {
    while (!deadline_.Expired()) {
      arrivals_.Wait();
      arrivals_.Accept();
      for (Arrivals::Done& d : arrivals_.Read()) {
        if (d.bytes.size() == d.wanted) Handle(std::move(d.socket), d.bytes);  // else: not a rank
      }
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
  void Handle(Socket client, const std::string& bytes) {
    Deadline hello_deadline = Deadline::AfterMs(1000);  // the reply is small: it fits the socket's buffer
    JoinRequest hello;
    const Status decoded = DecodeJoinRequest(bytes, secret_, &hello);
    if (decoded.code() == Code::kInvalidArgument || !failure_.ok()) {
      // Not of this communicator (refused alone), or it has already failed.
      const std::string r = EncodeJoinReply(decoded.code() == Code::kInvalidArgument ? decoded : failure_, 0, 0, {});
      SendAll(client, r.data(), r.size(), hello_deadline);
      return;
    }
    failure_ = decoded.ok() ? Admit(hello) : decoded;
    if (!failure_.ok()) {
      const std::string r = EncodeJoinReply(failure_, 0, 0, {});
      SendAll(client, r.data(), r.size(), hello_deadline);
      FailAll();
      return;
    }
    joined_[hello.rank] = std::move(client);
    forward_[hello.rank] = hello.forward;
    hello.info.agreed.clear();  // compared; it does not travel back
    infos_[hello.rank] = std::move(hello.info);
    ++joined_count_;
  }

  // Checks a well-formed request against those before it: OK when the rank may join.
  Status Admit(const JoinRequest& hello) {
    const int rank = hello.rank;
    if (nranks_ == 0) {
      TESSERA_RETURN_IF_ERROR(EnsureDescriptors(hello.nranks));
      nranks_ = hello.nranks;
      first_rank_ = rank;
      first_info_ = hello.info;
      joined_.resize(nranks_);
      infos_.resize(nranks_);
      forward_.resize(nranks_);
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

  // Every rank gets its answer; ranks 0..fanout-1 (first) the table too, the others
  // the address of the rank that forwards it to them.
  void SendTable() {
    const std::string table = TableMessage(RankTable::Encode(infos_));
    infos_.clear();
    for (int r = 0; r < nranks_; ++r) {
      const int parent = TableParent(r, fanout_);
      const SocketAddress from = parent < 0 ? SocketAddress{} : forward_[parent];
      const std::string reply = EncodeJoinReply(Status::Ok(), nranks_, fanout_, from);
      const Deadline d = SendDeadline(deadline_);
      if (SendAll(joined_[r], reply.data(), reply.size(), d).ok() && parent < 0) {
        SendAll(joined_[r], table.data(), table.size(), d);
      }
      joined_[r].Close();
    }
  }

  void FailAll() {
    const std::string r = EncodeJoinReply(failure_, 0, 0, {});
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
  const int fanout_;
  Arrivals arrivals_;
  int nranks_ = 0;
  int first_rank_ = 0;
  RankInfo first_info_;
  int joined_count_ = 0;
  std::vector<Socket> joined_;
  std::vector<RankInfo> infos_;
  std::vector<SocketAddress> forward_;
  Status failure_;
};

// A rank's forwarding of the table (or of the failure to get it) to the ranks below it
// in the tree: a thread that answers each child's table request once, and ends when
// every child has its answer or at the deadline. It owns what it needs (the listener,
// the table's bytes), so it outlives the communicator safely.
class TableForwarder {
 public:
  TableForwarder(Socket listener, uint64_t secret, int nranks, int fanout, std::vector<int> children, Status status,
                 std::shared_ptr<const std::string> table, const Deadline& deadline)
      : listener_(std::move(listener)), secret_(secret), nranks_(nranks), fanout_(fanout),
        children_(std::move(children)), status_(std::move(status)), table_(std::move(table)), deadline_(deadline),
        arrivals_(&listener_, &deadline_, [](const std::string&) { return kTableRequestBytes; }) {}

  static void Start(std::unique_ptr<TableForwarder> f) {
    std::thread([f = std::move(f)] {
      pthread_setname_np(pthread_self(), "tessera-fwd");
      f->Run();
    }).detach();
  }

 private:
  void Run() {
    while (!children_.empty() && !deadline_.Expired()) {
      arrivals_.Wait();
      arrivals_.Accept();
      for (Arrivals::Done& d : arrivals_.Read()) {
        int child = -1;
        if (d.bytes.size() != d.wanted || !DecodeTableRequest(d.bytes, secret_, &child).ok()) continue;
        auto it = std::find(children_.begin(), children_.end(), child);
        if (it == children_.end()) continue;  // not ours, or answered already
        children_.erase(it);
        Answer(d.socket);
      }
    }
  }

  void Answer(const Socket& child) {
    const Deadline d = SendDeadline(deadline_);
    const std::string reply = EncodeJoinReply(status_, status_.ok() ? nranks_ : 0, status_.ok() ? fanout_ : 0, {});
    if (!SendAll(child, reply.data(), reply.size(), d).ok() || !status_.ok()) return;
    const std::string length = AsBytes(static_cast<uint64_t>(table_->size()));
    if (SendAll(child, length.data(), length.size(), d).ok()) SendAll(child, table_->data(), table_->size(), d);
  }

  Socket listener_;
  const uint64_t secret_;
  const int nranks_;
  const int fanout_;
  std::vector<int> children_;  // those not answered yet
  const Status status_;
  const std::shared_ptr<const std::string> table_;
  const Deadline deadline_;
  Arrivals arrivals_;
};

}  // namespace

Status StartRendezvous(const std::string& listen_ip, int port, uint64_t secret, int64_t timeout_ms, int fanout,
                       SocketAddress* bound) {
  Socket listener;
  TESSERA_RETURN_IF_ERROR(Listen(listen_ip, port, &listener, bound).Annotate("rendezvous service"));
  auto service = std::make_shared<RendezvousService>(std::move(listener), secret, timeout_ms, fanout);
  {
    std::lock_guard<std::mutex> lock(Services().mu);
    ++Services().running[secret];
  }
  std::thread([service, secret] {
    pthread_setname_np(pthread_self(), "tessera-rdv");
    service->Run();
    RunningServices& s = Services();
    std::lock_guard<std::mutex> lock(s.mu);
    if (--s.running[secret] == 0) s.running.erase(secret);
    s.changed.notify_all();
  }).detach();
  return Status::Ok();
}

Status NewUniqueId(const Settings& settings, int root_rank, const std::string& root_host, UniqueIdData* id) {
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip));
  id->secret = RandomSecret();
  TESSERA_RETURN_IF_ERROR(
      StartRendezvous(ip, 0, id->secret, settings.timeout_ms, settings.bootstrap_fanout, &id->root));
  id->root_pid = getpid();
  id->root_rank = root_rank;
  id->root_host = root_host;
  return Status::Ok();
}

namespace {

// The rendezvous service is gone or stopped: it lives in the process that created the
// id, so that process is the culprit, by rank where the id knows it.
std::string RendezvousHostBlamed(const UniqueIdData& id) {
  std::string who = "the process serving the rendezvous";
  if (id.root_pid != 0) who += " (pid " + std::to_string(id.root_pid) + " on host " + HostnameOf(id.root_host) + ")";
  if (id.root_rank >= 0) who = "rank " + std::to_string(id.root_rank) + ", " + who + ",";
  const std::string tag = id.root_rank >= 0 ? "[culprit: rank " + std::to_string(id.root_rank) + "]"
                          : id.root_pid != 0 ? "[culprit: rendezvous host pid " + std::to_string(id.root_pid) + "]"
                                             : "[culprit: rendezvous host]";
  return who + " is gone or stopped (it created the unique id) " + tag;
}

// A service that refuses the id's secret is another communicator's: the id is stale, or
// the process that created it has exited and another took its port. The second is
// told from the first where that process was on this host.
bool CreatorExited(const UniqueIdData& id, const std::string& my_host) {
  return id.root_pid > 0 && !id.root_host.empty() && my_host.compare(0, id.root_host.size(), id.root_host) == 0 &&
         ProcessState(id.root_pid) == "exited";
}

// Joins at the service: its answer, and the table when the service sends it.
Status JoinService(const UniqueIdData& id, const JoinRequest& request, const Deadline& deadline, JoinReply* reply,
                   std::string* table) {
  const std::string where = "rendezvous at " + id.root.ToString() + " (rank " + std::to_string(request.rank) + ")";
  Socket s;
  Status connected = Connect(id.root, deadline, &s);
  if (!connected.ok()) return connected.Annotate(where + ": " + RendezvousHostBlamed(id));
  const std::string hello = EncodeJoinRequest(id.secret, request);
  TESSERA_RETURN_IF_ERROR(SendAll(s, hello.data(), hello.size(), deadline).Annotate(where));
  Status st = RecvReply(s, request.nranks, deadline, reply);
  if (st.ok() && reply->status.ok() && TableParent(request.rank, reply->fanout) < 0) {
    st = RecvTable(s, request.nranks, deadline, table);
  }
  if (st.code() == Code::kRemoteError) {
    return RemoteError(where + ": the service closed the connection: " + RendezvousHostBlamed(id));
  }
  // The service answers by its deadline, which came before ours: it has stopped.
  if (st.code() == Code::kTimeout) return st.Annotate(where + ": no table and no answer: " + RendezvousHostBlamed(id));
  TESSERA_RETURN_IF_ERROR(st.Annotate(where + ": waiting for all ranks to join"));
  if (reply->status.code() == Code::kInvalidArgument && CreatorExited(id, request.info.host)) {
    return RemoteError(where + ": " + RendezvousHostBlamed(id) + ": it exited, and the service now answering at "
                       "its address is another communicator's (" + reply->status.message() + ")");
  }
  return reply->status.Annotate(where);
}

// Fetches the table from the rank that forwards it to this one.
Status FetchTable(const UniqueIdData& id, int rank, int nranks, const JoinReply& reply, const Deadline& deadline,
                  std::string* table) {
  const int parent = TableParent(rank, reply.fanout);
  const std::string where = "rendezvous (rank " + std::to_string(rank) + "): the table from rank " +
                            std::to_string(parent) + " at " + reply.parent.ToString();
  const std::string blamed = "rank " + std::to_string(parent) + ", which forwards the table to this rank, is gone or "
                             "stopped [culprit: rank " + std::to_string(parent) + "]";
  Socket s;
  Status st = Connect(reply.parent, deadline, &s, /*retry_refused=*/false);
  if (st.ok()) {
    const std::string request = EncodeTableRequest(id.secret, rank);
    st = SendAll(s, request.data(), request.size(), deadline);
  }
  JoinReply answer;
  if (st.ok()) st = RecvReply(s, nranks, deadline, &answer);
  if (st.ok() && answer.status.ok()) st = RecvTable(s, nranks, deadline, table);
  if (st.code() == Code::kRemoteError || st.code() == Code::kTimeout) {
    return Status(st.code(), where + ": " + st.message() + ": " + blamed);
  }
  TESSERA_RETURN_IF_ERROR(st.Annotate(where));
  return answer.status.Annotate(where);  // the parent's own failure to get it names the culprit
}

}  // namespace

static Status JoinRendezvousOnce(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                                 const std::string& listen_ip, int64_t timeout_ms, RankTable* table);

Status JoinRendezvous(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine, const std::string& listen_ip,
                      int64_t timeout_ms, RankTable* table) {
  // Whatever the outcome, a process hosting this rendezvous waits (a little past the
  // deadline, so a service telling everyone of a timeout can finish) until the service
  // has answered every rank: returning might end the process and cut the others off.
  struct WaitOnReturn {
    uint64_t secret;
    int64_t timeout_ms;
    ~WaitOnReturn() { WaitForLocalService(secret, Deadline::AfterMs(std::min<int64_t>(timeout_ms, 5000))); }
  } wait_on_return{id.secret, timeout_ms};
  return JoinRendezvousOnce(id, rank, nranks, mine, listen_ip, timeout_ms, table);
}

static Status JoinRendezvousOnce(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                                 const std::string& listen_ip, int64_t timeout_ms, RankTable* table) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms);
  JoinRequest request;
  request.rank = rank;
  request.nranks = nranks;
  request.info = mine;
  Socket listener;  // where the ranks below this one in the table's tree ask for it
  TESSERA_RETURN_IF_ERROR(Listen(listen_ip, 0, &listener, &request.forward).Annotate("rendezvous: table listener"));
  JoinReply reply;  // its fanout stays 0 unless the service answered OK
  std::string bytes;
  Status got = JoinService(id, request, deadline, &reply, &bytes);
  if (got.ok() && TableParent(rank, reply.fanout) >= 0) got = FetchTable(id, rank, nranks, reply, deadline, &bytes);
  if (got.ok()) {
    got = RankTable::Decode(std::move(bytes), nranks, table).Annotate("rendezvous (rank " + std::to_string(rank) + ")");
  }
  // The ranks below pass on the table, or why it did not come (naming the culprit).
  std::vector<int> children = TableChildren(rank, nranks, reply.fanout);
  if (!children.empty()) {
    TableForwarder::Start(std::make_unique<TableForwarder>(std::move(listener), id.secret, nranks, reply.fanout,
                                                           std::move(children), got,
                                                           got.ok() ? table->bytes() : nullptr, deadline));
  }
  return got;
}

}  // namespace tessera
