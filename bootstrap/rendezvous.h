// Rendezvous: how the ranks of a new communicator find each other.
//
// One process runs the rendezvous service (a thread started by StartRendezvous, usually
// inside tesseraGetUniqueId). Every rank connects to it, presents the communicator's
// secret, its rank, nranks and its RankInfo (rank_table.h); once all nranks ranks have
// joined, the service answers every rank, sends the table of all ranks to the first
// `fanout` of them and exits; each rank forwards the table to `fanout` others, so the
// service sends O(fanout x nranks) bytes, not O(nranks^2). Inconsistencies
// (duplicate rank, nranks or settings that differ between ranks) fail the rendezvous for
// every rank with a message naming the ranks involved; a rank with the wrong secret is
// refused alone. The service gives up after the timeout and tells the ranks that did
// join which ranks never came. A rank whose table does not come because the rank that
// forwards it is gone fails naming that rank.
//
// Wire format: little structs in host byte order (a cluster is assumed homogeneous).
#ifndef TESSERA_BOOTSTRAP_RENDEZVOUS_H_
#define TESSERA_BOOTSTRAP_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/rank_table.h"

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

// --- The service's wire, as pure functions (the bytes come from the network) ----------
// A rank's join request: what JoinRendezvous sends first. `forward` is where this rank
// listens for the ranks it forwards the table to.
struct JoinRequest {
  int32_t rank = 0;
  int32_t nranks = 0;
  SocketAddress forward;
  RankInfo info;
};
// The most ranks one rendezvous serves (it keeps a socket per rank).
constexpr int kMaxRendezvousRanks = 1 << 20;
// A request is a fixed header, then the host, agreed lines and cards it announces.
constexpr size_t kJoinHeaderBytes = 40;
std::string EncodeJoinRequest(uint64_t secret, const JoinRequest& request);
// From the first kJoinHeaderBytes of a request: how many bytes the whole request has.
// InvalidArgument when they are not the header of a request for this communicator
// (wrong magic or secret, lengths past the limits: the sender is refused alone).
Status JoinRequestBytes(const std::string& header, uint64_t secret, size_t* total);
// Exactly the bytes of one request, or an error the service answers with:
// InvalidArgument as JoinRequestBytes, or when the length is not the one announced;
// InvalidUsage when nranks is outside [1, kMaxRendezvousRanks] or rank outside
// [0, nranks) (the rendezvous fails for all).
Status DecodeJoinRequest(const std::string& bytes, uint64_t secret, JoinRequest* out);

// The service's answer to a rank: the rendezvous' status and, when it is OK, where the
// rank gets the table: from the service on the same connection (rank < fanout), else
// from rank TableParent(rank, fanout), which listens at `parent`.
struct JoinReply {
  Status status;
  int32_t fanout = 0;
  SocketAddress parent;
};
// A reply is a fixed header, then the status' message (at most kMaxReplyMessage bytes).
constexpr size_t kJoinReplyHeaderBytes = 20;
constexpr size_t kMaxReplyMessage = 511;
std::string EncodeJoinReply(const Status& status, int nranks, int fanout, const SocketAddress& parent);
// From a reply's header: the whole reply's length (always a length: a bad header is
// told by DecodeJoinReply).
size_t JoinReplyBytes(const std::string& header);
// out->status is always an error unless the bytes are an OK for exactly `nranks` ranks
// with a fanout of at least 1 (InternalError "table of the wrong size"): any bytes give
// a status.
void DecodeJoinReply(const std::string& bytes, int nranks, JoinReply* out);

// The table travels down a tree of ranks: the service sends it to ranks 0..fanout-1,
// and rank r forwards it to ranks fanout*(r+1) .. fanout*(r+1)+fanout-1.
int TableParent(int rank, int fanout);  // -1: the service
std::vector<int> TableChildren(int rank, int nranks, int fanout);
// What a rank sends the rank that forwards it the table.
constexpr size_t kTableRequestBytes = 24;
std::string EncodeTableRequest(uint64_t secret, int rank);
// InvalidArgument unless `bytes` are a table request for this communicator.
Status DecodeTableRequest(const std::string& bytes, uint64_t secret, int* rank);

// Starts the service on listen_ip:port (port 0: any) in a background thread that ends by
// itself; `bound` receives the address ranks must contact. It sends the table to
// `fanout` ranks (TESSERA_BOOTSTRAP_FANOUT), which forward it.
Status StartRendezvous(const std::string& listen_ip, int port, uint64_t secret, int64_t timeout_ms, int fanout,
                       SocketAddress* bound);

// A new unique id that this process serves: a random secret, and the rendezvous started
// (StartRendezvous) on the address of TESSERA_SOCKET_IFNAME with the settings' timeout
// and fanout. `root_rank` (-1: not known yet) and `root_host` (this process's host
// identity) name the process in it.
Status NewUniqueId(const Settings& settings, int root_rank, const std::string& root_host, UniqueIdData* id);

// Joins: blocks until every rank has joined and this rank has the table, or the
// rendezvous fails or times out. Ranks this one forwards the table to are served by a
// thread of this process that ends by itself (when they all have it, or at the
// deadline), listening on `listen_ip`.
Status JoinRendezvous(const UniqueIdData& id, int rank, int nranks, const RankInfo& mine,
                      const std::string& listen_ip, int64_t timeout_ms, RankTable* table);

}  // namespace tessera

#endif  // TESSERA_BOOTSTRAP_RENDEZVOUS_H_
