// The cost model and the choice it drives, on shapes where the answer is known from
// first principles; grids; tuning files.
#include "collectives/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "collectives/algorithms.h"
#include "collectives/grid.h"
#include "collectives/latency_allreduce.h"
#include "collectives/topology_allreduce.h"

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
  return SelectAlgorithm(OpKind::kAllReduce, forced, m, s, bytes).algo->name;
}

TEST(CostModel, SmallMessagesTakeFewSteps) {
  // 8 bytes: latency only; recursive doubling's lg p beats the ring's 2(p-1).
  EXPECT_EQ(Choice(HostsOf(1, 8), 8), "recursive_doubling");
  const std::string multi = Choice(HostsOf(4, 2), 8);
  EXPECT_TRUE(multi == "recursive_doubling" || multi == "hierarchical_leader") << multi;
}

// Where the probe measured alpha across with ranks sharing cores, a step where one rank
// per host runs (the leaders') costs less: on 2x2 with 2 ranks per core, half. With
// figures such as the probe gives on 2x2 hosts sharing 2 cores, 8 B then goes to the
// two-level schedule, the faster one there; where ranks fit their cores (or the model
// was not measured) nothing changes.
TEST(CostModel, LeadersStepsCostLessWhereRanksShareCores) {
  CostModel m;
  m.intra = LinkCost{1.5e-6, 1.0 / 15e9};
  m.inter = LinkCost{11e-6, 1.0 / 0.25e9};
  Shape s = HostsOf(2, 2);
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, m.inter.alpha);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8).algo->name, "recursive_doubling");
  s.ranks_per_core = 1.0;  // fit
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, m.inter.alpha);
  s.ranks_per_core = 2.0;  // 4 ranks on 2 cores
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, m.inter.alpha / 2);
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).beta, m.inter.beta);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8).algo->name, "hierarchical_doubling");
  const Shape four = [] {
    Shape f = HostsOf(4, 2);
    f.ranks_per_core = 4.0;  // 8 ranks on 2 cores: a leader step has 2 ranks per core
    return f;
  }();
  EXPECT_DOUBLE_EQ(LeadersLink(m, four).alpha, m.inter.alpha / 2);
}

// Where ranks outnumber cores a step across hosts takes at least the probe's floor,
// however little it carries, and a leaders' step the floor scaled as its alpha. With
// figures such as the probe gives on 4x2 hosts sharing 2 cores (alpha across 8 us,
// floor 38 us) 8 KiB goes to hierarchical_doubling: without the floor the model would
// take hierarchical_leader's ring of 2 KiB steps for as fast, though each of its steps
// waits the floor. Large steps are the link's: 32 KiB still runs hierarchical_leader.
TEST(CostModel, StepsAcrossHostsTakeAtLeastTheFloor) {
  CostModel m;
  m.intra = LinkCost{1.6e-6, 1.0 / 16e9};
  m.inter = LinkCost{8e-6, 1.0 / 0.25e9};
  m.gamma = 1.0 / 82e9;
  Shape s = HostsOf(4, 2);
  s.ranks_per_core = 4.0;
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8 << 10).algo->name, "hierarchical_leader");
  m.inter.floor = 38e-6;
  EXPECT_DOUBLE_EQ(StepSeconds(m.inter, 8), 38e-6);
  EXPECT_DOUBLE_EQ(StepSeconds(m.inter, 1 << 20), 8e-6 + (1 << 20) / 0.25e9);
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).floor, 19e-6);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8).algo->name, "hierarchical_doubling");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8 << 10).algo->name, "hierarchical_doubling");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 32 << 10).algo->name, "hierarchical_leader");
}

// One host whose ranks outnumber its cores: a step inside takes at least the probe's
// floor there too, and a board round as well. With figures such as the probe gives for
// 4 ranks on 2 cores (alpha 1.5 us, 2.6 GB/s, gamma 24 GB/s; a round of a whole call
// 4 us) 16 KiB goes to recursive doubling's two steps rather than Rabenseifner's four,
// which the model would choose without the floor. The board keeps small buffers.
TEST(CostModel, StepsInsideACrowdedHostTakeAtLeastTheFloor) {
  CostModel m;
  m.intra = LinkCost{1.5e-6, 1.0 / 2.6e9};
  m.gamma = 1.0 / 24e9;
  Shape s = HostsOf(1, 4);
  s.board_bytes = 4096;
  EXPECT_EQ(std::string(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 16 << 10).algo->name), "rabenseifner");
  m.intra.floor = 4e-6;
  EXPECT_DOUBLE_EQ(StepSeconds(m.intra, 8), 4e-6);
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kAllReduce, "board", m, s, 8),
                   4e-6 + 8 / 2.6e9 + 3 * 8 * (0.5 / 2.6e9 + 1 / 24e9));
  EXPECT_EQ(std::string(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 16 << 10).algo->name),
            "recursive_doubling");
  EXPECT_EQ(std::string(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 8).algo->name), "board");
  EXPECT_EQ(std::string(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 2048).algo->name), "board");
}

// The probe's hierarchical_leader calls give the leaders' alpha (LeadersAlphaOf, the
// prediction solved for it), which replaces the scaled one: placed well, the leaders'
// steps overlap their waits with transfers (alpha near 0, hierarchical_leader at 32 KiB);
// placed badly, they take the whole alpha across, and Rabenseifner or two-level doubling
// is cheaper.
TEST(CostModel, MeasuredLeadersAlphaReplacesTheScaledOne) {
  CostModel m;
  m.intra = LinkCost{1.7e-6, 1.0 / 16e9};
  m.inter = LinkCost{25e-6, 1.0 / 0.25e9, 45e-6};
  m.gamma = 1.0 / 82e9;
  Shape s = HostsOf(4, 2);
  s.ranks_per_core = 4.0;
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, 12.5e-6);
  const size_t bytes = 32 << 10;
  m.leaders_alpha = 20e-6;
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, 20e-6);
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).floor, 22.5e-6);
  const double call = PredictSeconds(OpKind::kAllReduce, "hierarchical_leader", m, s, bytes);
  EXPECT_NEAR(LeadersAlphaOf(m, s, bytes, call), 20e-6, 1e-12);
  EXPECT_STRNE(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "hierarchical_leader");
  m.leaders_alpha = LeadersAlphaOf(m, s, bytes, 1e-6);  // faster than its transfers: the least alpha
  EXPECT_DOUBLE_EQ(m.leaders_alpha, kLeastLeadersAlpha);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "hierarchical_leader");
  EXPECT_NE(m.ToString().find("leaders' alpha 1.0 us"), std::string::npos);
}

// A leaders' ring step smaller than the probe's (kLeadersStepBytes) costs at least what
// the probe's did: a smaller step waits as long for its peer's core. With figures such
// as the probe gives on 4x2 hosts whose ranks move between cores (the leaders' alpha
// 4.8 us from 32 KiB calls), alpha + bytes x beta alone would price the 4 KiB steps of
// 16 KiB low and choose hierarchical_leader over the faster hierarchical_doubling.
TEST(CostModel, LeadersRingStepsBelowTheProbesCostWhatItsDid) {
  CostModel m;
  m.intra = LinkCost{2.2e-6, 1.0 / 5.84e9};
  m.inter = LinkCost{10e-6, 1.0 / 0.258e9, 32.5e-6};
  m.gamma = 1.0 / 31e9;
  m.leaders_alpha = 4.8e-6;
  Shape s = HostsOf(4, 2);
  s.ranks_per_core = 4.0;
  const double probe_step = m.leaders_alpha + kLeadersStepBytes * m.inter.beta;
  EXPECT_GE(PredictSeconds(OpKind::kAllReduce, "hierarchical_leader", m, s, 16 << 10), 6 * probe_step);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 16 << 10).algo->name, "hierarchical_doubling");
  // At the probe's own size the prediction is still the one the leaders' alpha solves.
  const size_t probed = kLeadersStepBytes * 4;
  const double call = PredictSeconds(OpKind::kAllReduce, "hierarchical_leader", m, s, probed);
  EXPECT_NEAR(LeadersAlphaOf(m, s, probed, call), m.leaders_alpha, 1e-12);
}

// A leaders' doubling step's alpha is at most what the scaled leaders' link charges a
// step of nothing (ScaledLeadersLink: its floor, or its alpha where that is more): the
// leaders' alpha is a ring step's of 8 KiB. With a probe whose leaders' alpha came out
// far above the usual (70.7 us), the model would otherwise choose flat recursive
// doubling from 8 B to 8 KiB, slower than hierarchical_doubling there.
TEST(CostModel, LeadersDoublingStepsTakeAtMostTheScaledStepAsAlpha) {
  CostModel m;
  m.intra = LinkCost{0.5e-6, 1.0 / 4.9e9};
  m.inter = LinkCost{29.7e-6, 1.0 / 0.252e9, 52.6e-6};
  m.gamma = 1.0 / 32.34e9;
  m.leaders_alpha = 70.7e-6;
  Shape s = HostsOf(4, 2);
  s.ranks_per_core = 4.0;
  EXPECT_DOUBLE_EQ(LeadersLink(m, s).alpha, m.leaders_alpha);  // the ring keeps it
  const LinkCost scaled = ScaledLeadersLink(m, s);
  EXPECT_DOUBLE_EQ(scaled.alpha, 29.7e-6 / 2);
  EXPECT_DOUBLE_EQ(scaled.floor, 52.6e-6 / 2);
  const double n = 8 << 10, chains = 2 * (0.5e-6 + n / 4.9e9) + n / 32.34e9;
  EXPECT_NEAR(PredictSeconds(OpKind::kAllReduce, "hierarchical_doubling", m, s, 8 << 10),
              chains + 2 * (scaled.floor + n * m.inter.beta + n / 32.34e9), 1e-9);
  for (size_t bytes : {size_t{8}, size_t{512}, size_t{8} << 10}) {
    EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "hierarchical_doubling")
        << bytes;
  }
  // Where alpha across is more than the floor (a probe of a slow build on 2x2), the
  // scaled alpha bounds it, and recursive doubling stays within kContenderSpread at 8 B.
  m.inter = LinkCost{236.6e-6, 1.0 / 0.75e9, 125e-6};
  m.leaders_alpha = 347.4e-6;
  Shape crowded = HostsOf(2, 2);
  crowded.ranks_per_core = 2.0;
  const double doubling = PredictSeconds(OpKind::kAllReduce, "hierarchical_doubling", m, crowded, 8);
  EXPECT_NEAR(doubling, 2 * 0.5e-6 + 236.6e-6 / 2, 1e-7);
  EXPECT_LT(PredictSeconds(OpKind::kAllReduce, "recursive_doubling", m, crowded, 8), kContenderSpread * doubling);
  // Not measured: the scaled alpha stands.
  m.leaders_alpha = 0;
  EXPECT_NEAR(PredictSeconds(OpKind::kAllReduce, "hierarchical_doubling", m, crowded, 8), doubling, 1e-8);
}

// Where the leaders' calls ran at their transfers' time (the least alpha), two hosts'
// leaders ring still takes one step more than their recursive doubling over the same
// bytes, and the doubling, the faster of the two, is chosen.
TEST(CostModel, LeastLeadersAlphaKeepsTwoHostsOnDoubling) {
  CostModel m;
  m.intra = LinkCost{0.6e-6, 1.0 / 7e9};
  m.inter = LinkCost{8e-6, 1.0 / 0.25e9, 20e-6};
  m.gamma = 1.0 / 30e9;
  Shape s = HostsOf(2, 2);
  s.ranks_per_core = 2.0;
  for (size_t bytes : {size_t{2} << 10, size_t{8} << 10, size_t{32} << 10}) {
    m.leaders_alpha = LeadersAlphaOf(m, s, bytes, 1e-6);
    EXPECT_DOUBLE_EQ(m.leaders_alpha, kLeastLeadersAlpha);
    EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "hierarchical_doubling")
        << bytes;
  }
}

// Below blocks of kPipelinedFromBlockBytes a pipelined schedule's steps are short, so the
// fastest prediction is chosen however near a pipelined one is.
TEST(CostModel, NoPipelinedPreferenceForSmallBuffers) {
  CostModel m;
  m.intra = LinkCost{1.5e-6, 1.0 / 15e9};
  m.inter = LinkCost{10e-6, 1.0 / 0.25e9};
  Shape s = HostsOf(4, 2);
  s.ranks_per_core = 4.0;
  const size_t bytes = 8 << 10;
  const double doubling = PredictSeconds(OpKind::kAllReduce, "hierarchical_doubling", m, s, bytes);
  const double leader = PredictSeconds(OpKind::kAllReduce, "hierarchical_leader", m, s, bytes);
  ASSERT_LT(doubling, leader);
  ASSERT_LT(leader, doubling * (1 + kPipelinedPreference));
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "hierarchical_doubling");
}

// The contenders measured in the job: the fastest prediction among them, every row
// within kContenderSpread of it, none beyond (8 B on 8 hosts of 1: the ring's 14 steps
// against recursive doubling's 3).
TEST(CostModel, ContendersAreTheRowsNearTheFastest) {
  CostModel m;
  for (const Shape& s : {HostsOf(2, 2), HostsOf(8, 1), HostsOf(1, 4)}) {
    for (size_t bytes : {size_t{8}, size_t{1} << 16, size_t{1} << 25}) {
      const std::vector<const AlgorithmInfo*> rows = Contenders(OpKind::kAllReduce, m, s, bytes);
      const double best = SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).predicted_s;
      ASSERT_FALSE(rows.empty());
      double fastest = rows[0]->predict(m, s, bytes);
      for (const AlgorithmInfo* a : rows) {
        EXPECT_TRUE(a->automatic && a->applies(s)) << a->name;
        fastest = std::min(fastest, a->predict(m, s, bytes));
        EXPECT_LE(a->predict(m, s, bytes), best * kContenderSpread * 1.0001) << a->name;
      }
      EXPECT_LE(fastest, best) << bytes;
      for (const AlgorithmInfo& a : AlgorithmsOf(OpKind::kAllReduce)) {
        const bool in = std::find(rows.begin(), rows.end(), &a) != rows.end();
        if (a.automatic && a.applies(s) && a.predict(m, s, bytes) <= fastest * kContenderSpread) {
          EXPECT_TRUE(in) << a.name << " left out at " << bytes << " B";
        }
      }
    }
  }
  const auto few = Contenders(OpKind::kAllReduce, m, HostsOf(8, 1), 8);
  EXPECT_TRUE(
      std::none_of(few.begin(), few.end(), [](const AlgorithmInfo* a) { return std::string(a->name) == "ring"; }));
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
    EXPECT_LT(PredictSeconds(OpKind::kAllReduce, "rabenseifner", m, shape, 64 << 20),
              PredictSeconds(OpKind::kAllReduce, "ring", m, shape, 64 << 20));
    EXPECT_LT(PredictSeconds(OpKind::kAllReduce, "hierarchical", m, shape, 64 << 20),
              PredictSeconds(OpKind::kAllReduce, "ring", m, shape, 64 << 20));
  }
}

TEST(CostModel, TheTorusRunsItsRowsUnderItsColumns) {
  // 4x2 hosts with figures such as the probe gives there: the rows' steps run beside the
  // column's, so a large buffer costs the column ring and one row piece before it and
  // one after, not the three phases added up.
  CostModel m;
  m.intra = LinkCost{15e-6, 1 / 1.6e9};
  m.inter = LinkCost{43e-6, 1 / 0.245e9};
  const Shape s = HostsOf(4, 2);  // rows of X = 2 inside hosts, columns of Y = 4 across
  const double n = 8 << 20;
  const double column = 6 * StepSeconds(m.inter, n / 8 * 2);  // 2(Y-1) steps, 2 flows a link
  const double piece = StepSeconds(m.intra, n / 2 / 4);       // a row step in Y pieces
  const double gamma = 3.0 / 4 * n / 2 * m.gamma;  // the column's sums (the row's run beside)
  const double hierarchical = PredictSeconds(OpKind::kAllReduce, "hierarchical", m, s, n);
  EXPECT_NEAR(hierarchical, column + 2 * piece + gamma, 1e-9);
  EXPECT_LT(hierarchical, column + 2 * StepSeconds(m.intra, n / 2) * 0.9);  // below the phases in line
  EXPECT_EQ(hierarchical, PredictGridAllReduce(m, s, 2, 4, n));  // the torus schedule on the host grid
  // The torus is the same schedule on the grid the model predicts fastest, the host
  // grid among them.
  const double torus = PredictSeconds(OpKind::kAllReduce, "torus", m, s, n);
  const int X = TorusWidthFor(m, s, n);
  EXPECT_LE(torus, hierarchical);
  EXPECT_EQ(torus, PredictGridAllReduce(m, s, X, 8 / X, n));
  EXPECT_LT(torus, PredictSeconds(OpKind::kAllReduce, "ring", m, s, n));
}

// The torus grid's width, chosen by the model where TESSERA_TORUS does not force it: rows
// of whole hosts (X = kR, k dividing H). On ABCI's figures (4 GPUs and 2 NICs a node,
// racks of 34 nodes with a third of their links up) with ResNet-50's gradient: the node
// grid on a few nodes, where the columns are short; rows of several nodes on 544 nodes,
// whose node-grid columns would take 2 x 543 steps. Forced, the width is TESSERA_TORUS's.
TEST(CostModel, TheModelChoosesTheTorusGridsWidth) {
  CostModel m;
  m.intra = LinkCost{7e-6, 1 / 45e9};
  m.inter = LinkCost{6.6e-6, 1 / 23.6e9};
  m.gamma = 1 / 250e9;
  const size_t n = 51114064;
  Shape s = HostsOf(16, 4);
  s.fabric = FabricShape{2, 34, 0.37};
  EXPECT_EQ(TorusWidthFor(m, s, n), 4);
  s = HostsOf(544, 4);
  s.fabric = FabricShape{2, 34, 0.37};
  const int X = TorusWidthFor(m, s, n);
  EXPECT_GT(X, 4);
  EXPECT_EQ(544 * 4 % X, 0);
  EXPECT_EQ(X % 4, 0);
  EXPECT_LT(PredictSeconds(OpKind::kAllReduce, "torus", m, s, n), 0.8 * PredictGridAllReduce(m, s, 4, 544, n));
  s.torus_forced = true;
  s.torus_x = 32;
  s.torus_y = 68;
  EXPECT_EQ(TorusWidthFor(m, s, n), 32);
}

// What lies above the hosts: a flow uses one of its host's NICs, flows on one NIC share
// it, and flows that leave a rack share its uplinks.
TEST(CostModel, AcrossHostsPricesTheBusiestNicAndUplink) {
  CostModel m;
  m.inter = LinkCost{5e-6, 1 / 20e9};  // a host's whole link: 2 NICs of 10 GB/s
  Shape s = HostsOf(64, 4);
  EXPECT_DOUBLE_EQ(AcrossHosts(m, s, 4, 0).beta, 4 / 20e9);  // no fabric known: the host link shared
  s.fabric = FabricShape{2, 0, 1};
  EXPECT_DOUBLE_EQ(AcrossHosts(m, s, 1, 0).beta, 1 / 10e9);  // one flow: one NIC
  EXPECT_DOUBLE_EQ(AcrossHosts(m, s, 4, 0).beta, 2 / 10e9);  // four flows: two a NIC
  s.fabric = FabricShape{2, 16, 0.25};  // racks of 16 hosts, a quarter of their links up
  EXPECT_DOUBLE_EQ(AcrossHosts(m, s, 4, 0.5).beta, 4 * 0.5 / 0.25 / 20e9);  // half the flows leave
  EXPECT_DOUBLE_EQ(AcrossHosts(m, s, 4, 0.1).beta, 2 / 10e9);               // the NIC is busier
  EXPECT_DOUBLE_EQ(ShiftOut(s, 1), 1.0 / 16);
  EXPECT_DOUBLE_EQ(ShiftOut(s, 32), 1);
  EXPECT_DOUBLE_EQ(XorOut(s, 8), 0);  // pairs 8 apart share racks of 16
  EXPECT_DOUBLE_EQ(XorOut(s, 16), 1);
  s.fabric.hosts_per_rack = 34;
  EXPECT_DOUBLE_EQ(XorOut(s, 1), 0);
  EXPECT_DOUBLE_EQ(XorOut(s, 4), 4.0 / 34);
}

// 4x2 at 128 KiB: the torus's blocks are 16 KiB, too short for its pipelining to pay,
// and its near tie with Rabenseifner goes to the model's best; at 256 KiB (32 KiB
// blocks) the same tie goes to the torus.
TEST(CostModel, NoPipelinedPreferenceForShortBlocks) {
  CostModel m;  // as the pinned 4x2 torus test above
  m.intra = LinkCost{15e-6, 1 / 1.6e9};
  m.inter = LinkCost{43e-6, 1 / 0.245e9};
  const Shape s = HostsOf(4, 2);
  const size_t bytes = 128 << 10;
  ASSERT_LT(bytes / s.p, kPipelinedFromBlockBytes);
  const double rab = PredictSeconds(OpKind::kAllReduce, "rabenseifner", m, s, bytes);
  const double torus = PredictSeconds(OpKind::kAllReduce, "torus", m, s, bytes);
  ASSERT_LT(rab, torus);
  ASSERT_LT(torus, rab * (1 + kPipelinedPreference));
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, bytes).algo->name, "rabenseifner");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, 2 * bytes).algo->name, "torus");
}

TEST(CostModel, PipelinedScheduleWinsANearTie) {
  // 4x2 at 256 KiB: Rabenseifner and the torus move the same bytes across hosts, the
  // torus in more steps whose row pieces overlap its column; they are predicted within
  // a few percent, and the pipelined torus is chosen. Far apart, the model's best stands.
  CostModel m;
  const Shape s = HostsOf(4, 2);
  const size_t big = 256 << 10;
  const double rab = PredictSeconds(OpKind::kAllReduce, "rabenseifner", m, s, big);
  const double torus = PredictSeconds(OpKind::kAllReduce, "torus", m, s, big);
  std::string why;
  const Selection pick = SelectAlgorithm(OpKind::kAllReduce, "auto", m, s, big, &why);
  EXPECT_TRUE(pick.algo->pipelined) << pick.algo->name << " rab " << rab << " torus " << torus;
  ASSERT_LT(rab, torus);  // the round-based schedule is the model's best by a hair
  ASSERT_LT(torus, rab * (1 + kPipelinedPreference));
  EXPECT_EQ(std::string(pick.algo->name), "torus");
  EXPECT_NE(why.find("torus is pipelined and within 5% of rabenseifner"), std::string::npos) << why;
  EXPECT_EQ(Choice(HostsOf(1, 8), 8), "recursive_doubling");  // not a tie: 3 steps against 14
}

TEST(CostModel, TheBoardTakesSmallBuffersOnOneHost) {
  // One wait for all ranks against lg p rounds; in rounds of the slot beyond it, so
  // larger buffers go back to the schedules of messages. Only with a board.
  Shape one_host = HostsOf(1, 8);
  one_host.board_bytes = 4096;
  EXPECT_EQ(Choice(one_host, 8), "board");
  EXPECT_EQ(Choice(one_host, 1024), "board");
  EXPECT_NE(Choice(one_host, 1 << 20), "board");
  EXPECT_EQ(Choice(HostsOf(1, 8), 8), "recursive_doubling");  // no board: none chosen, none forced
  EXPECT_EQ(Choice(HostsOf(1, 8), 8, "board"), "recursive_doubling");
  // Two ranks wait once either way: the board's cheaper round keeps small buffers, and
  // its copy in takes larger ones back to recursive doubling (the defaults cross at
  // 2.4 KiB).
  Shape two = HostsOf(1, 2);
  two.board_bytes = 4096;
  EXPECT_EQ(Choice(two, 8), "board");
  EXPECT_EQ(Choice(two, 2048), "board");
  EXPECT_EQ(Choice(two, 4096), "recursive_doubling");
  EXPECT_EQ(Choice(two, 8 << 10), "recursive_doubling");
  CostModel m;
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kAllReduce, "board", m, one_host, 3 * 4096) -
                       PredictSeconds(OpKind::kAllReduce, "board", m, one_host, 2 * 4096),
                   kBoardRoundAlpha * m.intra.alpha + 4096 * m.intra.beta + 7 * 4096 * (m.intra.beta / 2 + m.gamma));
}

TEST(CostModel, RingVolumeMatchesTheLowerBound) {
  // With alpha = gamma = 0 the ring takes exactly 2(p-1)/p * n * beta.
  CostModel m;
  m.intra = LinkCost{0, 1e-9};
  m.gamma = 0;
  const Shape s = HostsOf(1, 4);
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kAllReduce, "ring", m, s, 1000), 2.0 * 3 / 4 * 1000 * 1e-9);
}

TEST(CostModel, HierarchicalDoesNotApplyOnOneHost) {
  CostModel m;
  EXPECT_LT(PredictSeconds(OpKind::kAllReduce, "hierarchical", m, HostsOf(1, 4), 1024), 0);
  // Forced, it falls back to the model's choice and says why.
  std::string why;
  Selection s = SelectAlgorithm(OpKind::kAllReduce, "hierarchical", m, HostsOf(1, 4), 1024, &why);
  EXPECT_NE(std::string(s.algo->name), "hierarchical");
  EXPECT_NE(why.find("does not apply"), std::string::npos);
  EXPECT_EQ(std::string(SelectAlgorithm(OpKind::kAllReduce, "ring", m, HostsOf(1, 4), 8).algo->name), "ring");
}

TEST(CostModel, TuningFileReadsAndNamesBadLines) {
  const std::string path = testing::TempDir() + "/tuning.txt";
  {
    std::ofstream f(path);
    f << "# measured\nalpha_intra_us = 1.5\nbeta_inter_gbps = 0.25  # 2 Gbit/s\nstep_floor_inter_us = 38\n"
      << "step_floor_intra_us = 4\n";
  }
  CostModel m;
  ASSERT_TRUE(CostModel::FromTuningFile(path, &m).ok());
  EXPECT_DOUBLE_EQ(m.intra.alpha, 1.5e-6);
  EXPECT_DOUBLE_EQ(m.inter.beta, 1 / 0.25e9);
  EXPECT_DOUBLE_EQ(m.inter.floor, 38e-6);
  EXPECT_DOUBLE_EQ(m.intra.floor, 4e-6);
  {
    std::ofstream f(path);
    f << "alpha_intra_us = 1\nspeed = fast\n";
  }
  Status s = CostModel::FromTuningFile(path, &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(":2:"), std::string::npos) << s.message();
}

TEST(CostModel, MeasuredChoicesReadAndNameBadLines) {
  std::vector<MeasuredChoice> rows;
  ASSERT_TRUE(CostModel::ChoicesFromText("# sweep\nallreduce 2x2 8 recursive_doubling\n\nallreduce 2x2 8192 "
                                         "hierarchical_leader  # measured\n",
                                         "t", &rows)
                  .ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].collective, "allreduce");
  EXPECT_EQ(rows[1].hosts, 2);
  EXPECT_EQ(rows[1].per_host, 2);
  EXPECT_EQ(rows[1].from_bytes, 8192u);
  EXPECT_EQ(rows[1].algorithm, "hierarchical_leader");
  EXPECT_EQ(rows[1].line, 4);
  EXPECT_TRUE(CheckMeasuredChoices(rows, "t").ok());
  for (const char* bad : {"allreduce 2x2 8\n", "allreduce 2by2 8 ring\n", "allreduce 0x2 8 ring\n",
                          "allreduce 2x2 -8 ring\n", "allreduce 2x2 8 ring extra\n", "allreduce x2 8 ring\n",
                          "allreduce 2x2 99999999999999999999 ring\n"}) {
    const Status s = CostModel::ChoicesFromText(std::string("\n") + bad, "t", &rows);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("t:2:"), std::string::npos) << s.message();
  }
  ASSERT_TRUE(CostModel::ChoicesFromText("allreduce 2x2 8 fastest\n", "t", &rows).ok());
  EXPECT_NE(CheckMeasuredChoices(rows, "t").message().find("no algorithm 'fastest'"), std::string::npos);
  ASSERT_TRUE(CostModel::ChoicesFromText("allsum 2x2 8 ring\n", "t", &rows).ok());
  EXPECT_NE(CheckMeasuredChoices(rows, "t").message().find("no collective 'allsum'"), std::string::npos);
}

TEST(CostModel, SavedChoicesReplaceTheirOwnRowsAndKeepTheRest) {
  const std::string path = testing::TempDir() + "/saved_choices.txt";
  std::ofstream(path) << "allreduce 1x4 8 board\nallreduce 2x2 8 ring\nallreduce 2x2 4096 torus\n";
  std::vector<MeasuredChoice> mine;
  ASSERT_TRUE(CostModel::ChoicesFromText("allreduce 2x2 32768 rabenseifner\nallreduce 2x2 8 recursive_doubling\n", "t",
                                         &mine)
                  .ok());
  ASSERT_TRUE(CostModel::SaveChoices(path, "test", mine).ok());
  std::vector<MeasuredChoice> rows;
  ASSERT_TRUE(CostModel::ChoicesFromFile(path, &rows).ok());
  EXPECT_EQ(CostModel::ChoicesToText(rows),
            "allreduce 1x4 8 board\nallreduce 2x2 8 recursive_doubling\nallreduce 2x2 4096 torus\n"
            "allreduce 2x2 32768 rabenseifner\n");

  std::ofstream(path) << "not a table\n";  // replaced whole
  ASSERT_TRUE(CostModel::SaveChoices(path, "test", mine).ok());
  ASSERT_TRUE(CostModel::ChoicesFromFile(path, &rows).ok());
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(CostModel::SaveChoices(testing::TempDir() + "/no/such/dir/t", "test", mine).code(), Code::kSystemError);
}

TEST(CostModel, MeasuredChoiceWinsOnItsLayoutOnly) {
  CostModel m;
  ASSERT_TRUE(CostModel::ChoicesFromText("allreduce 2x2 8 hierarchical_leader\nallreduce 2x2 32768 torus\n"
                                         "allreduce 2x2 65536 board\n",
                                         "t", &m.measured)
                  .ok());
  const Shape two_by_two = HostsOf(2, 2);
  std::string why;
  const Selection small = SelectAlgorithm(OpKind::kAllReduce, "auto", m, two_by_two, 8, &why);
  EXPECT_STREQ(small.algo->name, "hierarchical_leader");
  EXPECT_NE(why.find("TESSERA_ALGO_TABLE"), std::string::npos) << why;
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, two_by_two, 32767).algo->name,
               "hierarchical_leader");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, two_by_two, 40000).algo->name, "torus");
  // Below the first row, where the named algorithm does not apply (the board needs one
  // host), on another layout, for another collective, and under TESSERA_ALGO: the model.
  CostModel plain;
  for (size_t bytes : {size_t{4}, size_t{1} << 20}) {
    EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, two_by_two, bytes).algo->name,
                 SelectAlgorithm(OpKind::kAllReduce, "auto", plain, two_by_two, bytes).algo->name);
  }
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "auto", m, HostsOf(4, 2), 8).algo->name,
               SelectAlgorithm(OpKind::kAllReduce, "auto", plain, HostsOf(4, 2), 8).algo->name);
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllReduce, "ring", m, two_by_two, 8).algo->name, "ring");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAllGather, "auto", m, two_by_two, 64).algo->name,
               SelectAlgorithm(OpKind::kAllGather, "auto", plain, two_by_two, 64).algo->name);
}

// --- Allgather and reduce-scatter: the flat ring or the grid ---------------------------

std::string GatherScatterChoice(OpKind op, const CostModel& m, const Shape& s, size_t bytes,
                                const std::string& forced = "auto") {
  return SelectAlgorithm(op, forced, m, s, bytes).algo->Label();
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
  for (auto op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    const Shape s = HostsOf(4, 2);  // X = 2, Y = 4
    EXPECT_DOUBLE_EQ(PredictSeconds(op, "ring", m, s, 8000), 7.0 / 8 * n * 1e-9);
    EXPECT_DOUBLE_EQ(PredictSeconds(op, "hierarchical", m, s, 8000), 3.0 / 4 * n * 1e-9);
    const Shape t = HostsOf(2, 4);  // X = 4, Y = 2
    EXPECT_DOUBLE_EQ(PredictSeconds(op, "hierarchical", m, t, 8000), 1.0 / 2 * n * 1e-9);
  }
}

TEST(GatherScatterModel, ReductionCostMatchesTheRing) {
  // Both schedules reduce (p-1)/p of the input on every rank.
  CostModel m;
  m.intra = LinkCost{0, 0};
  m.inter = LinkCost{0, 0};
  m.gamma = 1e-9;
  const Shape s = HostsOf(3, 3);
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kReduceScatter, "ring", m, s, 9000), 8000 * 1e-9);
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kReduceScatter, "hierarchical", m, s, 9000), 8000 * 1e-9);
  EXPECT_DOUBLE_EQ(PredictSeconds(OpKind::kAllGather, "ring", m, s, 9000), 0);
}

TEST(GatherScatterModel, GridAcrossHostsForLargeBuffers) {
  CostModel two_gbit;  // the emulated cluster's links, as the probe measures them
  two_gbit.inter = LinkCost{100e-6, 1 / 0.25e9};
  for (auto op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    for (auto shape : {HostsOf(2, 2), HostsOf(4, 2), HostsOf(2, 4), HostsOf(3, 3)}) {
      EXPECT_EQ(GatherScatterChoice(op, two_gbit, shape, 64 << 20), "grid") << shape.hosts << "x" << shape.per_host;
    }
    // With the built-in model too where the host link's share falls most.
    EXPECT_EQ(GatherScatterChoice(op, CostModel(), HostsOf(2, 4), 64 << 20), "grid");
  }
}

TEST(GatherScatterModel, GridForSmallBuffersOnManyHosts) {
  // Latency: Y - 1 network steps instead of p - 1.
  for (auto op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    EXPECT_EQ(GatherScatterChoice(op, CostModel(), HostsOf(8, 2), 8 * 16), "grid");
  }
}

TEST(GatherScatterModel, RingWhenTheHostLinkIsAsFastAsSharedMemory) {
  // The grid moves (Y-1) + (X-1) Y blocks per rank through links that all cost the same
  // (the row phase carries Y blocks a step), while the ring moves p - 1: the ring wins.
  CostModel m;
  m.inter = m.intra;
  for (auto op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    EXPECT_EQ(GatherScatterChoice(op, m, HostsOf(4, 4), 64 << 20), "ring");
  }
}

TEST(GatherScatterModel, OneHostOrOneRankPerHostIsTheRing) {
  CostModel m;
  for (auto op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    for (auto shape : {HostsOf(1, 4), HostsOf(3, 1)}) {
      EXPECT_LT(PredictSeconds(op, "hierarchical", m, shape, 1 << 20), 0);
      for (const char* forced : {"auto", "hierarchical", "torus"}) {
        std::string why;
        Selection s = SelectAlgorithm(op, forced, m, shape, 1 << 20, &why);
        EXPECT_STREQ(s.algo->Label(), "ring") << forced;
        EXPECT_EQ(s.algo, FindAlgorithm(op, "ring"));
        if (std::string(forced) != "auto") {
          EXPECT_NE(why.find("does not apply"), std::string::npos) << why;
        }
      }
    }
    // Uneven hosts: no host grid.
    Shape uneven;
    uneven.p = 5;
    uneven.hosts = 2;
    EXPECT_STREQ(SelectAlgorithm(op, "hierarchical", m, uneven, 1 << 20).algo->Label(), "ring");
  }
}

TEST(GatherScatterModel, ForcedByTesseraAlgo) {
  CostModel m;
  const auto ag = OpKind::kAllGather;
  std::string why;
  // ring forces the flat ring even where the grid is predicted faster.
  Selection s = SelectAlgorithm(ag, "ring", m, HostsOf(2, 4), 64 << 20, &why);
  EXPECT_EQ(s.algo, FindAlgorithm(ag, "ring"));
  EXPECT_EQ(why, "forced by TESSERA_ALGO");
  // hierarchical and torus force the grid even where the ring is predicted faster.
  CostModel flat = m;
  flat.inter = flat.intra;
  s = SelectAlgorithm(ag, "hierarchical", flat, HostsOf(4, 4), 64 << 20, &why);
  EXPECT_EQ(s.algo, FindAlgorithm(ag, "hierarchical"));
  EXPECT_NE(why.find("host grid 4x4"), std::string::npos) << why;
  Shape torus = HostsOf(2, 4);
  torus.torus_x = 2;  // TESSERA_TORUS=2x4
  torus.torus_y = 4;
  s = SelectAlgorithm(OpKind::kReduceScatter, "torus", m, torus, 1024, &why);
  EXPECT_EQ(s.algo, FindAlgorithm(OpKind::kReduceScatter, "torus"));
  EXPECT_NE(why.find("torus grid 2x4"), std::string::npos) << why;
  // Allreduce-only names leave the choice to the model and say so.
  s = SelectAlgorithm(ag, "rabenseifner", m, HostsOf(2, 4), 64 << 20, &why);
  EXPECT_STREQ(s.algo->Label(), "grid");
  EXPECT_NE(why.find("TESSERA_ALGO=rabenseifner does not apply to allgather"), std::string::npos) << why;
  EXPECT_NE(why.find("ring "), std::string::npos) << why;  // both predictions listed
  EXPECT_NE(why.find("grid 4x2 "), std::string::npos) << why;
}

// --- The table: one shape of row for every collective ------------------------------

TEST(AlgorithmTable, EveryCollectiveChoosesARowOnEveryShape) {
  CostModel m;
  Shape uneven;
  uneven.p = 5;
  uneven.hosts = 2;
  for (int c = 0; c < kNumCollectives; ++c) {
    const OpKind collective = static_cast<OpKind>(c);
    const auto& rows = AlgorithmsOf(collective);
    ASSERT_FALSE(rows.empty()) << OpName(collective);
    for (const AlgorithmInfo& a : rows) {
      EXPECT_EQ(a.collective, collective) << a.name;
      EXPECT_EQ(FindAlgorithm(collective, a.name), &a) << a.name << " is not unique in " << OpName(collective);
    }
    for (const Shape& s : {HostsOf(1, 1), HostsOf(1, 4), HostsOf(3, 1), HostsOf(4, 2), uneven}) {
      for (const char* forced : {"auto", "ring", "torus", "hierarchical_leader"}) {
        const Selection pick = SelectAlgorithm(collective, forced, m, s, 1 << 20);
        ASSERT_NE(pick.algo, nullptr) << OpName(collective) << " forced " << forced;
        EXPECT_TRUE(pick.algo->applies(s)) << pick.algo->name;
        EXPECT_GE(pick.predicted_s, 0) << pick.algo->name;
      }
    }
  }
  EXPECT_STREQ(SelectAlgorithm(OpKind::kBroadcast, "ring", m, HostsOf(2, 2), 64).algo->name, "chain");
  EXPECT_STREQ(SelectAlgorithm(OpKind::kAlltoAll, "auto", m, HostsOf(2, 2), 64).algo->name, "pairwise");
}

TEST(AlgorithmTable, TesseraAlgoNamesAreTheAllReduceRows) {
  EXPECT_TRUE(CheckAlgorithmName("auto").ok());
  for (const AlgorithmInfo& a : AlgorithmsOf(OpKind::kAllReduce)) EXPECT_TRUE(CheckAlgorithmName(a.name).ok());
  const Status s = CheckAlgorithmName("grid");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "TESSERA_ALGO='grid' is not one of: auto, ring, board, recursive_doubling, rabenseifner, torus, "
            "hierarchical, hierarchical_leader, hierarchical_doubling");
}

// Rows of k whole hosts: the same grid as rank order gives under block placement, and
// under any other the hosts' ranks still share rows; only widths whose rows divide the
// hosts, and only the forced grid where TESSERA_TORUS sets one.
TEST(Grid, RowsOfWholeHosts) {
  Grid hosts, wide, plain;
  ASSERT_TRUE(GridFromHosts({0, 0, 1, 1, 2, 2, 3, 3}, &hosts).ok());
  ASSERT_TRUE(GridOfHostRows(hosts, 2, &wide).ok());
  ASSERT_TRUE(MakeGrid(8, 4, 2, &plain).ok());
  EXPECT_EQ(wide.rows, plain.rows);
  EXPECT_EQ(wide.cols, plain.cols);
  EXPECT_EQ(GridOfHostRows(hosts, 3, &wide).code(), Code::kInvalidArgument);
  ASSERT_TRUE(GridFromHosts({0, 1, 2, 3, 0, 1, 2, 3}, &hosts).ok());  // round-robin
  ASSERT_TRUE(GridOfHostRows(hosts, 2, &wide).ok());
  EXPECT_EQ(wide.rows[0], (std::vector<int>{0, 4, 1, 5}));
  EXPECT_EQ(wide.cols[2], (std::vector<int>{1, 3}));
  LayoutGrids g;
  ASSERT_TRUE(MakeLayoutGrids({0, 0, 1, 1, 2, 2, 3, 3}, "", FabricShape(), &g).ok());
  EXPECT_EQ(TorusWidths(g.shape), (std::vector<int>{2, 4}));
  EXPECT_EQ(g.torus->OfWidth(4)->rows, plain.rows);
  EXPECT_EQ(g.torus->OfWidth(4), g.torus->OfWidth(4));  // built once
  EXPECT_EQ(g.torus->OfWidth(3), nullptr);
  ASSERT_TRUE(MakeLayoutGrids({0, 0, 1, 1, 2, 2, 3, 3}, "8x1", FabricShape(), &g).ok());
  EXPECT_TRUE(g.shape.torus_forced);
  EXPECT_EQ(g.torus->OfWidth(4), nullptr);
  EXPECT_EQ(g.torus->OfWidth(8), g.torus->Default());
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
