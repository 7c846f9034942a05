// The fabric description: layout-file fabric lines, Slurm's topology.conf and its
// hostlists, what the cost model sees of them on a layout, and reading them as a rank
// does.
#include "topology/fabric.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace tessera {
namespace {

TEST(Fabric, HostlistsExpandAsSlurmWritesThem) {
  std::vector<std::string> h;
  ASSERT_TRUE(ExpandHostlist("node[01-03,07],login1", &h).ok());
  EXPECT_EQ(h, (std::vector<std::string>{"node01", "node02", "node03", "node07", "login1"}));
  ASSERT_TRUE(ExpandHostlist("r[1-2]n[8-9]", &h).ok());
  EXPECT_EQ(h, (std::vector<std::string>{"r1n8", "r1n9", "r2n8", "r2n9"}));
  ASSERT_TRUE(ExpandHostlist("a9-b", &h).ok());
  EXPECT_EQ(h, (std::vector<std::string>{"a9-b"}));
  for (const char* bad : {"node[1-", "node]", "node[3-1]", "node[x]", "a,,b", "node[1-2000000]", "n[1-2][", ""}) {
    EXPECT_EQ(ExpandHostlist(bad, &h).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(Fabric, SlurmTopologyGivesARackPerLeafSwitch) {
  const std::string conf =
      "# two racks under a spine\n"
      "SwitchName=leaf1 Nodes=node[1-2] LinkSpeed=100\n"
      "switchname=leaf2 nodes=node[3-4]\n"
      "SwitchName=spine Switches=leaf[1-2]\n";
  Fabric f;
  ASSERT_TRUE(ParseSlurmTopology(conf, "topology.conf", &f).ok());
  ASSERT_EQ(f.racks.size(), 2u);
  EXPECT_EQ(f.racks[1].name, "leaf2");
  EXPECT_EQ(f.racks[1].hosts, (std::vector<std::string>{"node3", "node4"}));
  EXPECT_EQ(f.sources, (std::vector<std::string>{"Slurm topology topology.conf"}));
  // Lines continued with '\'.
  ASSERT_TRUE(ParseSlurmTopology("SwitchName=s1 \\\nNodes=a,b\n", "t", &f).ok());
  EXPECT_EQ(f.racks[0].hosts, (std::vector<std::string>{"a", "b"}));
}

TEST(Fabric, SlurmTopologyErrorsNameTheLine) {
  Fabric f;
  struct Bad {
    const char* text;
    const char* says;
  } bad[] = {
      {"SwitchName=s1 Nodes=a\nSwitchName=s2 Nodes=a\n", "t line 2: node 'a' is already under switch 's1'"},
      {"SwitchName=s1 Nodes=a\nSwitchName=s1 Nodes=b\n", "t line 2: switch 's1' is already listed"},
      {"Nodes=a\n", "t line 1: a line without SwitchName="},
      {"SwitchName=s1 Colour=red\n", "t line 1: unknown key 'Colour'"},
      {"SwitchName=s1 Nodes=a[\n", "t line 1:"},
      {"SwitchName=s1 Switches=s2\n", "t: no switch lists Nodes="},
      {"SwitchName s1\n", "t line 1: expected KEY=VALUE"},
  };
  for (const Bad& b : bad) {
    const Status s = ParseSlurmTopology(b.text, "t", &f);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << b.text;
    EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
  }
}

TEST(Fabric, LayoutFileLinesAndTheShapeTheModelSees) {
  const std::string text =
      "tessera-layout 1\n"
      "fabric nics 2\n"
      "fabric uplink_percent 25\n"
      "fabric rack r0 host0 host1\n"
      "fabric rack r1 host2 host3  # the second rack\n"
      "host0 0 1\nhost1 2 3\nhost2 4 5\nhost3 6 7\n";
  Fabric f;
  ASSERT_TRUE(ParseFabricLines(text, "l.txt", &f).ok());
  EXPECT_EQ(f.nics, 2);
  EXPECT_EQ(f.uplink_percent, 25);
  ASSERT_EQ(f.racks.size(), 2u);
  Layout layout;
  ASSERT_TRUE(ParseLayoutFile(text, "l.txt", &layout).ok());  // the layout skips fabric lines
  EXPECT_EQ(layout.num_hosts(), 4);
  const FabricShape s = f.ShapeFor(layout);
  EXPECT_EQ(s.nics, 2);
  EXPECT_EQ(s.hosts_per_rack, 2);
  EXPECT_DOUBLE_EQ(s.uplink_share, 0.25);
  // Hosts known by identity: the rack lists name their hostnames (short or long).
  ASSERT_TRUE(Layout::FromHostIds({"host0.example/net:1/boot:ab", "host1/net:1/boot:cd", "x/net:2/boot:ef"}, &layout).ok());
  EXPECT_EQ(f.ShapeFor(layout).hosts_per_rack, 2);  // r0 holds two, x is a rack alone: 3 hosts in 2 racks
  // Nothing said: one NIC, no racks, full bisection.
  const FabricShape none = Fabric().ShapeFor(layout);
  EXPECT_EQ(none.nics, 1);
  EXPECT_EQ(none.hosts_per_rack, 0);
  EXPECT_DOUBLE_EQ(none.uplink_share, 1);
}

TEST(Fabric, LayoutFileErrorsNameTheLine) {
  Fabric f;
  for (const char* bad : {"fabric nics 0\n", "fabric nics two\n", "fabric uplink_percent 150\n", "fabric rack r0\n",
                          "fabric rack r0 a\nfabric rack r0 b\n", "fabric rack r0 a\nfabric rack r1 a\n", "fabric\n"}) {
    const Status s = ParseFabricLines(bad, "l.txt", &f);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("l.txt line "), std::string::npos) << s.message();
  }
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Fabric, ReadAsARankDoes) {
  FabricSources src;
  src.infer = false;
  src.topology_conf = WriteTemp("topology.conf", "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\n");
  src.topo_file = WriteTemp("layout.txt", "tessera-layout 1\nfabric nics 4\nn1 0\nn2 1\nn3 2\nn4 3\n");
  src.uplink_percent = 50;
  Fabric f;
  ASSERT_TRUE(ReadFabric(src, &f).ok());
  EXPECT_EQ(f.nics, 4);           // the layout file's
  EXPECT_EQ(f.racks.size(), 2u);  // topology.conf's: the layout file says none
  EXPECT_EQ(f.uplink_percent, 50);
  EXPECT_EQ(f.sources.size(), 3u) << f.Describe();
  EXPECT_NE(f.Describe().find("rack l2 hosts 2: n3 n4"), std::string::npos) << f.Describe();
  src.topology_conf = "none";
  src.topo_file.clear();
  ASSERT_TRUE(ReadFabric(src, &f).ok());
  EXPECT_FALSE(f.racks.size() > 0);
  src.topology_conf = "/nonexistent/topology.conf";  // named: an error
  EXPECT_FALSE(ReadFabric(src, &f).ok());
}

}  // namespace
}  // namespace tessera
