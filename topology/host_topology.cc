// Host topology through hwloc: load a topology (detected, XML or synthetic), then read
// counts, NUMA nodes and the PCI devices of interest with their locality out of it.
#include "topology/host_topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tessera {
namespace {

// Owns one hwloc topology for the duration of a detection.
class HwlocTopology {
 public:
  HwlocTopology() = default;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() {
    if (initialised_) hwloc_topology_destroy(topology_);
  }

  Status Init() {
    if (hwloc_topology_init(&topology_) != 0) return ErrnoError("hwloc_topology_init", errno);
    initialised_ = true;
    return Status::Ok();
  }
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
  bool initialised_ = false;
};

// An hwloc bitmap as a list string ("0-3,8"); "" for a null or empty bitmap.
std::string BitmapList(hwloc_const_bitmap_t bitmap) {
  if (bitmap == nullptr || hwloc_bitmap_iszero(bitmap)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bitmap) < 0 || text == nullptr) return "";
  std::string list = text;
  std::free(text);
  return list;
}

std::string PciBusId(const hwloc_obj_t device) {
  const auto& pci = device->attr->pcidev;
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci.domain),
                static_cast<unsigned>(pci.bus), static_cast<unsigned>(pci.dev),
                static_cast<unsigned>(pci.func));
  return text;
}

PciDevice ReadPciDevice(hwloc_topology_t topology, hwloc_obj_t device, PciDeviceKind kind) {
  PciDevice out;
  out.kind = kind;
  out.bus_id = PciBusId(device);
  out.vendor_id = device->attr->pcidev.vendor_id;
  out.device_id = device->attr->pcidev.device_id;
  out.class_id = device->attr->pcidev.class_id;
  for (hwloc_obj_t child = device->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type == HWLOC_OBJ_OS_DEVICE && child->name != nullptr) out.os_names.push_back(child->name);
  }
  // A PCI device's locality is that of its first non-I/O ancestor (a package, a NUMA
  // group, or the whole machine).
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, device);
  if (ancestor != nullptr) {
    if (ancestor->nodeset != nullptr) {
      for (int node = hwloc_bitmap_first(ancestor->nodeset); node >= 0;
           node = hwloc_bitmap_next(ancestor->nodeset, node)) {
        out.numa_nodes.push_back(node);
      }
    }
    out.local_cpus = BitmapList(ancestor->cpuset);
  }
  return out;
}

Status LoadTopology(const TopologySource& source, HwlocTopology* topology) {
  TESSERA_RETURN_IF_ERROR(topology->Init());
  hwloc_topology_t t = topology->get();
  if (hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    return ErrnoError("hwloc_topology_set_io_types_filter", errno);
  }
  switch (source.kind) {
    case TopologySource::Kind::kThisHost:
      break;
    case TopologySource::Kind::kXmlFile:
      if (hwloc_topology_set_xml(t, source.text.c_str()) != 0) {
        return InvalidArgument("hwloc cannot use XML file '" + source.text + "': " + std::strerror(errno));
      }
      break;
    case TopologySource::Kind::kSynthetic:
      if (hwloc_topology_set_synthetic(t, source.text.c_str()) != 0) {
        return InvalidArgument("hwloc refuses synthetic description '" + source.text + "'");
      }
      break;
  }
  if (hwloc_topology_load(t) != 0) {
    const int error = errno;
    if (source.kind == TopologySource::Kind::kThisHost) return ErrnoError("hwloc_topology_load", error);
    return InvalidArgument("hwloc cannot load topology from '" + source.text + "': " + std::strerror(error));
  }
  return Status::Ok();
}

}  // namespace

PciDeviceKind ClassifyPciDevice(uint16_t vendor_id, uint16_t class_id) {
  constexpr uint16_t kNvidia = 0x10de;
  constexpr uint16_t kVgaController = 0x0300;
  constexpr uint16_t k3dController = 0x0302;
  constexpr uint16_t kNetworkBaseClass = 0x02;
  if (vendor_id == kNvidia && (class_id == kVgaController || class_id == k3dController)) return PciDeviceKind::kGpu;
  if ((class_id >> 8) == kNetworkBaseClass) return PciDeviceKind::kNic;
  return PciDeviceKind::kOther;
}

const char* PciDeviceKindName(PciDeviceKind kind) {
  switch (kind) {
    case PciDeviceKind::kGpu: return "gpu";
    case PciDeviceKind::kNic: return "nic";
    case PciDeviceKind::kOther: return "other";
  }
  return "other";
}

Status DetectHostTopology(const TopologySource& source, HostTopology* out) {
  HwlocTopology topology;
  Status loaded = LoadTopology(source, &topology);
  if (!loaded.ok()) return loaded.Annotate("detecting host topology");
  hwloc_topology_t t = topology.get();

  HostTopology result;
  result.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  result.numa_node_count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  result.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  result.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); node != nullptr;
       node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)) {
    NumaNode numa;
    numa.os_index = static_cast<int>(node->os_index);
    numa.memory_bytes = node->attr->numanode.local_memory;
    numa.cpus = BitmapList(node->cpuset);
    result.numa_nodes.push_back(numa);
  }
  for (hwloc_obj_t device = hwloc_get_next_pcidev(t, nullptr); device != nullptr;
       device = hwloc_get_next_pcidev(t, device)) {
    const PciDeviceKind kind = ClassifyPciDevice(device->attr->pcidev.vendor_id, device->attr->pcidev.class_id);
    if (kind == PciDeviceKind::kGpu) result.gpus.push_back(ReadPciDevice(t, device, kind));
    if (kind == PciDeviceKind::kNic) result.nics.push_back(ReadPciDevice(t, device, kind));
  }
  *out = std::move(result);
  return Status::Ok();
}

std::string FormatHostTopology(const HostTopology& topology) {
  std::ostringstream text;
  text << "packages " << topology.packages << "\n";
  text << "numa_nodes " << topology.numa_node_count << "\n";
  text << "cores " << topology.cores << "\n";
  text << "pus " << topology.pus << "\n";
  for (const NumaNode& node : topology.numa_nodes) {
    text << "numa " << node.os_index << " memory_mib " << (node.memory_bytes >> 20) << " cpus "
         << (node.cpus.empty() ? "-" : node.cpus) << "\n";
  }
  auto write_device = [&text](const PciDevice& device) {
    char ids[64];
    std::snprintf(ids, sizeof(ids), " id %04x:%04x class %04x", static_cast<unsigned>(device.vendor_id),
                  static_cast<unsigned>(device.device_id), static_cast<unsigned>(device.class_id));
    text << PciDeviceKindName(device.kind) << " " << device.bus_id << ids << " numa ";
    if (device.numa_nodes.empty()) text << "-";
    for (size_t i = 0; i < device.numa_nodes.size(); ++i) text << (i ? "," : "") << device.numa_nodes[i];
    text << " cpus " << (device.local_cpus.empty() ? "-" : device.local_cpus) << " os";
    if (device.os_names.empty()) text << " -";
    for (const std::string& name : device.os_names) text << " " << name;
    text << "\n";
  };
  for (const PciDevice& gpu : topology.gpus) write_device(gpu);
  for (const PciDevice& nic : topology.nics) write_device(nic);
  return text.str();
}

int DeviceNumaNode(const HostTopology& topology, const std::string& os_name) {
  for (const std::vector<PciDevice>* devices : {&topology.nics, &topology.gpus}) {
    for (const PciDevice& d : *devices) {
      if (std::find(d.os_names.begin(), d.os_names.end(), os_name) == d.os_names.end()) continue;
      return d.numa_nodes.size() == 1 ? d.numa_nodes[0] : -1;
    }
  }
  return -1;
}

}  // namespace tessera
