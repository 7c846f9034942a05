// The RDMA device a rank uses: discovery of the host's devices and ports through
// libibverbs (ibv_get_device_list, ibv_query_device, ibv_query_port, the GID table),
// each device's NUMA node from sysfs, the choice of device_selection.h, and the opened
// device with its protection domain, shared by an IbverbsTransport and its links.
//
// On a host without RDMA (no kernel support, no device, no active port) discovery
// returns the "no RDMA device" SystemError (IsNoRdmaDevice), so the caller falls back
// to another transport. That is the only part of this file that runs on the build
// machine; the rest is compiled but needs a device (see docs/ibverbs.md).
#ifndef TESSERA_TRANSPORT_IBVERBS_VERBS_DEVICE_H_
#define TESSERA_TRANSPORT_IBVERBS_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/ibverbs/device_selection.h"

namespace tessera {
namespace ibverbs {

// Describes every RDMA device of this host with its ports and their valid GIDs
// (opening each device briefly). `sysfs_root` is "/sys" except in tests. Fails with
// NoRdmaDevice when the host has no RDMA support or no device.
Status DiscoverRdmaDevices(const std::string& sysfs_root, std::vector<DeviceInfo>* out);

// An opened device, its protection domain and the port this rank uses. Owned jointly
// by the transport and its links (shared_ptr), so it is closed after the last of them.
class VerbsDevice {
 public:
  // Discovers, selects (device_selection.h) and opens. Fails like DiscoverRdmaDevices,
  // or with the NoRdmaDevice of SelectDevicePort, or SystemError naming the verbs call.
  static Status Open(const SelectionRequest& request, std::shared_ptr<VerbsDevice>* out);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return info_.name; }
  const PortInfo& port() const { return port_; }
  LinkLayer link_layer() const { return port_.link_layer; }
  int gid_index() const { return gid_index_; }  // -1: none (InfiniBand by LID only)
  const Gid& gid() const { return gid_; }       // zero when gid_index is -1
  // For logs: "mlx5_0:1 InfiniBand lid 7 mtu 4096 gid[0] fe80:... numa 1 (local to the rank)".
  std::string Describe() const;

 private:
  VerbsDevice() = default;

  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  DeviceInfo info_;
  PortInfo port_;
  int gid_index_ = -1;
  Gid gid_{};
  bool numa_local_ = false;
};

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_VERBS_DEVICE_H_
