// ibverbs transport: links over InfiniBand or RoCE with libibverbs (rdma-core), one
// reliable-connected queue pair per peer, data by RDMA WRITE WITH IMMEDIATE into the
// peer's registered ring of slots with credit-based flow control (ibverbs_link.h).
//
// Life of a transport:
// 1. Create opens the RDMA device that suits this rank (device_selection.h: an active
//    port, the rank's NUMA node, the device filter) or answers "no RDMA device"
//    (IsNoRdmaDevice), in which case the caller goes on without ibverbs.
// 2. summary() is published at the rendezvous; SetPeerSummaries gives every rank's, so
//    CanConnect is true exactly for the peers that can also reach this rank by RDMA
//    (both ranks must pick the same transport for their pair), and the PeerExchange
//    to set connections up with (transport/plugin.h; the link table's TCP links).
// 3. Connect, on both ranks of a pair, creates the queue pair and swaps connection data
//    through that PeerExchange: first the ConnectionInfo (80 bytes), then, once both queue pairs are
//    ready to send (RTS), an 8-byte readiness marker, so no write reaches a queue pair
//    not yet ready to receive it.
//
// GPUDirect RDMA: Create also asks whether this rank could register GPU memory with its
// NIC (a CUDA driver that sees a GPU, and dma-buf or the peer-memory module) and says so
// in its summary. When every rank says so (gpu_direct_everywhere), CreateDeviceTransport
// makes a sibling transport on the same device whose links keep messages in GPU memory
// (ibverbs_link.h, GPUDirect mode): the transport of device-resident calls across hosts.
//
// Failure notices (PublishFailure) are RDMA writes into each linked peer's notice area;
// a peer's notice surfaces from CheckNotices as "rank N failed: <reason>".
//
// One thread at a time (the communicator's), like every transport.
#ifndef TESSERA_TRANSPORT_IBVERBS_IBVERBS_TRANSPORT_H_
#define TESSERA_TRANSPORT_IBVERBS_IBVERBS_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "device/device_engine.h"
#include "transport/plugin.h"
#include "transport/transport.h"

namespace tessera {

namespace ibverbs {
struct SharedState;
struct RankSummary;
}  // namespace ibverbs

class IbverbsTransport : public Transport {
 public:
  // The tunables' defaults are the settings table's rows (TESSERA_IB_*), whose
  // meanings say more.
  struct Options {
    std::string device_filter;  // "mlx5_0,mlx5_1:1"; empty: any device
    int gid_index = SettingDefaults::ib_gid_index;  // -1: chosen per port (RoCE v2 with IPv4 first)
    int numa_node = -1;          // the rank's NUMA node; -1: the node of the CPU calling Create
    int spread_index = 0;        // spreads ranks over equally close devices (e.g. the local rank)
    int64_t slots = SettingDefaults::ib_slots;              // ring slots per link and direction: 1..128, a power of two
    int64_t slot_bytes = SettingDefaults::ib_slot_bytes;    // 4 KiB .. 4 MiB, a multiple of 64
    int64_t timeout = SettingDefaults::ib_timeout;          // ACK timeout exponent: 4.096 us * 2^timeout per try (1..31)
    int64_t retry_count = SettingDefaults::ib_retry_count;  // tries before a silent peer is declared gone (0..7)
    int64_t service_level = SettingDefaults::ib_sl;         // InfiniBand service level (0..15)
    int64_t traffic_class = SettingDefaults::ib_tc;         // RoCE traffic class (0..255)
    // Register any user buffer for zero-copy sends (kept in the registration cache).
    // Safe only if no cached buffer is freed while the transport lives: see
    // docs/ibverbs.md. Off: buffers go through the staging ring unless registered with
    // RegisterBuffer.
    bool register_user_buffers = SettingDefaults::ib_register_user_buffers != 0;
    int64_t cache_entries = SettingDefaults::ib_cache_entries;  // registration cache bounds
    int64_t cache_bytes = SettingDefaults::ib_cache_bytes;
  };

  // Opens the device and prepares the transport. Fails with:
  // - the "no RDMA device" SystemError (IsNoRdmaDevice) on a host without RDMA, so the
  //   caller uses the next transport without a warning;
  // - InvalidArgument for options out of range;
  // - SystemError naming the verbs call for a device that is present but unusable.
  static Status Create(const Options& options, int my_rank, int nranks, std::unique_ptr<IbverbsTransport>* out);
  ~IbverbsTransport() override;

  // InvalidArgument naming the first option out of range (Create checks this first).
  static Status CheckOptions(const Options& options);

  // Whether `status` is the quiet "no RDMA device" answer of Create.
  static bool IsNoRdmaDevice(const Status& status);

  // This rank's summary (16 bytes) for the rendezvous.
  const std::string& summary() const { return summary_; }
  // Every rank's summary, by rank (empty: that rank has no ibverbs), and how to swap
  // connection data with a peer (it must outlive the transport). InvalidArgument naming
  // the rank if one is malformed or of another version, or without an exchange. Call
  // once, before the first Connect.
  Status SetPeerSummaries(const std::vector<std::string>& summaries, PeerExchange* exchange);

  // After SetPeerSummaries: whether every rank of the communicator (this one included)
  // published a summary that says GPUDirect RDMA and that is compatible with this
  // rank's. Every rank computes the same answer from the same summaries.
  bool gpu_direct_everywhere() const { return gpu_direct_everywhere_; }
  // Why this rank cannot do GPUDirect RDMA (OK if it can).
  const Status& gpu_direct_status() const { return gpu_direct_status_; }

  // A transport for device-resident calls: same device, registration cache and failure
  // notices as this one, with links in GPUDirect mode on `engine` (which must outlive
  // it and its links). Connect pairs up as this transport's does, and uses the same
  // PeerExchange. InvalidUsage unless gpu_direct_everywhere().
  Status CreateDeviceTransport(DeviceEngine* engine, std::unique_ptr<IbverbsTransport>* out);

  // The device in use, for logs: "mlx5_0:1 InfiniBand lid 7 mtu 4096 gid[0] ... numa 0".
  std::string Describe() const;

  // Explicit registration (ncclCommRegister): sends from [addr, addr + len) are
  // zero-copy until DeregisterBuffer(handle). Device memory is registered by GPUDirect
  // RDMA (the CUDA driver is loaded on first need); without a driver the answer is the
  // "no CUDA driver" SystemError. The buffer must stay allocated until deregistered.
  // Like every other call, from the thread that drives the communicator's exchanges.
  Status RegisterBuffer(const void* addr, size_t len, void** handle);
  Status DeregisterBuffer(void* handle);

  const char* name() const override { return "ibverbs"; }
  bool CanConnect(int peer) const override;
  Status Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) override;

  void PublishFailure(const Status& failure) override;
  void AddNoticeWaits(WaitSet* set) override;
  Status CheckNotices(int wait_ms) override;

 private:
  IbverbsTransport() = default;
  Status LoadCudaDriver();

  Options options_;
  int my_rank_ = -1;
  int nranks_ = 0;
  PeerExchange* exchange_ = nullptr;
  std::shared_ptr<ibverbs::SharedState> shared_;
  std::string summary_;
  std::vector<bool> reachable_;  // by rank, from the summaries
  bool cuda_tried_ = false;
  Status gpu_direct_status_;
  bool gpu_direct_everywhere_ = false;
  DeviceEngine* engine_ = nullptr;  // a device transport's (CreateDeviceTransport)
  Status cuda_status_;        // why there is no CUDA driver, once tried
  struct BufferRegistration;  // one RegisterBuffer; its address is the handle
  std::vector<std::unique_ptr<BufferRegistration>> registrations_;
};

// The plugin (transport/plugin.h): the card is the summary. Its settings that every rank
// must agree on (base/settings.h) are TESSERA_IB_SLOTS and TESSERA_IB_SLOT_BYTES: a
// ring's slots are the peer's receive buffer, so their count and size must match. In
// auto, a host without an RDMA device goes without ibverbs quietly. Device-resident
// calls: the GPUDirect sibling transport reaches the ranks of other hosts when every
// rank can do GPUDirect RDMA.
Status OpenIbverbsTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_IBVERBS_TRANSPORT_H_
