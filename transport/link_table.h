// LinkTable: a communicator's links, one per peer, created on first use by the first
// transport (in priority order) that can reach the peer, as NCCL does with canConnect.
// It is also the PeerExchange of backends that swap connection data while connecting
// (ibverbs): over a link of its control transport (TCP), apart from the data links.
#ifndef TESSERA_TRANSPORT_LINK_TABLE_H_
#define TESSERA_TRANSPORT_LINK_TABLE_H_

#include <memory>
#include <string>
#include <vector>

#include "transport/plugin.h"
#include "transport/transport.h"

namespace tessera {

class LinkTable : public PeerExchange {
 public:
  explicit LinkTable(int nranks) : links_(nranks), control_links_(nranks) {}
  LinkTable(int nranks, std::vector<std::unique_ptr<Transport>> transports_by_priority);
  ~LinkTable() override;

  // Appends a transport (the lowest priority so far). `control`: it also carries the
  // other backends' connection set-up (Swap). Before the first Get.
  void Add(std::unique_ptr<Transport> transport, bool control);

  // The link to `peer`, connecting it now if needed (both ranks must ask, e.g. because
  // they run the same collective).
  Status Get(int peer, const Deadline& deadline, Link** out);

  // PeerExchange: one message each way over the control transport's link to `peer`
  // (made on first use, apart from the data link). InvalidUsage when the table has no
  // control transport.
  Status Swap(int peer, const std::string& mine, const Deadline& deadline, std::string* theirs) override;

  // Which transport reaches `peer` ("shm", "ibverbs", "ucx", "tcp", or "none").
  const char* TransportFor(int peer) const;

  // A board on which every rank of the communicator posts (all share this host), or
  // null (transport/host_board.h).
  HostBoard* Board() const;

  // Failure propagation over every transport (see Transport); what peers are told is
  // the failure's RootCause (base/status.h).
  void PublishFailure(const Status& failure);
  void AddNoticeWaits(WaitSet* set);
  Status CheckNotices(int wait_ms);

 private:
  std::vector<std::unique_ptr<Link>> links_;               // by peer; destroyed first
  std::vector<std::unique_ptr<Link>> control_links_;       // by peer, when asked for
  std::vector<std::unique_ptr<Transport>> transports_;
  Transport* control_ = nullptr;                           // in transports_
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_LINK_TABLE_H_
