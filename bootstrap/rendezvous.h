// Rendezvous: how the ranks of a new communicator find each other.
//
// One process runs the rendezvous service (a thread started by StartRendezvous, usually
// inside tesseraGetUniqueId). Every rank connects to it, presents the communicator's
// secret, its rank, nranks and its RankInfo; once all nranks ranks have joined, the
// service sends every rank the table of all RankInfos and exits. Inconsistencies
// (duplicate rank, nranks or settings that differ between ranks) fail the rendezvous for
// every rank with a message naming the ranks involved; a rank with the wrong secret is
// refused alone. The service gives up after the timeout and tells the ranks that did
// join which ranks never came.
//
// Wire format: fixed-size structs in host byte order (a cluster is assumed homogeneous).
#ifndef TESSERA_BOOTSTRAP_RENDEZVOUS_H_
#define TESSERA_BOOTSTRAP_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"

namespace tessera {

// The decoded content of a tesseraUniqueId (128 bytes on the wire).
struct UniqueIdData {
  SocketAddress root;
  uint64_t secret = 0;
  // Who serves the rendezvous, so that ranks can name it when it is gone: its process
  // (0: unknown), its rank in the communicator being created (-1: unknown, as for
  // tesseraGetUniqueId, which any process may call) and its host (at most 95 bytes).
  int32_t root_pid = 0;
  int32_t root_rank = -1;
  std::string root_host;
};
constexpr size_t kUniqueIdBytes = 128;
void EncodeUniqueId(const UniqueIdData& id, char out[kUniqueIdBytes]);
// InvalidArgument when the bytes are not a tessera unique id.
Status DecodeUniqueId(const char in[kUniqueIdBytes], UniqueIdData* out);
uint64_t RandomSecret();

// What a rank tells all others: who it is, the settings every rank must agree on, and
// one card per transport backend (the bytes peers need to reach this rank through it: an
// address, a segment name). The bootstrap carries cards as opaque bytes under the
// backend's name and knows no backend (transport/plugin.h).
struct RankInfo {
  int32_t pid = 0;
  char host[128] = {0};  // host identity (topology/host_identity.h)
  // "NAME=value" lines, one per setting that must be equal on every rank; the
  // rendezvous names the first that differs.
  uint32_t agreed_len = 0;
  char agreed[512] = {0};
  // Records {name length (1 byte), name, bytes length (2 bytes), bytes}, one per card.
  uint32_t cards_len = 0;
  char cards[2048] = {0};
};

// Appends `lines` ("NAME=value" lines, each ended by a newline) to info's agreed
// settings. InvalidArgument when they do not fit.
Status AddAgreed(const std::string& lines, RankInfo* info);
// Appends a card. InvalidArgument when it does not fit (the message says how big it is).
Status AddCard(const std::string& name, const std::string& bytes, RankInfo* info);
// The card of backend `name`, "" when the rank published none. InvalidArgument when
// the records are malformed (the table comes from the network).
Status FindCard(const RankInfo& info, const std::string& name, std::string* bytes);

// The name of the first agreed setting (AddAgreed's "NAME=value" lines) in which b
// differs from a, or "" when they agree. Reads at most the bytes the structs hold.
std::string SettingMismatch(const RankInfo& a, const RankInfo& b);

// --- The service's wire, as pure functions (the bytes come from the network) ----------
// A rank's join request: what JoinRendezvous sends first.
struct JoinRequest {
  int32_t rank = 0;
  int32_t nranks = 0;
  RankInfo info;
};
// The most ranks one rendezvous serves (it keeps a socket per rank).
constexpr int kMaxRendezvousRanks = 1 << 20;
constexpr size_t kJoinRequestBytes = 2728;
std::string EncodeJoinRequest(uint64_t secret, const JoinRequest& request);
// Exactly the bytes of one request, or an error the service answers with:
// InvalidArgument when they are not a request for this communicator (short, wrong magic
// or secret: the sender is refused alone); InvalidUsage when nranks is outside
// [1, kMaxRendezvousRanks] or rank outside [0, nranks) (the rendezvous fails for all).
// The RankInfo is taken as it is: its readers (FindCard, the agreed lines) bound it.
Status DecodeJoinRequest(const std::string& bytes, uint64_t secret, JoinRequest* out);
// The service's answer to a rank: OK (the table of `nranks` RankInfos follows) or the
// rendezvous' failure.
constexpr size_t kJoinReplyBytes = 520;
std::string EncodeJoinReply(const Status& status, int nranks);
// The status the answer carries, always an error unless it is an OK for exactly
// `nranks` ranks (InternalError "table of the wrong size"): any bytes give a status.
Status DecodeJoinReply(const std::string& bytes, int nranks);

// Starts the service on listen_ip:port (port 0: any) in a background thread that ends by
// itself; `bound` receives the address ranks must contact.
Status StartRendezvous(const std::string& listen_ip, int port, uint64_t secret, int64_t timeout_ms,
                       SocketAddress* bound);

// Joins: blocks until every rank has joined (then fills `all`, indexed by rank) or the
// rendezvous fails or times out.
Status JoinRendezvous(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                      int64_t timeout_ms, std::vector<RankInfo>* all);

}  // namespace tessera

#endif  // TESSERA_BOOTSTRAP_RENDEZVOUS_H_
