// Host identities and the hostname that messages name a host by.
#include "topology/host_identity.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(HostIdentity, DetectedIdentitiesStartWithTheHostname) {
  const std::string id = HostIdentity("");
  const std::string name = HostnameOf(id);
  EXPECT_FALSE(name.empty()) << id;
  EXPECT_EQ(id.compare(0, name.size(), name), 0) << id;
  EXPECT_EQ(name.find("/net:"), std::string::npos) << name;
}

TEST(HostIdentity, HostnameOfDropsTheNamespaceAndBootId) {
  EXPECT_EQ(HostnameOf("node-a/net:4026531833/boot:2a7001a1"), "node-a");
  EXPECT_EQ(HostnameOf("node-b/boot:2a7001a1"), "node-b");
  EXPECT_EQ(HostnameOf("rack3-host7"), "rack3-host7");  // TESSERA_HOST_ID or a layout file's, as it is
  EXPECT_EQ(HostIdentity("given"), "given");
}

}  // namespace
}  // namespace tessera
