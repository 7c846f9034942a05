// The attributes of the INIT -> RTR -> RTS transitions of an RC queue pair, built from
// both sides' connection data: LID routing on one InfiniBand subnet, a global route
// header on RoCE and across subnets, the smaller MTU, retry settings, and refusals.
#include "transport/ibverbs/queue_pair.h"

#include <cstring>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

Gid GidWithPrefix(uint8_t last_prefix_byte, uint8_t id) {
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[7] = last_prefix_byte;
  g[15] = id;
  return g;
}

LocalPort IbLocal() {
  LocalPort l;
  l.port.port = 1;
  l.port.active = true;
  l.port.link_layer = LinkLayer::kInfiniBand;
  l.port.lid = 7;
  l.port.active_mtu = IBV_MTU_4096;
  l.gid_index = 0;
  l.gid = GidWithPrefix(0, 1);
  return l;
}

ConnectionInfo IbRemote() {
  ConnectionInfo r;
  r.rank = 1;
  r.peer = 0;
  r.link_layer = LinkLayer::kInfiniBand;
  r.port = 1;
  r.mtu = IBV_MTU_2048;
  r.lid = 12;
  r.qp_num = 0x1234;
  r.psn = 0xABCDE;
  r.gid = GidWithPrefix(0, 2);
  return r;
}

TEST(QueuePairTest, InitAllowsRemoteWritesOnThePort) {
  LocalPort l = IbLocal();
  l.port.port = 2;
  ibv_qp_attr a;
  int mask = 0;
  InitTransition(l, &a, &mask);
  EXPECT_EQ(a.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(a.port_num, 2);
  EXPECT_EQ(a.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

TEST(QueuePairTest, RtrOnOneInfiniBandSubnetRoutesByLid) {
  ibv_qp_attr a;
  int mask = 0;
  ASSERT_TRUE(RtrTransition(IbLocal(), IbRemote(), QueuePairTuning(), &a, &mask).ok());
  EXPECT_EQ(a.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(a.path_mtu, IBV_MTU_2048);  // the smaller of 4096 and 2048
  EXPECT_EQ(a.dest_qp_num, 0x1234u);
  EXPECT_EQ(a.rq_psn, 0xABCDEu);
  EXPECT_EQ(a.ah_attr.dlid, 12);
  EXPECT_EQ(a.ah_attr.is_global, 0);
  EXPECT_EQ(a.ah_attr.port_num, 1);
  EXPECT_TRUE(mask & IBV_QP_AV);
  EXPECT_TRUE(mask & IBV_QP_DEST_QPN);
  EXPECT_TRUE(mask & IBV_QP_RQ_PSN);
}

TEST(QueuePairTest, RtrAcrossInfiniBandSubnetsUsesAGlobalRoute) {
  ConnectionInfo remote = IbRemote();
  remote.gid = GidWithPrefix(9, 2);  // another subnet prefix
  ibv_qp_attr a;
  int mask = 0;
  ASSERT_TRUE(RtrTransition(IbLocal(), remote, QueuePairTuning(), &a, &mask).ok());
  EXPECT_EQ(a.ah_attr.is_global, 1);
  EXPECT_EQ(std::memcmp(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16), 0);
  EXPECT_EQ(a.ah_attr.dlid, 12);
}

TEST(QueuePairTest, RtrWithoutThePeersGidRoutesByLid) {
  ConnectionInfo remote = IbRemote();
  remote.gid = Gid{};
  ibv_qp_attr a;
  int mask = 0;
  ASSERT_TRUE(RtrTransition(IbLocal(), remote, QueuePairTuning(), &a, &mask).ok());
  EXPECT_EQ(a.ah_attr.is_global, 0);
}

TEST(QueuePairTest, RtrOnRoceUsesTheGidsAndTuning) {
  LocalPort l = IbLocal();
  l.port.link_layer = LinkLayer::kEthernet;
  l.port.lid = 0;
  l.gid_index = 3;
  ConnectionInfo remote = IbRemote();
  remote.link_layer = LinkLayer::kEthernet;
  remote.lid = 0;
  QueuePairTuning t;
  t.traffic_class = 106;
  t.service_level = 3;
  ibv_qp_attr a;
  int mask = 0;
  ASSERT_TRUE(RtrTransition(l, remote, t, &a, &mask).ok());
  EXPECT_EQ(a.ah_attr.is_global, 1);
  EXPECT_EQ(a.ah_attr.dlid, 0);
  EXPECT_EQ(a.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(a.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(a.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(a.ah_attr.sl, 3);
  EXPECT_EQ(std::memcmp(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16), 0);
}

TEST(QueuePairTest, RtrRefusesPortsThatCannotTalk) {
  ConnectionInfo roce = IbRemote();
  roce.link_layer = LinkLayer::kEthernet;
  ibv_qp_attr a;
  int mask = 0;
  Status s = RtrTransition(IbLocal(), roce, QueuePairTuning(), &a, &mask);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("link layers differ"), std::string::npos) << s.message();

  LocalPort no_gid = IbLocal();
  no_gid.port.link_layer = LinkLayer::kEthernet;
  no_gid.gid_index = -1;
  s = RtrTransition(no_gid, roce, QueuePairTuning(), &a, &mask);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("no GID"), std::string::npos) << s.message();
}

TEST(QueuePairTest, RtsCarriesOurPsnAndRetries) {
  QueuePairTuning t;
  t.timeout = 14;
  t.retry_count = 5;
  ibv_qp_attr a;
  int mask = 0;
  RtsTransition(0x1FFFFFF, t, &a, &mask);
  EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(a.sq_psn, 0xFFFFFFu);  // 24 bits
  EXPECT_EQ(a.timeout, 14);
  EXPECT_EQ(a.retry_cnt, 5);
  EXPECT_EQ(a.rnr_retry, 7);
  EXPECT_TRUE(mask & IBV_QP_SQ_PSN);
  EXPECT_TRUE(mask & IBV_QP_TIMEOUT);
}

TEST(QueuePairTest, RandomPsnFitsIn24Bits) {
  for (int k = 0; k < 100; ++k) EXPECT_LE(RandomPsn(), 0xFFFFFFu);
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
