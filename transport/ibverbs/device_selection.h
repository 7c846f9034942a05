// Which RDMA device, port and GID a rank uses, decided from a description of the host's
// devices (what verbs_device.cc discovers, or a fake list in tests). Pure: no verbs
// calls here, only the rules:
//
// - A port is usable when it is ACTIVE and addressable: a LID on InfiniBand, a chosen
//   GID on Ethernet (RoCE).
// - GID: InfiniBand uses its first valid GID (index 0, the port GUID). RoCE prefers a
//   RoCE v2 GID holding an IPv4-mapped address (routable, what RoCE fabrics are set up
//   for), then other RoCE v2 GIDs (global IPv6 before link-local), then RoCE v1.
// - Device filter (a setting, like NCCL_IB_HCA): "mlx5_0,mlx5_2:1" keeps those
//   devices (optionally one port); empty keeps all.
// - Locality: among the usable ports, those whose device sits on the rank's NUMA node
//   win; if there are several, ranks spread over them by `spread_index` (e.g. the
//   rank's index among the local ranks on that node), so two ranks do not share a NIC
//   while another is idle.
#ifndef TESSERA_TRANSPORT_IBVERBS_DEVICE_SELECTION_H_
#define TESSERA_TRANSPORT_IBVERBS_DEVICE_SELECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/ibverbs/wire_format.h"

namespace tessera {
namespace ibverbs {

enum class GidType { kInfiniBand, kRoceV1, kRoceV2 };

struct GidEntry {
  int index = 0;
  Gid gid{};
  GidType type = GidType::kInfiniBand;
};

struct PortInfo {
  int port = 1;         // physical port number, from 1
  bool active = false;  // IBV_PORT_ACTIVE
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  uint16_t lid = 0;
  uint8_t active_mtu = 3;      // enum ibv_mtu
  std::vector<GidEntry> gids;  // valid (non-zero) entries of the GID table
};

struct DeviceInfo {
  std::string name;    // "mlx5_0"
  int numa_node = -1;  // -1: unknown or not a NUMA machine
  std::vector<PortInfo> ports;
};

// The index of the GID to use, or -1 if none fits the link layer.
int SelectGidIndex(const std::vector<GidEntry>& gids, LinkLayer layer);

// One entry of a device filter: a device name and, optionally, a port (0 = any).
struct DeviceFilterEntry {
  std::string device;
  int port = 0;
};

// Parses "mlx5_0,mlx5_2:1". InvalidArgument for an empty name or a bad port.
Status ParseDeviceFilter(const std::string& text, std::vector<DeviceFilterEntry>* out);

struct SelectionRequest {
  std::vector<DeviceFilterEntry> filter;  // empty: every device
  int numa_node = -1;                     // the rank's NUMA node; -1: unknown
  int spread_index = 0;                   // >= 0
  int forced_gid_index = -1;              // >= 0: use this GID index instead of choosing
};

struct DeviceChoice {
  size_t device = 0;   // index into the device list
  size_t port = 0;     // index into that device's ports
  int gid_index = -1;  // -1 only on InfiniBand without any valid GID (LID routing works)
  bool numa_local = false;
};

// Picks a port per the rules above. SystemError starting with "no RDMA device" (see
// IsNoRdmaDevice) when nothing usable is found, listing what was seen and why each
// port was refused.
Status SelectDevicePort(const std::vector<DeviceInfo>& devices, const SelectionRequest& request, DeviceChoice* out);

// The start of every "there is nothing to use" status, which makes the caller fall back
// to the next transport quietly; anything else is worth a warning.
constexpr char kNoRdmaDevice[] = "no RDMA device";
Status NoRdmaDevice(const std::string& detail);  // SystemError "no RDMA device: <detail>"
bool IsNoRdmaDevice(const Status& status);

// The NUMA node of the CPU this thread runs on (getcpu), -1 if unknown. Meaningful when
// the rank is bound to one node's cores, as launchers usually do.
int CurrentNumaNode();

std::string FormatGid(const Gid& gid);  // "fe80:0000:...": eight groups of four hex digits

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_DEVICE_SELECTION_H_
