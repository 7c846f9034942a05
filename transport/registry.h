// The transport registry: one row per backend, and the set-up that drives the rows a
// communicator's TESSERA_TRANSPORT names through the plugin contract (plugin.h).
//
// Adding a transport takes its folder (the Transport and its Links, and an OpenFn
// declared in its header) and one row in registry.cc's table.
#ifndef TESSERA_TRANSPORT_REGISTRY_H_
#define TESSERA_TRANSPORT_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "topology/host_identity.h"
#include "transport/link_table.h"
#include "transport/plugin.h"

namespace tessera {

struct TransportEntry {
  const char* name;
  // Carries host-memory calls (every backend but cuda_ipc, which carries device memory
  // only and needs a host transport beside it).
  bool host;
  // Carries the other backends' connection set-up (PeerExchange): tcp.
  bool control;
  // The backend's settings that every rank must agree on where it is listed are the
  // rows of base/settings.h with its name in their agree column (AgreedLines).
  OpenFn open;
};

// Every backend, in the order of TESSERA_TRANSPORT=auto (cuda_ipc first: it carries
// device-resident calls only, and is preferred for them inside a host).
const std::vector<TransportEntry>& TransportRegistry();

// TESSERA_TRANSPORT as rows of the registry in priority order ("auto": all of them).
// InvalidArgument for an unknown or repeated name, or for device-only backends alone.
Status ParseTransportList(const std::string& text, std::vector<const TransportEntry*>* out);

// The backends of one communicator rank, from Open to its link tables.
class TransportSet {
 public:
  TransportSet() = default;
  TransportSet(const TransportSet&) = delete;
  TransportSet& operator=(const TransportSet&) = delete;

  // Before the rendezvous: opens every listed backend. Then cards() are what to
  // publish, and listed() what the agreed settings depend on.
  Status Open(const Settings& settings, int rank, int nranks, uint64_t secret);
  // {backend name, card} of every backend that opened here.
  std::vector<std::pair<std::string, std::string>> cards() const;
  // The backends TESSERA_TRANSPORT lists, in priority order ("auto": all of them),
  // whether or not they opened here: the same on every rank that agrees on the setting.
  const std::vector<std::string>& listed() const { return listed_; }

  // After: builds the table of host-memory links. `card_of(rank, name, &bytes)` gives
  // a rank's card of a backend ("" for none); `local` the ranks of this host.
  using CardLookup = std::function<Status(int rank, const std::string& name, std::string* bytes)>;
  Status Finish(const CardLookup& card_of, const std::vector<LocalRank>& local, const Deadline& deadline,
                std::unique_ptr<LinkTable>* out);
  // One line for the log: the host transports built, in priority order, with notes.
  const std::string& description() const { return description_; }
  // The spin before sleeping that the backends in use ask for (0: no preference).
  int64_t spin_us_hint() const { return spin_us_hint_; }

  // Device-resident calls: whether some backend's device transport reaches every peer
  // (the same answer on every rank), and the table of those transports on `engine`
  // with every link connected (collective). On a failure while connecting, *out holds
  // the table so far (to publish the failure on). *described: one phrase for the log.
  bool DevicePossible() const;
  Status FinishDevice(DeviceEngine* engine, const Deadline& deadline, std::unique_ptr<LinkTable>* out,
                      std::string* described);

 private:
  struct Opened {
    const TransportEntry* entry;
    std::unique_ptr<OpenTransport> backend;
  };
  int rank_ = 0;
  int nranks_ = 1;
  Settings settings_;
  // Whether `backend`'s device transport reaches some peer.
  bool ReachesAnyPeer(const OpenTransport& backend) const;

  std::vector<Opened> opened_;  // priority order
  std::vector<std::string> listed_;
  std::string description_;
  int64_t spin_us_hint_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_REGISTRY_H_
