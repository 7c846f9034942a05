// CUDA IPC transport: Links between the ranks of one host whose messages stay in device
// memory, so every algorithm runs unchanged on device buffers (docs/transports.md).
//
// Per directed pair the RECEIVER owns `slots` staging slots of `slot_bytes` in device
// memory, exported once at connect time (DeviceEngine::Export: a CUDA IPC handle) and
// mapped by the sender. The slots' state travels as small messages over a control link
// of a shared-memory transport of its own (transport/shm, with segments named after the
// ranks' own plus "-dev"), which also brings the doorbell, the dead-peer checks and the
// failure notices:
//
//   sender                                          receiver
//   a slot is free (FREE count) -> copy the piece
//   into the peer's slot on the send stream,
//   record an event
//   event done -> FULL {piece, message, offset} --> FULL arrives -> launch the reduce
//                                                   kernel (dst = acc op slot) or a copy
//                                                   on the receive stream, record an event
//                   <-- FREE {piece} ------------- event done -> ready_bytes advances
//
// Progress never blocks: events are queried. While device work is in flight, AddWaits
// keeps the engine from sleeping (an always-ready descriptor), else it sleeps on the
// control segment's doorbell. Every wait is bounded by the Exchange engine's deadline.
// Which memory and kernels are used is the DeviceEngine's business (device_engine.h).
#ifndef TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
#define TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "device/device_engine.h"
#include "transport/shm/shm_transport.h"
#include "transport/plugin.h"
#include "transport/transport.h"

namespace tessera {

class CudaIpcTransport : public Transport {
 public:
  // Defaults: the settings table's (TESSERA_CUDA_IPC_SLOT_BYTES, TESSERA_CUDA_IPC_SLOTS).
  struct Options {
    int64_t slot_bytes = SettingDefaults::cuda_ipc_slot_bytes;
    int64_t slots = SettingDefaults::cuda_ipc_slots;
  };

  // The control segment of a rank whose shared-memory segment is `segment`.
  static std::string ControlSegmentName(const std::string& segment);

  // Creates the control segments among the ranks of this host (every one of them must
  // call it, as ShmTransport::Create). `local` lists them in rank order with their
  // ordinary segment names. The engine must outlive the transport and its links.
  static Status Create(const Options& options, DeviceEngine* engine, int my_rank,
                       const std::vector<ShmTransport::Member>& local, const Deadline& deadline,
                       std::unique_ptr<CudaIpcTransport>* out);
  ~CudaIpcTransport() override;

  const char* name() const override { return "cuda_ipc"; }
  bool CanConnect(int peer) const override;
  // Exchanges the slots' records with the peer over the control link and maps the
  // peer's; both ranks must call it, and it waits for the peer's call. Connect every
  // peer eagerly in increasing rank order (Communicator::EnableDeviceLinks does): left
  // to an algorithm's lazy LinkTable::Get, a ring's ranks would wait for each other in
  // a cycle.
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;
  void PublishFailure(const Status& failure) override;

 private:
  CudaIpcTransport() = default;

  Options options_;
  DeviceEngine* engine_ = nullptr;
  std::vector<ShmTransport::Member> local_;
  std::unique_ptr<ShmTransport> control_;
  int busy_fd_ = -1;  // always readable: "do not sleep, device work is in flight"
};

// The plugin (transport/plugin.h): the card is a segment name of its own that the
// control segments are named after; no host transport; the device transport reaches the
// other ranks of this host. Its settings that every rank must agree on (base/settings.h)
// are TESSERA_CUDA_IPC_SLOTS and TESSERA_CUDA_IPC_SLOT_BYTES: the receiver's slots are
// what the sender writes into, so their count and size must match.
Status OpenCudaIpcTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
