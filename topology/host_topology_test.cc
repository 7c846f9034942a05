// hwloc detection: on this machine (whatever it is: only facts every machine has are
// expected), on a synthetic machine, and on a hand-written XML machine with GPUs and
// NICs on two NUMA nodes (topology/testdata/), which is how the GPU and NIC paths are
// exercised on a build machine that has neither.
#include "topology/host_topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tessera {
namespace {

const char kTwoPackagesXml[] = "topology/testdata/two_packages_gpus_nics.xml";

TEST(HostTopology, DetectsThisHost) {
  HostTopology topology;
  Status status = DetectHostTopology(&topology);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_GE(topology.packages, 1);
  EXPECT_GE(topology.cores, 1);
  EXPECT_LE(topology.cores, topology.pus);
  EXPECT_GE(topology.numa_node_count, 1);
  EXPECT_EQ(static_cast<int>(topology.numa_nodes.size()), topology.numa_node_count);
  std::vector<int> numa_indexes;
  for (const NumaNode& node : topology.numa_nodes) numa_indexes.push_back(node.os_index);
  // Whatever devices there are (often none here), each is local to detected NUMA nodes.
  std::vector<PciDevice> devices = topology.gpus;
  devices.insert(devices.end(), topology.nics.begin(), topology.nics.end());
  for (const PciDevice& device : devices) {
    EXPECT_FALSE(device.numa_nodes.empty()) << device.bus_id;
    for (int node : device.numa_nodes) {
      EXPECT_NE(std::find(numa_indexes.begin(), numa_indexes.end(), node), numa_indexes.end())
          << device.bus_id << " is local to NUMA node " << node << ", which was not detected";
    }
  }
  for (const PciDevice& gpu : topology.gpus) EXPECT_EQ(gpu.kind, PciDeviceKind::kGpu);
  for (const PciDevice& nic : topology.nics) EXPECT_EQ(nic.kind, PciDeviceKind::kNic);
  const std::string dump = FormatHostTopology(topology);
  EXPECT_NE(dump.find("packages " + std::to_string(topology.packages) + "\n"), std::string::npos) << dump;
  EXPECT_NE(dump.find("pus " + std::to_string(topology.pus) + "\n"), std::string::npos) << dump;
}

TEST(HostTopology, ClassifiesPciDevicesByVendorAndClass) {
  EXPECT_EQ(ClassifyPciDevice(0x10de, 0x0302), PciDeviceKind::kGpu);  // NVIDIA 3D controller
  EXPECT_EQ(ClassifyPciDevice(0x10de, 0x0300), PciDeviceKind::kGpu);  // NVIDIA VGA
  EXPECT_EQ(ClassifyPciDevice(0x10de, 0x0403), PciDeviceKind::kOther);  // NVIDIA audio
  EXPECT_EQ(ClassifyPciDevice(0x1a03, 0x0300), PciDeviceKind::kOther);  // ASPEED VGA
  EXPECT_EQ(ClassifyPciDevice(0x15b3, 0x0207), PciDeviceKind::kNic);  // Mellanox InfiniBand
  EXPECT_EQ(ClassifyPciDevice(0x15b3, 0x0200), PciDeviceKind::kNic);  // Mellanox Ethernet
  EXPECT_EQ(ClassifyPciDevice(0x1af4, 0x0200), PciDeviceKind::kNic);  // virtio-net
  EXPECT_EQ(ClassifyPciDevice(0x8086, 0x0280), PciDeviceKind::kNic);  // other network
  EXPECT_EQ(ClassifyPciDevice(0x10de, 0x0207), PciDeviceKind::kNic);  // network wins over vendor
  EXPECT_EQ(ClassifyPciDevice(0x144d, 0x0108), PciDeviceKind::kOther);  // NVMe
  EXPECT_EQ(ClassifyPciDevice(0x8086, 0x0604), PciDeviceKind::kOther);  // PCI bridge
  EXPECT_STREQ(PciDeviceKindName(PciDeviceKind::kGpu), "gpu");
  EXPECT_STREQ(PciDeviceKindName(PciDeviceKind::kNic), "nic");
}

TEST(HostTopology, SyntheticMachine) {
  TopologySource source;
  source.kind = TopologySource::Kind::kSynthetic;
  source.text = "pack:2 numa:2 core:4 pu:2";
  HostTopology topology;
  Status status = DetectHostTopology(source, &topology);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(topology.packages, 2);
  EXPECT_EQ(topology.numa_node_count, 4);
  EXPECT_EQ(topology.cores, 16);
  EXPECT_EQ(topology.pus, 32);
  ASSERT_EQ(topology.numa_nodes.size(), 4u);
  EXPECT_EQ(topology.numa_nodes[1].os_index, 1);
  EXPECT_EQ(topology.numa_nodes[1].cpus, "8-15");
  EXPECT_TRUE(topology.gpus.empty());
  EXPECT_TRUE(topology.nics.empty());
}

TEST(HostTopology, RefusedDescriptionsAreInvalidArguments) {
  TopologySource source;
  source.kind = TopologySource::Kind::kSynthetic;
  source.text = "this is not a machine";
  HostTopology topology;
  topology.packages = 7;
  Status status = DetectHostTopology(source, &topology);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("this is not a machine"), std::string::npos) << status.message();
  EXPECT_EQ(topology.packages, 7);  // untouched on error

  source.kind = TopologySource::Kind::kXmlFile;
  source.text = "topology/testdata/no_such_file.xml";
  status = DetectHostTopology(source, &topology);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("no_such_file.xml"), std::string::npos) << status.message();
}

TEST(HostTopology, XmlMachineWithGpusAndNics) {
  TopologySource source;
  source.kind = TopologySource::Kind::kXmlFile;
  source.text = kTwoPackagesXml;
  HostTopology topology;
  Status status = DetectHostTopology(source, &topology);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(topology.packages, 2);
  EXPECT_EQ(topology.numa_node_count, 2);
  EXPECT_EQ(topology.cores, 4);
  EXPECT_EQ(topology.pus, 8);
  ASSERT_EQ(topology.numa_nodes.size(), 2u);
  EXPECT_EQ(topology.numa_nodes[0].cpus, "0-3");
  EXPECT_EQ(topology.numa_nodes[1].cpus, "4-7");
  EXPECT_EQ(topology.numa_nodes[1].memory_bytes, 64ull << 30);

  // The ASPEED VGA controller and the NVMe drive are not of interest.
  ASSERT_EQ(topology.gpus.size(), 2u);
  EXPECT_EQ(topology.gpus[0].bus_id, "0000:17:00.0");
  EXPECT_EQ(topology.gpus[0].vendor_id, 0x10de);
  EXPECT_EQ(topology.gpus[0].device_id, 0x20b0);
  EXPECT_EQ(topology.gpus[0].class_id, 0x0302);
  EXPECT_EQ(topology.gpus[0].numa_nodes, std::vector<int>{0});
  EXPECT_EQ(topology.gpus[0].local_cpus, "0-3");
  EXPECT_EQ(topology.gpus[1].bus_id, "0000:65:00.0");
  EXPECT_EQ(topology.gpus[1].numa_nodes, std::vector<int>{1});
  EXPECT_EQ(topology.gpus[1].local_cpus, "4-7");

  ASSERT_EQ(topology.nics.size(), 2u);
  const PciDevice* infiniband = nullptr;
  const PciDevice* ethernet = nullptr;
  for (const PciDevice& nic : topology.nics) {
    if (nic.class_id == 0x0207) infiniband = &nic;
    if (nic.class_id == 0x0200) ethernet = &nic;
  }
  ASSERT_NE(infiniband, nullptr);
  ASSERT_NE(ethernet, nullptr);
  EXPECT_EQ(infiniband->bus_id, "0000:18:00.0");
  EXPECT_EQ(infiniband->numa_nodes, std::vector<int>{0});
  EXPECT_EQ(infiniband->os_names, (std::vector<std::string>{"mlx5_0", "ib0"}));
  // A NIC that hangs off the whole machine is local to every NUMA node.
  EXPECT_EQ(ethernet->numa_nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(ethernet->local_cpus, "0-7");
  EXPECT_EQ(ethernet->os_names, std::vector<std::string>{"eth0"});

  const std::string dump = FormatHostTopology(topology);
  EXPECT_NE(dump.find("gpu 0000:65:00.0 id 10de:20b0 class 0302 numa 1 cpus 4-7 os card2\n"), std::string::npos)
      << dump;
  EXPECT_NE(dump.find("nic 0000:18:00.0 id 15b3:101b class 0207 numa 0 cpus 0-3 os mlx5_0 ib0\n"), std::string::npos)
      << dump;
  EXPECT_NE(dump.find("numa 1 memory_mib 65536 cpus 4-7\n"), std::string::npos) << dump;
}

// The NUMA node an RDMA device is chosen by (transport/ibverbs): one node, or unknown.
TEST(HostTopology, DeviceNumaNodeByOsName) {
  HostTopology topology;
  ASSERT_TRUE(DetectHostTopology({TopologySource::Kind::kXmlFile, kTwoPackagesXml}, &topology).ok());
  EXPECT_EQ(DeviceNumaNode(topology, "mlx5_0"), 0);
  EXPECT_EQ(DeviceNumaNode(topology, "ib0"), 0);
  EXPECT_EQ(DeviceNumaNode(topology, "card2"), 1);
  EXPECT_EQ(DeviceNumaNode(topology, "eth0"), -1);  // local to both nodes
  EXPECT_EQ(DeviceNumaNode(topology, "mlx5_9"), -1);
}

}  // namespace
}  // namespace tessera
