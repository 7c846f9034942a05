// LinkTable: a communicator's links, one per peer, created on first use by the first
// transport (in priority order) that can reach the peer, as NCCL does with canConnect.
#ifndef TESSERA_TRANSPORT_LINK_TABLE_H_
#define TESSERA_TRANSPORT_LINK_TABLE_H_

#include <memory>
#include <vector>

#include "transport/transport.h"

namespace tessera {

class LinkTable {
 public:
  LinkTable(int nranks, std::vector<std::unique_ptr<Transport>> transports_by_priority);
  ~LinkTable();

  // The link to `peer`, connecting it now if needed (both ranks must ask, e.g. because
  // they run the same collective).
  Status Get(int peer, const Deadline& deadline, Link** out);

  // A TCP link to `peer` for control messages (another transport's connection set-up
  // data), apart from the data link, which then belongs to that other transport. Both
  // ranks must ask. InvalidUsage when TCP is not among the transports.
  Status Control(int peer, const Deadline& deadline, Link** out);

  // Which transport reaches `peer` ("shm", "ibverbs", "ucx", "tcp", or "none").
  const char* TransportFor(int peer) const;

  // Failure propagation over every transport (see Transport).
  void PublishFailure(const Status& failure);
  void AddNoticeWaits(WaitSet* set);
  Status CheckNotices(int wait_ms);

 private:
  std::vector<std::unique_ptr<Link>> links_;               // by peer; destroyed first
  std::vector<std::unique_ptr<Link>> control_links_;       // by peer, TCP, when asked for
  std::vector<std::unique_ptr<Transport>> transports_;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_LINK_TABLE_H_
