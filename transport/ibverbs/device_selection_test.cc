// Device, port and GID choice on fake hosts: NUMA locality, spreading ranks over close
// devices, inactive and unaddressable ports, the device filter, RoCE GID preferences,
// the "no RDMA device" answer, and the NUMA node read from a fake sysfs tree.
#include "transport/ibverbs/device_selection.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

Gid MakeGid(std::initializer_list<uint8_t> head, std::initializer_list<uint8_t> tail = {}) {
  Gid g{};
  size_t i = 0;
  for (uint8_t b : head) g[i++] = b;
  i = 16 - tail.size();
  for (uint8_t b : tail) g[i++] = b;
  return g;
}

const Gid kIbGid = MakeGid({0xfe, 0x80}, {0x00, 0x02, 0xc9, 0x03, 0x00, 0x12, 0x34, 0x56});
const Gid kIpv4Mapped = MakeGid({}, {0xff, 0xff, 10, 0, 0, 7});
const Gid kLinkLocal = MakeGid({0xfe, 0x80}, {0x12, 0x34});
const Gid kGlobalV6 = MakeGid({0x20, 0x01, 0x0d, 0xb8}, {0x01});

PortInfo IbPort(int port, bool active, uint16_t lid) {
  PortInfo p;
  p.port = port;
  p.active = active;
  p.link_layer = LinkLayer::kInfiniBand;
  p.lid = lid;
  p.active_mtu = 5;
  p.gids = {GidEntry{0, kIbGid, GidType::kInfiniBand}};
  return p;
}

PortInfo RocePort(int port, std::vector<GidEntry> gids) {
  PortInfo p;
  p.port = port;
  p.active = true;
  p.link_layer = LinkLayer::kEthernet;
  p.active_mtu = 3;
  p.gids = std::move(gids);
  return p;
}

DeviceInfo Device(const std::string& name, int numa, std::vector<PortInfo> ports) {
  DeviceInfo d;
  d.name = name;
  d.numa_node = numa;
  d.ports = std::move(ports);
  return d;
}

// Two sockets, two HCAs each (a DGX-like host).
std::vector<DeviceInfo> TwoSocketHost() {
  return {Device("mlx5_0", 0, {IbPort(1, true, 1)}), Device("mlx5_1", 0, {IbPort(1, true, 2)}),
          Device("mlx5_2", 1, {IbPort(1, true, 3)}), Device("mlx5_3", 1, {IbPort(1, true, 4)})};
}

std::string Chosen(const std::vector<DeviceInfo>& devices, const SelectionRequest& request) {
  DeviceChoice c;
  Status s = SelectDevicePort(devices, request, &c);
  if (!s.ok()) return s.ToString();
  return devices[c.device].name + ":" + std::to_string(devices[c.device].ports[c.port].port);
}

TEST(DeviceSelectionTest, PrefersDevicesOnTheRanksNumaNodeAndSpreadsOverThem) {
  const auto host = TwoSocketHost();
  SelectionRequest r;
  r.numa_node = 1;
  r.spread_index = 0;
  EXPECT_EQ(Chosen(host, r), "mlx5_2:1");
  r.spread_index = 1;
  EXPECT_EQ(Chosen(host, r), "mlx5_3:1");
  r.spread_index = 2;
  EXPECT_EQ(Chosen(host, r), "mlx5_2:1");
  r.numa_node = 0;
  r.spread_index = 1;
  EXPECT_EQ(Chosen(host, r), "mlx5_1:1");
  DeviceChoice c;
  ASSERT_TRUE(SelectDevicePort(host, r, &c).ok());
  EXPECT_TRUE(c.numa_local);
  EXPECT_EQ(c.gid_index, 0);
}

TEST(DeviceSelectionTest, FallsBackToAnyDeviceWhenNoneIsLocal) {
  const auto host = TwoSocketHost();
  SelectionRequest r;
  r.numa_node = 5;  // no device there
  r.spread_index = 3;
  EXPECT_EQ(Chosen(host, r), "mlx5_3:1");
  DeviceChoice c;
  ASSERT_TRUE(SelectDevicePort(host, r, &c).ok());
  EXPECT_FALSE(c.numa_local);
  r.numa_node = -1;  // unknown
  r.spread_index = 0;
  EXPECT_EQ(Chosen(host, r), "mlx5_0:1");
}

TEST(DeviceSelectionTest, SkipsInactivePortsAndPortsWithoutLid) {
  std::vector<DeviceInfo> host = {Device("mlx5_0", 0, {IbPort(1, false, 1), IbPort(2, true, 0)}),
                                  Device("mlx5_1", 1, {IbPort(1, true, 9)})};
  SelectionRequest r;
  r.numa_node = 0;  // the local device is unusable: the remote one is chosen
  EXPECT_EQ(Chosen(host, r), "mlx5_1:1");
}

TEST(DeviceSelectionTest, FilterKeepsNamedDevicesAndPorts) {
  std::vector<DeviceInfo> host = {Device("mlx5_0", 0, {IbPort(1, true, 1), IbPort(2, true, 2)}),
                                  Device("mlx5_1", 0, {IbPort(1, true, 3)})};
  SelectionRequest r;
  ASSERT_TRUE(ParseDeviceFilter("mlx5_0:2", &r.filter).ok());
  EXPECT_EQ(Chosen(host, r), "mlx5_0:2");
  ASSERT_TRUE(ParseDeviceFilter("mlx5_1", &r.filter).ok());
  EXPECT_EQ(Chosen(host, r), "mlx5_1:1");
  ASSERT_TRUE(ParseDeviceFilter("mlx5_9", &r.filter).ok());
  DeviceChoice c;
  Status s = SelectDevicePort(host, r, &c);
  EXPECT_TRUE(IsNoRdmaDevice(s)) << s.ToString();
  EXPECT_NE(s.message().find("mlx5_0:1 excluded by the device filter"), std::string::npos) << s.message();
}

TEST(DeviceSelectionTest, ParsesFilters) {
  std::vector<DeviceFilterEntry> f;
  ASSERT_TRUE(ParseDeviceFilter("mlx5_0,mlx5_2:1", &f).ok());
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].device, "mlx5_0");
  EXPECT_EQ(f[0].port, 0);
  EXPECT_EQ(f[1].device, "mlx5_2");
  EXPECT_EQ(f[1].port, 1);
  ASSERT_TRUE(ParseDeviceFilter("", &f).ok());
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(ParseDeviceFilter("mlx5_0:", &f).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseDeviceFilter("mlx5_0:x", &f).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseDeviceFilter(":1", &f).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseDeviceFilter("a,,b", &f).code(), Code::kInvalidArgument);
}

TEST(DeviceSelectionTest, RoceGidPreferences) {
  const std::vector<GidEntry> gids = {{0, kLinkLocal, GidType::kRoceV1},  {1, kLinkLocal, GidType::kRoceV2},
                                      {2, kGlobalV6, GidType::kRoceV1},   {3, kGlobalV6, GidType::kRoceV2},
                                      {4, kIpv4Mapped, GidType::kRoceV1}, {5, kIpv4Mapped, GidType::kRoceV2}};
  EXPECT_EQ(SelectGidIndex(gids, LinkLayer::kEthernet), 5);  // RoCE v2, IPv4
  std::vector<GidEntry> no_ipv4(gids.begin(), gids.begin() + 4);
  EXPECT_EQ(SelectGidIndex(no_ipv4, LinkLayer::kEthernet), 3);  // RoCE v2, global IPv6
  std::vector<GidEntry> link_local(gids.begin(), gids.begin() + 2);
  EXPECT_EQ(SelectGidIndex(link_local, LinkLayer::kEthernet), 1);  // RoCE v2 link-local
  std::vector<GidEntry> v1_only = {gids[0], gids[2]};
  EXPECT_EQ(SelectGidIndex(v1_only, LinkLayer::kEthernet), 0);  // lowest RoCE v1
  EXPECT_EQ(SelectGidIndex({}, LinkLayer::kEthernet), -1);
  // InfiniBand takes its IB GID and ignores RoCE entries.
  EXPECT_EQ(SelectGidIndex({{0, kIbGid, GidType::kInfiniBand}}, LinkLayer::kInfiniBand), 0);
  EXPECT_EQ(SelectGidIndex(v1_only, LinkLayer::kInfiniBand), -1);
}

TEST(DeviceSelectionTest, RocePortNeedsAGidAndHonoursAForcedIndex) {
  std::vector<DeviceInfo> host = {
      Device("bnxt_re0", 0, {RocePort(1, {})}),
      Device("mlx5_4", 0, {RocePort(1, {{0, kLinkLocal, GidType::kRoceV1}, {3, kIpv4Mapped, GidType::kRoceV2}})})};
  SelectionRequest r;
  DeviceChoice c;
  ASSERT_TRUE(SelectDevicePort(host, r, &c).ok());
  EXPECT_EQ(host[c.device].name, "mlx5_4");
  EXPECT_EQ(c.gid_index, 3);
  r.forced_gid_index = 0;
  ASSERT_TRUE(SelectDevicePort(host, r, &c).ok());
  EXPECT_EQ(c.gid_index, 0);
  r.forced_gid_index = 7;
  Status s = SelectDevicePort(host, r, &c);
  EXPECT_TRUE(IsNoRdmaDevice(s));
  EXPECT_NE(s.message().find("GID index 7 is not valid"), std::string::npos) << s.message();
}

TEST(DeviceSelectionTest, NothingUsableIsTheNoDeviceAnswer) {
  DeviceChoice c;
  Status none = SelectDevicePort({}, SelectionRequest(), &c);
  EXPECT_TRUE(IsNoRdmaDevice(none));
  EXPECT_EQ(none.code(), Code::kSystemError);
  Status down = SelectDevicePort({Device("mlx5_0", 0, {IbPort(1, false, 1)})}, SelectionRequest(), &c);
  EXPECT_TRUE(IsNoRdmaDevice(down));
  EXPECT_NE(down.message().find("mlx5_0:1 not active"), std::string::npos) << down.message();
  EXPECT_FALSE(IsNoRdmaDevice(SystemError("ibv_open_device failed")));
  EXPECT_FALSE(IsNoRdmaDevice(Status::Ok()));
}

TEST(DeviceSelectionTest, CurrentNumaNodeIsANodeOfThisMachine) {
  const int node = CurrentNumaNode();
  EXPECT_GE(node, 0);
  struct stat st;
  EXPECT_EQ(stat(("/sys/devices/system/node/node" + std::to_string(node)).c_str(), &st), 0);
}

TEST(DeviceSelectionTest, FormatsGids) { EXPECT_EQ(FormatGid(kIpv4Mapped), "0000:0000:0000:0000:0000:ffff:0a00:0007"); }

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
