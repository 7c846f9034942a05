// The cost model and the choice it drives, on shapes where the answer is known from
// first principles; grids; tuning files.
#include "collectives/cost_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "collectives/algorithms.h"
#include "collectives/grid.h"

namespace tessera {
namespace {

Shape HostsOf(int hosts, int per_host) {
  Shape s;
  s.p = hosts * per_host;
  s.hosts = hosts;
  s.per_host = per_host;
  s.torus_x = per_host;
  s.torus_y = hosts;
  return s;
}

std::string Choice(const Shape& s, size_t bytes, const std::string& forced = "auto") {
  CostModel m;
  return SelectAllReduce(forced, m, s, bytes).algo->name;
}

TEST(CostModel, SmallMessagesTakeFewSteps) {
  // 8 bytes: latency only; recursive doubling's lg p beats the ring's 2(p-1).
  EXPECT_EQ(Choice(HostsOf(1, 8), 8), "recursive_doubling");
  const std::string multi = Choice(HostsOf(4, 2), 8);
  EXPECT_TRUE(multi == "recursive_doubling" || multi == "hierarchical_leader") << multi;
}

TEST(CostModel, LargeMessagesAcrossHostsAvoidTheFlatRing) {
  // A flat ring pushes 2(p-1)/p of the buffer through each host link; the hierarchical
  // and torus schedules only 2(H-1)/H of it.
  for (auto shape : {HostsOf(2, 2), HostsOf(4, 2), HostsOf(2, 4)}) {
    const std::string c = Choice(shape, 64 << 20);
    EXPECT_TRUE(c == "hierarchical" || c == "torus") << c << " for " << shape.hosts << "x" << shape.per_host;
    CostModel m;
    EXPECT_LT(PredictAllReduce(AllReduceAlgorithm::kHierarchical, m, shape, 64 << 20),
              PredictAllReduce(AllReduceAlgorithm::kRing, m, shape, 64 << 20));
  }
}

TEST(CostModel, RingVolumeMatchesTheLowerBound) {
  // With alpha = gamma = 0 the ring takes exactly 2(p-1)/p * n * beta.
  CostModel m;
  m.intra = LinkCost{0, 1e-9};
  m.gamma = 0;
  const Shape s = HostsOf(1, 4);
  EXPECT_DOUBLE_EQ(PredictAllReduce(AllReduceAlgorithm::kRing, m, s, 1000), 2.0 * 3 / 4 * 1000 * 1e-9);
}

TEST(CostModel, HierarchicalDoesNotApplyOnOneHost) {
  CostModel m;
  EXPECT_LT(PredictAllReduce(AllReduceAlgorithm::kHierarchical, m, HostsOf(1, 4), 1024), 0);
  // Forced, it falls back to the model's choice and says why.
  Selection s = SelectAllReduce("hierarchical", m, HostsOf(1, 4), 1024);
  EXPECT_NE(std::string(s.algo->name), "hierarchical");
  EXPECT_NE(s.reason.find("does not apply"), std::string::npos);
  EXPECT_EQ(std::string(SelectAllReduce("ring", m, HostsOf(1, 4), 8).algo->name), "ring");
}

TEST(CostModel, TuningFileReadsAndNamesBadLines) {
  const std::string path = testing::TempDir() + "/tuning.txt";
  {
    std::ofstream f(path);
    f << "# measured\nalpha_intra_us = 1.5\nbeta_inter_gbps = 0.25  # 2 Gbit/s\n";
  }
  CostModel m;
  ASSERT_TRUE(CostModel::FromTuningFile(path, &m).ok());
  EXPECT_DOUBLE_EQ(m.intra.alpha, 1.5e-6);
  EXPECT_DOUBLE_EQ(m.inter.beta, 1 / 0.25e9);
  {
    std::ofstream f(path);
    f << "alpha_intra_us = 1\nspeed = fast\n";
  }
  Status s = CostModel::FromTuningFile(path, &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(":2:"), std::string::npos) << s.message();
}

TEST(Grid, FromHostsAndForced) {
  Grid g;
  ASSERT_TRUE(GridFromHosts({0, 0, 1, 1, 2, 2}, &g).ok());
  EXPECT_EQ(g.X, 2);
  EXPECT_EQ(g.Y, 3);
  EXPECT_EQ(g.rows[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(g.cols[1], (std::vector<int>{1, 3, 5}));
  // Interleaved placement: rows follow hosts, not rank order.
  ASSERT_TRUE(GridFromHosts({0, 1, 0, 1}, &g).ok());
  EXPECT_EQ(g.rows[0], (std::vector<int>{0, 2}));
  EXPECT_FALSE(GridFromHosts({0, 0, 0, 1}, &g).ok());  // uneven hosts
  ASSERT_TRUE(ParseGrid("4x2", 8, &g).ok());
  EXPECT_EQ(g.rows[1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g.cols[3], (std::vector<int>{3, 7}));
  for (const char* bad : {"4x3", "x2", "4x", "4*2", "0x8", "-2x-4"}) {
    EXPECT_EQ(ParseGrid(bad, 8, &g).code(), Code::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tessera
