// Platform files: the ones in simulator/platforms parse, errors name the line, and the
// cost model derived from a platform is what tessera's probe would measure there.
#include "simulator/platform.h"

#include <gtest/gtest.h>

#include <dirent.h>

#include <string>
#include <vector>

#include "base/settings.h"

namespace tessera {
namespace {

TEST(PlatformTest, EveryShippedPlatformParses) {
  const std::string dir = "simulator/platforms";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int parsed = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 9 || name.substr(name.size() - 9) != ".platform") continue;
    Platform p;
    const Status s = ReadPlatformFile(dir + "/" + name, &p);
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    ++parsed;
  }
  closedir(d);
  EXPECT_GE(parsed, 1);
}

TEST(PlatformTest, ChunksComeFromTheTransportsSettings) {
  Platform p;
  ASSERT_TRUE(ParsePlatform("intra.GBps = 1\nnic.GBps = 1\nfabric.link_GBps = 1\nreduce.GBps = 1\ncopy.GBps = 1\n"
                            "inter.transport = ibverbs\n", "t", &p).ok());
  EXPECT_EQ(p.intra.chunk_bytes, static_cast<size_t>(SettingDefaults::shm_slot_bytes));
  EXPECT_EQ(p.inter.chunk_bytes, static_cast<size_t>(SettingDefaults::ib_slot_bytes));
}

TEST(PlatformTest, ErrorsNameTheLine) {
  Platform p;
  Status s = ParsePlatform("intra.GBps = 1\nnic.speed = 3\n", "f.platform", &p);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("f.platform:2"), std::string::npos) << s.ToString();
  s = ParsePlatform("intra.GBps = fast\n", "f.platform", &p);
  EXPECT_NE(s.message().find("f.platform:1"), std::string::npos) << s.ToString();
  s = ParsePlatform("inter.transport = carrier-pigeon\n", "f.platform", &p);
  EXPECT_NE(s.message().find("unknown transport"), std::string::npos) << s.ToString();
  s = ParsePlatform("name = empty\n", "f.platform", &p);  // no rates at all
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

TEST(PlatformTest, ModelIsWhatTheProbeWouldSee) {
  Platform p;
  ASSERT_TRUE(ParsePlatform("intra.GBps = 40\nintra.latency_us = 2\nintra.overhead_us = 3\nnic.count = 2\n"
                            "nic.GBps = 10\nnic.latency_us = 1\nfabric.link_GBps = 20\nfabric.latency_us = 0.5\n"
                            "fabric.spines = 2\nfabric.nodes_per_leaf = 4\ninter.overhead_us = 4\n"
                            "reduce.GBps = 100\ncopy.GBps = 100\n", "t", &p).ok());
  const CostModel m = p.Model();
  EXPECT_DOUBLE_EQ(m.intra.alpha, 5e-6);
  EXPECT_DOUBLE_EQ(m.intra.beta, 1 / 40e9);
  EXPECT_DOUBLE_EQ(m.inter.alpha, (2 * 1 + 4 * 0.5 + 4) * 1e-6);  // NICs, four fabric links, software
  EXPECT_DOUBLE_EQ(m.inter.beta, 1 / 20e9);                       // the node's two NICs
  EXPECT_DOUBLE_EQ(m.gamma, 1 / 100e9);
}

}  // namespace
}  // namespace tessera
