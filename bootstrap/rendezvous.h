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
};
constexpr size_t kUniqueIdBytes = 128;
void EncodeUniqueId(const UniqueIdData& id, char out[kUniqueIdBytes]);
// InvalidArgument when the bytes are not a tessera unique id.
Status DecodeUniqueId(const char in[kUniqueIdBytes], UniqueIdData* out);
uint64_t RandomSecret();

// Settings that every rank of a communicator must agree on; checked at rendezvous.
struct AgreedSettings {
  int64_t shm_slot_bytes = 0;
  int64_t shm_slots = 0;
  int64_t tcp_streams = 0;
  int64_t tcp_chunk_bytes = 0;
  int64_t transports = 0;       // TESSERA_TRANSPORT, encoded (the priority order matters)
  int64_t ucx_chunk_bytes = 0;
  int64_t half_wire = 0;        // TESSERA_HALF_WIRE=half
};

// What a rank tells all others.
struct RankInfo {
  SocketAddress listen;       // where the rank accepts TCP connections from peers
  int32_t pid = 0;
  char host[128] = {0};       // host identity (topology/host_identity.h)
  char shm_name[64] = {0};    // its shared-memory segment, "" when it has none
  AgreedSettings agreed;
  uint32_t ucx_address_len = 0;  // 0: the rank has no UCX
  uint32_t ib_summary_len = 0;   // 0: the rank has no ibverbs
  char ucx_address[1024] = {0};  // its UCX worker address
  char ib_summary[32] = {0};     // its ibverbs summary (device kind, subnet)
};

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
