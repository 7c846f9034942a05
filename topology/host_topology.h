// What this host is made of, as hwloc sees it: packages, NUMA nodes, physical cores and
// hardware threads (PUs), and the PCI devices a collective library cares about (NVIDIA
// GPUs and network adapters), each with the NUMA node(s) it is attached to.
//
// The machine can also be described instead of detected: an hwloc XML file (what
// `lstopo foo.xml` writes on the machine you want to emulate) or an hwloc synthetic
// description ("pack:2 numa:1 core:4 pu:2"), so topology code runs here on the shape
// of a machine we are not on.
#ifndef TESSERA_TOPOLOGY_HOST_TOPOLOGY_H_
#define TESSERA_TOPOLOGY_HOST_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

// The PCI devices we look for.
enum class PciDeviceKind {
  kOther,  // not of interest (storage, bridges, other vendors' display controllers...)
  kGpu,    // NVIDIA (vendor 0x10de) VGA controller (class 0x0300) or 3D controller (0x0302)
  kNic,    // any network controller (class 0x02xx): Ethernet 0x0200, InfiniBand 0x0207...
};

// Pure: what a device with this PCI vendor id and 16-bit class id (base class << 8 |
// subclass, as hwloc and lspci report it) is to us.
PciDeviceKind ClassifyPciDevice(uint16_t vendor_id, uint16_t class_id);

const char* PciDeviceKindName(PciDeviceKind kind);  // "gpu", "nic", "other"

struct PciDevice {
  PciDeviceKind kind = PciDeviceKind::kOther;
  std::string bus_id;  // "dddd:bb:dd.f", e.g. "0000:00:03.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t class_id = 0;
  // Operating-system names of the device: network interfaces ("eth0"), InfiniBand
  // devices ("mlx5_0"), GPUs as the OS or CUDA names them ("card0", "cuda0"). May be
  // empty (no driver loaded, or described by an XML file that has none).
  std::vector<std::string> os_names;
  // OS indexes (P#) of the NUMA nodes this device is local to, ascending. On a machine
  // whose PCI bus hangs off the whole machine rather than one package, that is every
  // NUMA node. Never empty for a detected device.
  std::vector<int> numa_nodes;
  // OS indexes of the PUs (hardware threads) close to the device, as an hwloc list
  // string ("0-15,32-47"): where a rank driving the device would best be bound.
  std::string local_cpus;
};

struct NumaNode {
  int os_index = 0;            // P#
  uint64_t memory_bytes = 0;   // local memory, 0 if unknown
  std::string cpus;            // OS indexes of its PUs, as an hwloc list string
};

struct HostTopology {
  int packages = 0;
  int numa_node_count = 0;
  int cores = 0;  // physical cores
  int pus = 0;    // hardware threads (>= cores)
  std::vector<NumaNode> numa_nodes;  // in hwloc's logical order
  std::vector<PciDevice> gpus;       // in PCI bus order; may be empty
  std::vector<PciDevice> nics;       // in PCI bus order; may be empty
};

// Where the description of the host comes from.
struct TopologySource {
  enum class Kind { kThisHost, kXmlFile, kSynthetic };
  Kind kind = Kind::kThisHost;
  std::string text;  // kXmlFile: the file's path; kSynthetic: hwloc's description
};

// Fills `out` from hwloc. With kThisHost the host is detected (hwloc's own HWLOC_XMLFILE
// and HWLOC_SYNTHETIC environment variables, if set, still take over, as for any hwloc
// program). PCI and OS devices are kept with HWLOC_TYPE_FILTER_KEEP_IMPORTANT, so GPUs
// and NICs appear with their locality. Returns SystemError naming the hwloc call when
// hwloc fails, InvalidArgument when an XML file or synthetic description is refused.
// Takes tens of milliseconds on a real host: call it once, not per operation.
// Thread-safe (each call has its own hwloc topology).
Status DetectHostTopology(const TopologySource& source, HostTopology* out);

// Shorthand for detecting this host.
inline Status DetectHostTopology(HostTopology* out) { return DetectHostTopology(TopologySource(), out); }

// Pure: the NUMA node that the GPU or NIC with operating-system name `os_name` ("mlx5_0",
// "eth0", "cuda0") is local to, or -1 when no device has that name or it is local to
// several nodes (or none). What the ibverbs transport chooses its RDMA device by.
int DeviceNumaNode(const HostTopology& topology, const std::string& os_name);

// Pure: a plain-text dump, one fact per line, e.g.
//   packages 1
//   numa_nodes 1
//   cores 2
//   pus 2
//   numa 0 memory_mib 5722 cpus 0-1
//   gpu 0000:65:00.0 id 10de:20b0 class 0302 numa 0 cpus 0-15 os cuda0
//   nic 0000:00:03.0 id 1af4:1041 class 0200 numa 0 cpus 0-1 os eth0
std::string FormatHostTopology(const HostTopology& topology);

}  // namespace tessera

#endif  // TESSERA_TOPOLOGY_HOST_TOPOLOGY_H_
