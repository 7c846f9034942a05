// The transport plugin contract: what a backend (shm, tcp, ucx, ibverbs, cuda_ipc)
// offers the set-up of a communicator, as Gloo's Address/Pair and NCCL's ncclConnect do.
// The set-up (transport/registry.h) drives every backend named by TESSERA_TRANSPORT
// through two steps around the rendezvous, and the bootstrap carries what a backend
// publishes as opaque bytes under its name, knowing no backend:
//
// 1. Open, before the rendezvous: the backend opens what peers will reach this rank by
//    (a listener, a segment name, a UCX worker, an RDMA device) and returns an
//    OpenTransport whose card() is the bytes peers need: the backend's card, as a rank
//    would hand out a business card, published through the rendezvous.
// 2. Finish, after: with every rank's card of this backend and the ranks of this host,
//    the backend builds its Transport (or none, when it has no peer to reach here).
//
// Every pair of ranks must choose the same transport. That holds because the list is
// agreed (its row in the agreed settings) and each transport's CanConnect depends only
// on what both ranks published.
#ifndef TESSERA_TRANSPORT_PLUGIN_H_
#define TESSERA_TRANSPORT_PLUGIN_H_

#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/settings.h"
#include "base/status.h"
#include "topology/host_identity.h"
#include "transport/transport.h"

namespace tessera {

class DeviceEngine;

// Swaps connection data with one peer, for backends whose connections need more than
// the cards (ibverbs' queue-pair numbers). Both ranks of a pair call it at the same
// point of their Connect, so calls pair up in order; both sides of a round send the
// same length. Never blocks past `deadline` (TimeoutError).
class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  virtual Status Swap(int peer, const std::string& mine, const Deadline& deadline, std::string* theirs) = 0;
};

// What a backend may read when it opens.
struct OpenContext {
  const Settings* settings = nullptr;
  int rank = 0;
  int nranks = 1;
  uint64_t secret = 0;  // the communicator's: authenticates connections between ranks
  // TESSERA_TRANSPORT=auto: a backend that cannot start here (no device) answers
  // "not here" quietly instead of failing.
  bool automatic = false;
  // The backends of TESSERA_TRANSPORT opened before this one, in priority order.
  std::vector<std::string> opened;
};

// What the rendezvous taught, for Finish.
struct FinishContext {
  const Settings* settings = nullptr;
  int rank = 0;
  int nranks = 1;
  std::vector<std::string> cards;  // this backend's card of every rank; "" where it has none
  std::vector<LocalRank> local;    // the ranks of this host, in rank order
  PeerExchange* exchange = nullptr;  // valid for the transport's lifetime
  Deadline deadline = Deadline::Past();
};

// A backend between Open and Finish.
class OpenTransport {
 public:
  virtual ~OpenTransport() = default;
  // The bytes peers need to reach this rank ("" for none).
  virtual std::string card() const = 0;
  // Builds the transport of host-memory calls; *out stays null when it has no peer to
  // reach here (shared memory with one rank on the host; cuda_ipc, device-only).
  virtual Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) = 0;
  // After Finish: a note for the log line that lists the transports ("" for none).
  virtual std::string note() const { return ""; }
  // How long a rank should spin before sleeping when this backend carries its links,
  // in microseconds (0: no preference); the communicator takes the largest.
  virtual int64_t spin_us_hint() const { return 0; }

  // --- Device-resident calls (docs/cuda.md); backends without them keep the defaults.
  // After Finish: whether this backend's device transport would reach `peer`. The
  // same answer on every rank for the same pair.
  virtual bool DeviceReaches(int peer) const {
    (void)peer;
    return false;
  }
  // After Finish: the transport whose links keep messages in `engine`'s memory (the
  // engine outlives it). Collective among the ranks it reaches.
  virtual Status FinishDevice(DeviceEngine* engine, const Deadline& deadline, std::unique_ptr<Transport>* out) {
    (void)engine, (void)deadline;
    out->reset();
    return Status::Ok();
  }
  // After FinishDevice: one phrase for the log ("cuda_ipc (4 slots of 1048576 B per peer)").
  virtual std::string DescribeDevice() const { return ""; }
};

// Opens a backend. *out stays null when the backend is left out on this rank, which
// only ctx.automatic allows (a backend named explicitly must open or fail).
using OpenFn = Status (*)(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_PLUGIN_H_
