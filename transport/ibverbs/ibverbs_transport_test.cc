// The ibverbs transport on this host: discovery and Create answer "no RDMA device" (a
// quiet SystemError the communicator falls back on) where the host has none, and
// options out of range are refused before any device is touched.
#include "transport/ibverbs/ibverbs_transport.h"

#include <dirent.h>

#include "gtest/gtest.h"
#include "transport/ibverbs/verbs_device.h"

namespace tessera {
namespace {

// Whether sysfs lists any RDMA device (then the "no device" tests do not apply).
bool HostHasRdmaDevices() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d)) any |= e->d_name[0] != '.';
  closedir(d);
  return any;
}

TEST(IbverbsTransportTest, DiscoveryOnThisHostFindsNoDevice) {
  if (HostHasRdmaDevices()) GTEST_SKIP() << "this host has RDMA devices";
  std::vector<ibverbs::DeviceInfo> devices;
  Status s = ibverbs::DiscoverRdmaDevices("/sys", &devices);
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_TRUE(ibverbs::IsNoRdmaDevice(s)) << s.ToString();
  EXPECT_TRUE(devices.empty());
  std::printf("discovery here: %s\n", s.ToString().c_str());
}

TEST(IbverbsTransportTest, CreateAnswersNoRdmaDevice) {
  if (HostHasRdmaDevices()) GTEST_SKIP() << "this host has RDMA devices";
  std::unique_ptr<IbverbsTransport> t;
  Status s = IbverbsTransport::Create(IbverbsTransport::Options(), 0, 2, &t);
  EXPECT_TRUE(IbverbsTransport::IsNoRdmaDevice(s)) << s.ToString();
  EXPECT_NE(s.message().find("no RDMA device"), std::string::npos);
  EXPECT_EQ(t, nullptr);
}

TEST(IbverbsTransportTest, DefaultOptionsAreValid) {
  EXPECT_TRUE(IbverbsTransport::CheckOptions(IbverbsTransport::Options()).ok());
}

TEST(IbverbsTransportTest, RefusesOptionsOutOfRange) {
  struct Case {
    const char* what;
    void (*mutate)(IbverbsTransport::Options*);
  };
  const Case cases[] = {
      {"slots 3", [](IbverbsTransport::Options* o) { o->slots = 3; }},
      {"slots 256", [](IbverbsTransport::Options* o) { o->slots = 256; }},
      {"slots 0", [](IbverbsTransport::Options* o) { o->slots = 0; }},
      {"slot bytes 100", [](IbverbsTransport::Options* o) { o->slot_bytes = 100; }},
      {"slot bytes 4194368", [](IbverbsTransport::Options* o) { o->slot_bytes = (4 << 20) + 64; }},
      {"slot bytes 8200", [](IbverbsTransport::Options* o) { o->slot_bytes = 8200; }},
      {"timeout 0", [](IbverbsTransport::Options* o) { o->timeout = 0; }},
      {"timeout 32", [](IbverbsTransport::Options* o) { o->timeout = 32; }},
      {"retry count 8", [](IbverbsTransport::Options* o) { o->retry_count = 8; }},
      {"service level 16", [](IbverbsTransport::Options* o) { o->service_level = 16; }},
      {"traffic class 256", [](IbverbsTransport::Options* o) { o->traffic_class = 256; }},
      {"GID index -2", [](IbverbsTransport::Options* o) { o->gid_index = -2; }},
      {"cache entries 0", [](IbverbsTransport::Options* o) { o->cache_entries = 0; }},
      {"bad port", [](IbverbsTransport::Options* o) { o->device_filter = "mlx5_0:zero"; }},
  };
  for (const Case& c : cases) {
    IbverbsTransport::Options o;
    c.mutate(&o);
    Status s = IbverbsTransport::CheckOptions(o);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.what), std::string::npos) << c.what << ": " << s.message();
    // Create refuses them the same way, before looking for a device.
    std::unique_ptr<IbverbsTransport> t;
    EXPECT_EQ(IbverbsTransport::Create(o, 0, 2, &t).code(), Code::kInvalidArgument) << c.what;
  }
}

}  // namespace
}  // namespace tessera
