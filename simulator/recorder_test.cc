// The recorder against what the algorithms must do: the ring's steps, sizes, peers and
// gates from its pattern functions (ring_pattern.h), recursive doubling's rounds, and,
// for every row of the tables on several layouts, that the ranks' schedules fit
// together and that every gate names the receive that wrote the data its send reads.
#include "simulator/recorder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/ring_pattern.h"

namespace tessera {
namespace {

std::unique_ptr<CallRecorder> MakeRecorder(const std::string& layout_spec, const std::string& torus = "") {
  Layout layout;
  EXPECT_TRUE(LayoutFromSpec(layout_spec, &layout).ok()) << layout_spec;
  std::unique_ptr<CallRecorder> recorder;
  const Status s = CallRecorder::Create(layout, torus, FabricShape(), CostModel(), &recorder);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return recorder;
}

CallSpec AllReduce(const std::string& algorithm, size_t count, size_t elem_size = 4) {
  CallSpec spec;
  spec.algorithm = algorithm;
  spec.count = count;
  spec.elem_size = elem_size;
  return spec;
}

// The k-th send and the k-th receive of an exchange, by index in it.
struct Split {
  std::vector<int> sends, recvs;
};
Split SplitExchange(const RankSchedule& s, const Step& step) {
  Split out;
  for (uint32_t i = 0; i < step.count; ++i) {
    (s.messages[step.first + i].is_send ? out.sends : out.recvs).push_back(static_cast<int>(i));
  }
  return out;
}

TEST(RecorderTest, RingHasTwoPMinusOneStepsOfRingBlocksWithGates) {
  const int p = 5;
  const size_t count = 1003;  // not a multiple of p: blocks differ by one element
  auto recorder = MakeRecorder("5x1");
  for (int r = 0; r < p; ++r) {
    RankSchedule s;
    ASSERT_TRUE(recorder->RecordRank(AllReduce("ring", count), r, &s).ok());
    ASSERT_EQ(s.steps.size(), 1u) << DescribeSchedule(s);
    const Step& ex = s.steps[0];
    ASSERT_EQ(ex.kind, Step::kExchange);
    const Split split = SplitExchange(s, ex);
    ASSERT_EQ(split.sends.size(), 2u * (p - 1));
    ASSERT_EQ(split.recvs.size(), 2u * (p - 1));
    for (int k = 0; k < 2 * (p - 1); ++k) {
      const Message& send = s.messages[ex.first + split.sends[k]];
      const Message& recv = s.messages[ex.first + split.recvs[k]];
      const bool rs = k < p - 1;
      const int step = rs ? k : k - (p - 1);
      const int out_block = rs ? RingReduceScatterSendBlock(r, p, step) : RingAllGatherSendBlock(r, p, step);
      const int in_block = rs ? RingReduceScatterRecvBlock(r, p, step) : RingAllGatherRecvBlock(r, p, step);
      EXPECT_EQ(send.peer, RingRight(r, p));
      EXPECT_EQ(recv.peer, RingLeft(r, p));
      EXPECT_EQ(send.bytes, RingBlock(count, p, out_block).count * 4) << "rank " << r << " send " << k;
      EXPECT_EQ(recv.bytes, RingBlock(count, p, in_block).count * 4) << "rank " << r << " recv " << k;
      EXPECT_EQ(recv.reduces, rs ? 1 : 0);
      EXPECT_EQ(send.gate, k == 0 ? -1 : split.recvs[k - 1]) << "rank " << r << " send " << k;
    }
  }
}

TEST(RecorderTest, RecursiveDoublingIsLgPExchangesWithPartners) {
  auto recorder = MakeRecorder("8x1");
  const size_t count = 256;
  for (int r = 0; r < 8; ++r) {
    RankSchedule s;
    ASSERT_TRUE(recorder->RecordRank(AllReduce("recursive_doubling", count), r, &s).ok());
    std::vector<int> partners;
    for (const Step& step : s.steps) {
      if (step.kind == Step::kCopy) continue;
      ASSERT_EQ(step.count, 2u);
      const Message& a = s.messages[step.first];
      const Message& b = s.messages[step.first + 1];
      EXPECT_EQ(a.peer, b.peer);
      EXPECT_EQ(a.bytes, count * 4);
      EXPECT_EQ(b.bytes, count * 4);
      EXPECT_EQ(a.gate, -1);
      partners.push_back(a.peer);
    }
    EXPECT_EQ(partners, (std::vector<int>{r ^ 1, r ^ 2, r ^ 4})) << DescribeSchedule(s);
  }
}

// For every gated send, the gate is a receive of the same exchange that writes the
// bytes the send reads (the data flow the gate stands for); every schedule is complete.
void CheckDataFlow(CallRecorder* recorder, const CallSpec& spec, const std::string& what) {
  std::vector<RankSchedule> all;
  const Status s = recorder->RecordAll(spec, &all);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  for (int r = 0; r < recorder->shape().p; ++r) {
    RankSchedule with;
    ASSERT_TRUE(recorder->RecordRank(spec, r, &with, true).ok());
    ASSERT_EQ(with.messages.size(), with.addresses.size());
    int gated = 0;
    for (const Step& step : with.steps) {
      for (uint32_t i = 0; i < step.count; ++i) {
        const Message& m = with.messages[step.first + i];
        if (m.gate < 0) continue;
        ++gated;
        const uintptr_t src = with.addresses[step.first + i];
        const uintptr_t dst = with.addresses[step.first + m.gate];
        const uint32_t wrote = with.messages[step.first + m.gate].bytes;
        EXPECT_TRUE(src >= dst && src < dst + wrote)
            << what << ": rank " << r << " message " << i << " gated on " << m.gate << " reads other data";
        EXPECT_EQ(with.GateOffsetOf(step.first + i), src - dst) << what << ": rank " << r << " message " << i;
      }
    }
    if (spec.algorithm == "ring" && recorder->shape().p > 2) {
      EXPECT_GT(gated, 0) << what;
    }
  }
}

TEST(RecorderTest, EveryAllReduceScheduleFitsAndItsGatesFollowTheData) {
  for (const std::string layout : {"4x2", "2x3", "3x1", "1x4", "3x4"}) {
    auto recorder = MakeRecorder(layout);
    for (const AlgorithmInfo& row : AlgorithmsOf(OpKind::kAllReduce)) {
      if (!row.applies(recorder->shape())) continue;
      for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) {
        CheckDataFlow(recorder.get(), AllReduce(row.name, count), layout + " " + row.name + " x" + std::to_string(count));
      }
    }
  }
}

TEST(RecorderTest, EveryOtherCollectiveAndTheTorusGridFitAndFollowTheData) {
  auto recorder = MakeRecorder("4x3", "2x6");
  for (OpKind c : {OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kBroadcast, OpKind::kReduce,
                       OpKind::kAlltoAll, OpKind::kGather, OpKind::kScatter}) {
    for (const AlgorithmInfo& row : AlgorithmsOf(c)) {
      if (!row.applies(recorder->shape())) continue;
      CallSpec spec;
      spec.collective = c;
      spec.algorithm = row.name;
      spec.count = 1000;
      spec.root = 1;
      CheckDataFlow(recorder.get(), spec, std::string(OpName(c)) + " " + row.name);
    }
  }
  CheckDataFlow(recorder.get(), AllReduce("torus", 5000), "torus 2x6");
}

TEST(RecorderTest, NamesRowsThatDoNotApply) {
  auto recorder = MakeRecorder("1x5");  // one host: no hierarchy
  RankSchedule s;
  const Status missing = recorder->RecordRank(AllReduce("tree", 8), 0, &s);
  EXPECT_EQ(missing.code(), Code::kInvalidArgument);
  const Status no_grid = recorder->RecordRank(AllReduce("hierarchical", 8), 0, &s);
  EXPECT_EQ(no_grid.code(), Code::kInvalidArgument);
  EXPECT_NE(no_grid.message().find("does not apply"), std::string::npos) << no_grid.ToString();
}

TEST(RecorderTest, TorusOnHostGridIsOneExchangeOfThreeRingPhases) {
  auto recorder = MakeRecorder("4x2");  // X = 2 ranks per host, Y = 4 hosts
  RankSchedule s;
  ASSERT_TRUE(recorder->RecordRank(AllReduce("torus", 8000), 3, &s).ok());
  ASSERT_EQ(s.steps.size(), 1u) << DescribeSchedule(s);
  // Row reduce-scatter (1 step of 4 pieces, a send and a receive each), column allreduce
  // on the half (2 x 3 steps of 4 sub-blocks of it), row allgather (as the first): rank 3
  // is local rank 1 of host 1, all blocks 8000 x 4 / 2 / 4 bytes.
  ASSERT_EQ(s.steps[0].count, 28u);
  int row = 0, column = 0, row_after_column = 0;
  for (uint32_t i = 0; i < s.steps[0].count; ++i) {
    const Message& m = s.messages[s.steps[0].first + i];
    EXPECT_EQ(m.bytes, 8000u * 4 / 2 / 4);
    if (m.peer == 2) ++row;
    if (m.peer == (m.is_send ? 5 : 1)) ++column;
    // A row allgather piece leaves on the column receive that made it final.
    if (m.peer == 2 && m.is_send && m.gate >= 0 && s.messages[s.steps[0].first + m.gate].peer == 1) ++row_after_column;
  }
  EXPECT_EQ(row, 16);
  EXPECT_EQ(column, 12);
  EXPECT_GT(row_after_column, 0) << DescribeSchedule(s);
  EXPECT_EQ(s.messages[s.steps[0].first].peer, 2);
}

// A column of 10 hosts takes its sub-blocks in runs of 2 (torus_allreduce.cc): the
// first column send reads the high sub-block of the row's first run, so it is gated at
// an offset into that run's receive, and row allgather pieces of 2 sub-blocks leave on
// the column receive of one. Both are in the schedule as the engine runs them.
TEST(RecorderTest, TorusRunsRecordTheirGateOffsets) {
  auto recorder = MakeRecorder("10x2");
  CheckDataFlow(recorder.get(), AllReduce("torus", 40000), "torus 2x10");
  RankSchedule s;
  ASSERT_TRUE(recorder->RecordRank(AllReduce("torus", 40000), 3, &s).ok());
  ASSERT_EQ(s.gate_offsets.size(), 1u) << DescribeSchedule(s);
  const Message& send = s.messages[s.gate_offsets[0].message];
  EXPECT_EQ(s.gate_offsets[0].offset, send.bytes) << "one sub-block into a run of two";
  int longer_than_gate = 0;
  for (const Step& step : s.steps) {
    for (uint32_t i = 0; i < step.count; ++i) {
      const Message& m = s.messages[step.first + i];
      if (m.gate >= 0 && m.bytes > s.messages[step.first + m.gate].bytes) ++longer_than_gate;
    }
  }
  EXPECT_GT(longer_than_gate, 0) << DescribeSchedule(s);
}

TEST(RecorderTest, MismatchedSchedulesAreNamed) {
  auto recorder = MakeRecorder("3x1");
  std::vector<RankSchedule> all;
  ASSERT_TRUE(recorder->RecordAll(AllReduce("ring", 30), &all).ok());
  all[1].messages[0].bytes += 4;  // rank 1's first message changes size
  const Status s = CheckSchedulesMatch(all);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace tessera
