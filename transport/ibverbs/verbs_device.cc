#include "transport/ibverbs/verbs_device.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "topology/host_topology.h"

namespace tessera {
namespace ibverbs {
namespace {

// Closes a device opened for discovery on every path.
struct ContextCloser {
  ibv_context* context;
  ~ContextCloser() {
    if (context != nullptr) ibv_close_device(context);
  }
};

GidType FromVerbsGidType(uint32_t type, LinkLayer layer) {
  if (type == IBV_GID_TYPE_ROCE_V2) return GidType::kRoceV2;
  if (type == IBV_GID_TYPE_ROCE_V1) return GidType::kRoceV1;
  return layer == LinkLayer::kEthernet ? GidType::kRoceV1 : GidType::kInfiniBand;
}

bool IsZero(const Gid& g) {
  for (uint8_t b : g) {
    if (b != 0) return false;
  }
  return true;
}

// Older kernels lack the GID table query: read the entries one by one and their type
// from sysfs ("RoCE v2" or "IB/RoCE v1").
void ReadGidsOneByOne(ibv_context* ctx, const std::string& sysfs_root, const std::string& device, int port_num,
                      int table_len, LinkLayer layer, std::vector<GidEntry>* out) {
  for (int i = 0; i < table_len && i < 256; ++i) {
    ibv_gid gid;
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port_num), i, &gid) != 0) continue;
    GidEntry e;
    e.index = i;
    std::memcpy(e.gid.data(), gid.raw, e.gid.size());
    if (IsZero(e.gid)) continue;
    std::ifstream type_file(sysfs_root + "/class/infiniband/" + device + "/ports/" + std::to_string(port_num) +
                            "/gid_attrs/types/" + std::to_string(i));
    std::string type;
    std::getline(type_file, type);
    e.type = type.find("v2") != std::string::npos ? GidType::kRoceV2
             : layer == LinkLayer::kEthernet      ? GidType::kRoceV1
                                                  : GidType::kInfiniBand;
    out->push_back(e);
  }
}

Status DescribeDevice(ibv_device* dev, const std::string& sysfs_root, DeviceInfo* out) {
  out->name = ibv_get_device_name(dev);
  ContextCloser ctx{ibv_open_device(dev)};
  if (ctx.context == nullptr) return ErrnoError("ibv_open_device(" + out->name + ")", errno);
  ibv_device_attr attr;
  if (int rc = ibv_query_device(ctx.context, &attr)) return ErrnoError("ibv_query_device(" + out->name + ")", rc);

  std::vector<ibv_port_attr> ports(attr.phys_port_cnt);
  size_t gid_slots = 0;
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    if (int rc = ibv_query_port(ctx.context, static_cast<uint8_t>(p), &ports[p - 1])) {
      return ErrnoError("ibv_query_port(" + out->name + ":" + std::to_string(p) + ")", rc);
    }
    gid_slots += static_cast<size_t>(ports[p - 1].gid_tbl_len);
  }
  // The whole GID table at once, with each entry's type (rdma-core 31 and later).
  std::vector<ibv_gid_entry> table(gid_slots);
  const ssize_t listed = gid_slots == 0 ? 0 : ibv_query_gid_table(ctx.context, table.data(), table.size(), 0);

  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    const ibv_port_attr& pa = ports[p - 1];
    PortInfo port;
    port.port = p;
    port.active = pa.state == IBV_PORT_ACTIVE;
    port.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet : LinkLayer::kInfiniBand;
    port.lid = pa.lid;
    port.active_mtu = static_cast<uint8_t>(pa.active_mtu);
    if (listed >= 0) {
      for (ssize_t i = 0; i < listed; ++i) {
        if (table[i].port_num != static_cast<uint32_t>(p)) continue;
        GidEntry e;
        e.index = static_cast<int>(table[i].gid_index);
        std::memcpy(e.gid.data(), table[i].gid.raw, e.gid.size());
        e.type = FromVerbsGidType(table[i].gid_type, port.link_layer);
        if (!IsZero(e.gid)) port.gids.push_back(e);
      }
    } else {
      ReadGidsOneByOne(ctx.context, sysfs_root, out->name, p, pa.gid_tbl_len, port.link_layer, &port.gids);
    }
    out->ports.push_back(port);
  }
  return Status::Ok();
}

}  // namespace

Status DiscoverRdmaDevices(const std::string& sysfs_root, std::vector<DeviceInfo>* out) {
  out->clear();
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    const int err = errno;
    if (err == ENOSYS) return NoRdmaDevice("this kernel has no RDMA support (ibv_get_device_list: ENOSYS)");
    return NoRdmaDevice(std::string("ibv_get_device_list failed: ") + std::strerror(err));
  }
  // A device that cannot be opened or queried (permissions, a driver in trouble) is
  // left out; only if every device fails is that the answer.
  std::string failures;
  for (int i = 0; i < count; ++i) {
    DeviceInfo info;
    Status s = DescribeDevice(list[i], sysfs_root, &info);
    if (s.ok()) {
      out->push_back(std::move(info));
    } else {
      failures += (failures.empty() ? "" : "; ") + s.message();
    }
  }
  ibv_free_device_list(list);
  if (count == 0) return NoRdmaDevice("ibv_get_device_list found no device");
  if (out->empty()) return NoRdmaDevice("no device could be queried (" + failures + ")");
  return Status::Ok();
}

Status VerbsDevice::Open(const SelectionRequest& request, std::shared_ptr<VerbsDevice>* out) {
  std::vector<DeviceInfo> devices;
  TESSERA_RETURN_IF_ERROR(DiscoverRdmaDevices("/sys", &devices));
  // Which NUMA node each device is local to, from the host's topology (hwloc): the
  // selection prefers the rank's node. Unknown (-1) when hwloc cannot tell.
  HostTopology topology;
  if (DetectHostTopology(&topology).ok()) {
    for (DeviceInfo& d : devices) d.numa_node = DeviceNumaNode(topology, d.name);
  }
  DeviceChoice choice;
  TESSERA_RETURN_IF_ERROR(SelectDevicePort(devices, request, &choice));

  std::shared_ptr<VerbsDevice> d(new VerbsDevice());
  d->info_ = devices[choice.device];
  d->port_ = d->info_.ports[choice.port];
  d->gid_index_ = choice.gid_index;
  d->numa_local_ = choice.numa_local;
  for (const GidEntry& e : d->port_.gids) {
    if (e.index == d->gid_index_) d->gid_ = e.gid;
  }

  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return ErrnoError("ibv_get_device_list", errno);
  for (int i = 0; i < count; ++i) {
    if (d->info_.name == ibv_get_device_name(list[i])) {
      d->context_ = ibv_open_device(list[i]);
      break;
    }
  }
  const int open_errno = errno;
  ibv_free_device_list(list);
  if (d->context_ == nullptr) return ErrnoError("ibv_open_device(" + d->info_.name + ")", open_errno);
  d->pd_ = ibv_alloc_pd(d->context_);
  if (d->pd_ == nullptr) return ErrnoError("ibv_alloc_pd(" + d->info_.name + ")", errno);
  *out = std::move(d);
  return Status::Ok();
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (context_ != nullptr) ibv_close_device(context_);
}

std::string VerbsDevice::Describe() const {
  static const int kMtuBytes[] = {0, 256, 512, 1024, 2048, 4096};
  std::string s = info_.name + ":" + std::to_string(port_.port) + " " + LinkLayerName(port_.link_layer);
  if (port_.link_layer == LinkLayer::kInfiniBand) s += " lid " + std::to_string(port_.lid);
  if (port_.active_mtu >= 1 && port_.active_mtu <= 5) s += " mtu " + std::to_string(kMtuBytes[port_.active_mtu]);
  if (gid_index_ >= 0) s += " gid[" + std::to_string(gid_index_) + "] " + FormatGid(gid_);
  s += " numa " + std::to_string(info_.numa_node);
  if (numa_local_) s += " (local to the rank)";
  return s;
}

}  // namespace ibverbs
}  // namespace tessera
