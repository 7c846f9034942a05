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
  // and torus schedules only 2(H-1)/H of it, and so does Rabenseifner when its halving
  // keeps the large halves inside hosts.
  for (auto shape : {HostsOf(2, 2), HostsOf(4, 2), HostsOf(2, 4)}) {
    const std::string c = Choice(shape, 64 << 20);
    EXPECT_TRUE(c == "hierarchical" || c == "torus" || c == "rabenseifner")
        << c << " for " << shape.hosts << "x" << shape.per_host;
    CostModel m;
    EXPECT_LT(PredictAllReduce(AllReduceAlgorithm::kRabenseifner, m, shape, 64 << 20),
              PredictAllReduce(AllReduceAlgorithm::kRing, m, shape, 64 << 20));
    EXPECT_LT(PredictAllReduce(AllReduceAlgorithm::kHierarchical, m, shape, 64 << 20),
              PredictAllReduce(AllReduceAlgorithm::kRing, m, shape, 64 << 20));
  }
}

TEST(CostModel, PipelinedScheduleWinsANearTie) {
  // 4x2: Rabenseifner and the torus move the same bytes across hosts; with links fast
  // enough that latency barely matters they are predicted within a few percent, and the
  // pipelined torus is chosen. Far apart, the model's best stands.
  CostModel m;
  const Shape s = HostsOf(4, 2);
  const size_t big = 64 << 20;
  const double rab = PredictAllReduce(AllReduceAlgorithm::kRabenseifner, m, s, big);
  const double torus = PredictAllReduce(AllReduceAlgorithm::kTorus, m, s, big);
  const Selection pick = SelectAllReduce("auto", m, s, big);
  EXPECT_TRUE(pick.algo->pipelined) << pick.algo->name << " rab " << rab << " torus " << torus;
  ASSERT_LT(rab, torus);  // the round-based schedule is the model's best by a hair
  ASSERT_LT(torus, rab * (1 + kPipelinedPreference));
  EXPECT_EQ(std::string(pick.algo->name), "torus");
  EXPECT_NE(pick.reason.find("torus is pipelined and within 5% of rabenseifner"), std::string::npos) << pick.reason;
  EXPECT_EQ(Choice(HostsOf(1, 8), 8), "recursive_doubling");  // not a tie: 3 steps against 14
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

// --- Allgather and reduce-scatter: the flat ring or the grid ---------------------------

std::string GatherScatterChoice(GatherScatterOp op, const CostModel& m, const Shape& s, size_t bytes,
                                const std::string& forced = "auto") {
  return SelectGatherScatter(op, forced, m, s, bytes).name;
}

TEST(GatherScatterModel, HostLinkVolumes) {
  // Shared memory free, no latency, no reduction cost: what is left is the host link.
  // The flat ring moves (p-1)/p of the buffer through it, the grid (Y-1)/Y (X ranks of
  // a host sharing it).
  CostModel m;
  m.intra = LinkCost{0, 0};
  m.inter = LinkCost{0, 1e-9};
  m.gamma = 0;
  const double n = 8000;
  for (auto op : {GatherScatterOp::kAllGather, GatherScatterOp::kReduceScatter}) {
    const Shape s = HostsOf(4, 2);  // X = 2, Y = 4
    EXPECT_DOUBLE_EQ(PredictRingGatherScatter(op, m, s, 8000), 7.0 / 8 * n * 1e-9);
    EXPECT_DOUBLE_EQ(PredictGridGatherScatter(op, m, s, 2, 4, 8000), 3.0 / 4 * n * 1e-9);
    const Shape t = HostsOf(2, 4);  // X = 4, Y = 2
    EXPECT_DOUBLE_EQ(PredictGridGatherScatter(op, m, t, 4, 2, 8000), 1.0 / 2 * n * 1e-9);
  }
}

TEST(GatherScatterModel, ReductionCostMatchesTheRing) {
  // Both schedules reduce (p-1)/p of the input on every rank.
  CostModel m;
  m.intra = LinkCost{0, 0};
  m.inter = LinkCost{0, 0};
  m.gamma = 1e-9;
  const Shape s = HostsOf(3, 3);
  EXPECT_DOUBLE_EQ(PredictRingGatherScatter(GatherScatterOp::kReduceScatter, m, s, 9000), 8000 * 1e-9);
  EXPECT_DOUBLE_EQ(PredictGridGatherScatter(GatherScatterOp::kReduceScatter, m, s, 3, 3, 9000), 8000 * 1e-9);
  EXPECT_DOUBLE_EQ(PredictRingGatherScatter(GatherScatterOp::kAllGather, m, s, 9000), 0);
}

TEST(GatherScatterModel, GridAcrossHostsForLargeBuffers) {
  CostModel two_gbit;  // the emulated cluster's links, as the probe measures them
  two_gbit.inter = LinkCost{100e-6, 1 / 0.25e9};
  for (auto op : {GatherScatterOp::kAllGather, GatherScatterOp::kReduceScatter}) {
    for (auto shape : {HostsOf(2, 2), HostsOf(4, 2), HostsOf(2, 4), HostsOf(3, 3)}) {
      EXPECT_EQ(GatherScatterChoice(op, two_gbit, shape, 64 << 20), "grid") << shape.hosts << "x" << shape.per_host;
    }
    // With the built-in model too where the host link's share falls most.
    EXPECT_EQ(GatherScatterChoice(op, CostModel(), HostsOf(2, 4), 64 << 20), "grid");
  }
}

TEST(GatherScatterModel, GridForSmallBuffersOnManyHosts) {
  // Latency: Y - 1 network steps instead of p - 1.
  for (auto op : {GatherScatterOp::kAllGather, GatherScatterOp::kReduceScatter}) {
    EXPECT_EQ(GatherScatterChoice(op, CostModel(), HostsOf(8, 2), 8 * 16), "grid");
  }
}

TEST(GatherScatterModel, RingWhenTheHostLinkIsAsFastAsSharedMemory) {
  // The grid moves (Y-1) + (X-1) Y blocks per rank through links that all cost the same
  // (the row phase carries Y blocks a step), while the ring moves p - 1: the ring wins.
  CostModel m;
  m.inter = m.intra;
  for (auto op : {GatherScatterOp::kAllGather, GatherScatterOp::kReduceScatter}) {
    EXPECT_EQ(GatherScatterChoice(op, m, HostsOf(4, 4), 64 << 20), "ring");
  }
}

TEST(GatherScatterModel, OneHostOrOneRankPerHostIsTheRing) {
  CostModel m;
  for (auto op : {GatherScatterOp::kAllGather, GatherScatterOp::kReduceScatter}) {
    for (auto shape : {HostsOf(1, 4), HostsOf(3, 1)}) {
      EXPECT_LT(PredictGridGatherScatter(op, m, shape, shape.per_host, shape.hosts, 1 << 20), 0);
      for (const char* forced : {"auto", "hierarchical", "torus"}) {
        GatherScatterSelection s = SelectGatherScatter(op, forced, m, shape, 1 << 20);
        EXPECT_STREQ(s.name, "ring") << forced;
        EXPECT_EQ(s.algo, GatherScatterAlgorithm::kRing);
        if (std::string(forced) != "auto") {
          EXPECT_NE(s.reason.find("does not apply"), std::string::npos) << s.reason;
        }
      }
    }
    // Uneven hosts: no host grid.
    Shape uneven;
    uneven.p = 5;
    uneven.hosts = 2;
    EXPECT_STREQ(SelectGatherScatter(op, "hierarchical", m, uneven, 1 << 20).name, "ring");
  }
}

TEST(GatherScatterModel, ForcedByTesseraAlgo) {
  CostModel m;
  const auto ag = GatherScatterOp::kAllGather;
  // ring forces the flat ring even where the grid is predicted faster.
  GatherScatterSelection s = SelectGatherScatter(ag, "ring", m, HostsOf(2, 4), 64 << 20);
  EXPECT_EQ(s.algo, GatherScatterAlgorithm::kRing);
  EXPECT_EQ(s.reason, "forced by TESSERA_ALGO");
  // hierarchical and torus force the grid even where the ring is predicted faster.
  CostModel flat = m;
  flat.inter = flat.intra;
  s = SelectGatherScatter(ag, "hierarchical", flat, HostsOf(4, 4), 64 << 20);
  EXPECT_EQ(s.algo, GatherScatterAlgorithm::kHostGrid);
  EXPECT_NE(s.reason.find("host grid 4x4"), std::string::npos) << s.reason;
  Shape torus = HostsOf(2, 4);
  torus.torus_x = 2;  // TESSERA_TORUS=2x4
  torus.torus_y = 4;
  s = SelectGatherScatter(GatherScatterOp::kReduceScatter, "torus", m, torus, 1024);
  EXPECT_EQ(s.algo, GatherScatterAlgorithm::kTorusGrid);
  EXPECT_NE(s.reason.find("torus grid 2x4"), std::string::npos) << s.reason;
  // Allreduce-only names leave the choice to the model and say so.
  s = SelectGatherScatter(ag, "rabenseifner", m, HostsOf(2, 4), 64 << 20);
  EXPECT_STREQ(s.name, "grid");
  EXPECT_NE(s.reason.find("TESSERA_ALGO=rabenseifner does not apply to allgather"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("ring "), std::string::npos) << s.reason;  // both predictions listed
  EXPECT_NE(s.reason.find("grid 4x2 "), std::string::npos) << s.reason;
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
