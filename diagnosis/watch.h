// The watch service: a thread per communicator that answers peers' questions about
// this rank (its Activity), so that when a call stalls the survivors can find out who
// stopped, who is outside tessera and who is merely waiting, even while this rank's
// calls are blocked. It listens on its own TCP socket (the address is a rendezvous
// card), apart from the data links, and answers one small request at a time:
// - kStatus: this rank's ActivitySnapshot;
// - kStatusAndDump: the same, after writing this rank's flight record (the dump
//   callback), so that every rank that still runs leaves its record, not only those
//   that failed;
// - kOffer: the bytes this rank offers its peers (SetOffer; empty when none), e.g. the
//   unique id of the communicator that the survivors of a shrink create;
// - kTimings: this rank's CallTimings (Activity::Timings), asked by the communicator's
//   straggler judge, whose request carries its latest verdict (Activity::SetStraggler).
// Requests carry the communicator's secret; anything else is dropped unanswered. A
// stopped process (SIGSTOP) answers nothing; a dead one refuses the connection.
//
// QueryPeers is the other side: it asks many peers at once, all in parallel, bounded by
// one deadline, and sorts out who answered, who refused, who stayed silent and whose
// packets this host could not even send.
#ifndef TESSERA_DIAGNOSIS_WATCH_H_
#define TESSERA_DIAGNOSIS_WATCH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "diagnosis/activity.h"

namespace tessera {

enum class WatchRequest : uint32_t { kStatus = 1, kStatusAndDump = 2, kOffer = 3, kTimings = 4 };

// The reply's bytes: encoded by the service, decoded (bounds-checked: they come from the
// network) by QueryPeers. At most kMaxWatchPeers waiting peers and culprits and
// kMaxVerdictBytes of verdict travel.
constexpr size_t kMaxWatchPeers = 64;
constexpr size_t kMaxVerdictBytes = 2048;
std::string EncodeSnapshot(int rank, int pid, const ActivitySnapshot& s);
// InvalidArgument naming what is wrong when `bytes` is not a whole, valid reply.
Status DecodeSnapshot(const std::string& bytes, int* rank, int* pid, ActivitySnapshot* s);

// The request a service reads (24 bytes): InvalidArgument unless it is one of this
// job (secret) of a known kind; the service drops such connections unanswered.
constexpr size_t kWatchRequestBytes = 24;
std::string EncodeWatchRequest(uint64_t secret, WatchRequest kind, int from_rank);
Status DecodeWatchRequest(const std::string& bytes, uint64_t secret, WatchRequest* kind);

// A kTimings request's verdict follows its 24 bytes: a 4-byte length, then the verdict
// (at most kMaxVerdictWaiters waiters travel). Decoding checks the bounds (the bytes
// come from the network) and that the ranks lie in [0, nranks).
constexpr size_t kMaxVerdictWaiters = 256;
constexpr size_t kMaxStragglerVerdictBytes = 32 + 4 * kMaxVerdictWaiters;
std::string EncodeStragglerVerdict(const StragglerVerdict& v);
Status DecodeStragglerVerdict(const std::string& bytes, int nranks, StragglerVerdict* v);
// A kTimings reply: the rank and its accounts (at most Activity::kTimingSlots).
std::string EncodeTimings(int rank, const RankTimings& timings);
Status DecodeTimings(const std::string& bytes, int* rank, RankTimings* timings);
constexpr size_t kMaxTimingsReplyBytes = 24 + 24 * Activity::kTimingSlots;

// Makes signal `signo` (e.g. SIGUSR1) ask every watch service of the process that was
// started with dump_on_signal to run its dump (within kSignalCheckMs). The handler only
// bumps a counter. Installed once per process; InvalidArgument for a signal that cannot
// be caught, InvalidUsage when another signal was installed before.
Status InstallDumpSignal(int signo);
constexpr int kSignalCheckMs = 200;

class WatchService {
 public:
  // Listens on `ip` (port chosen by the kernel) and starts the thread. `activity` and
  // `dump` must outlive the service; `dump` runs on the service's thread. With
  // dump_on_signal it also runs when the signal of InstallDumpSignal arrives.
  // kTimings requests hand `activity` the judge's verdict (ranks of `nranks`).
  static Status Start(const std::string& ip, uint64_t secret, int rank, int nranks, Activity* activity,
                      std::function<void()> dump, bool dump_on_signal, std::unique_ptr<WatchService>* out);
  ~WatchService();  // stops and joins the thread, closes every socket
  WatchService(const WatchService&) = delete;
  WatchService& operator=(const WatchService&) = delete;

  SocketAddress address() const { return address_; }
  // What kOffer answers from now on (at most kMaxOfferBytes). Thread-safe.
  void SetOffer(const std::string& bytes);

 private:
  WatchService() = default;
  void Serve();
  void Answer(Socket client);
  // A kTimings request's verdict, read after its header, and the reply.
  bool AnswerTimings(const Socket& client, const Deadline& deadline, std::string* reply);

  Socket listener_;
  int wake_fd_ = -1;  // an eventfd: written to stop the thread
  SocketAddress address_;
  uint64_t secret_ = 0;
  int rank_ = 0;
  int pid_ = 0;
  int nranks_ = 0;
  Activity* activity_ = nullptr;

  std::function<void()> dump_;
  bool dump_on_signal_ = false;
  std::mutex offer_mu_;
  std::string offer_;
  uint64_t signals_seen_ = 0;  // the dump signals counted when last looked (the thread's)
  std::thread thread_;
};

constexpr size_t kMaxOfferBytes = 4096;

// Asks the watch service at `peer` for its offer: OK with *offer (empty when it has
// none yet); an error when it cannot be asked by the deadline.
Status AskOffer(const SocketAddress& peer, uint64_t secret, int my_rank, const Deadline& deadline, std::string* offer);

// What asking one peer gave.
struct PeerAnswer {
  enum class Kind : uint8_t {
    kAnswered,     // `snapshot` holds its state
    kRefused,      // connection refused or reset: nothing listens (the process is gone)
    kLocalError,   // this host could not send (network down, unreachable net, packets
                   // dropped by a local firewall): the fault is on this side
    kSilent,       // no answer by the deadline (stopped, hung, or cut off)
    kBadReply,     // answered garbage
  };
  Kind kind = Kind::kSilent;
  int pid = 0;
  ActivitySnapshot snapshot;
  std::string error;  // what failed, for kinds other than kAnswered
};
const char* PeerAnswerName(PeerAnswer::Kind kind);

// Sends `request` to each address of `peers` (index = rank; ranks in `skip` are not
// asked), all at once, and reads each reply (a 4-byte length, then at most `max_reply`
// bytes) until every one has answered or failed or the deadline passes. `decode` gets
// each whole reply, sets the answer's kind (kAnswered or kBadReply) and what it holds,
// and returns false to stop asking (the others stay kSilent). `answers` is resized to
// peers.size().
using ReplyDecoder = std::function<bool(int peer, const std::string& reply, PeerAnswer* answer)>;
void AskPeers(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, const std::string& request,
              size_t max_reply, const Deadline& deadline, const ReplyDecoder& decode, std::vector<PeerAnswer>* answers);

// AskPeers for each peer's status (kStatus or kStatusAndDump). With stop_on_verdict,
// returns as soon as one answer carries a verdict.
void QueryPeers(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, uint64_t secret, int my_rank,
                WatchRequest request, const Deadline& deadline, bool stop_on_verdict, std::vector<PeerAnswer>* answers);

// AskPeers for each peer's accounts (into (*timings)[rank]), handing each `verdict`.
void QueryTimings(const std::vector<SocketAddress>& peers, const std::vector<bool>& skip, uint64_t secret,
                  int my_rank, const StragglerVerdict& verdict, const Deadline& deadline,
                  std::vector<PeerAnswer>* answers, std::vector<RankTimings>* timings);

}  // namespace tessera

#endif  // TESSERA_DIAGNOSIS_WATCH_H_
