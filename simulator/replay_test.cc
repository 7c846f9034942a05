// The replay against closed forms on trivial platforms: a ring allreduce moving whole
// blocks (store and forward: 2(p-1) steps of latency + block / rate, plus the
// reductions), a chain broadcast pipelined in chunks ((n/c + p - 2) chunk times), and
// the platform's refusals; gated sends on hand-written schedules (an offset into the
// gate, a send longer than its gate) and a replay that cannot complete.
#include "simulator/replay.h"

#include <gtest/gtest.h>

#include <string>

#include "simulator/recorder.h"

namespace tessera {
namespace {

// Nodes of one rank behind 1 GB/s NICs (1 us each) on a fast switch (0.5 us per
// link); reductions at `reduce_gbps`; a message wakes its receiver with its first
// `wake_bytes` (default: a whole chunk) and costs it `overhead_us` from then.
Platform Trivial(const std::string& chunk_bytes, double reduce_gbps, const std::string& wake_bytes = "",
                 double overhead_us = 0) {
  const std::string text =
      "name = trivial\n"
      "intra.GBps = 10\n"
      "nic.GBps = 1\n"
      "nic.latency_us = 1\n"
      "fabric.link_GBps = 1000\n"
      "fabric.latency_us = 0.5\n"
      "inter.chunk_bytes = " + chunk_bytes + "\n"
      "inter.wake_bytes = " + (wake_bytes.empty() ? chunk_bytes : wake_bytes) + "\n"
      "inter.overhead_us = " + std::to_string(overhead_us) + "\n"
      "reduce.GBps = " + std::to_string(reduce_gbps) + "\n"
      "copy.GBps = 1000000\n";
  Platform p;
  const Status s = ParsePlatform(text, "trivial", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

constexpr double kHopS = 2 * 1e-6 + 2 * 0.5e-6;  // NIC, leaf link up, leaf link down, NIC

// A chain broadcast of n bytes.
CallSpec ChainBroadcast(double n) {
  CallSpec spec;
  spec.collective = OpKind::kBroadcast;
  spec.algorithm = "chain";
  spec.count = static_cast<size_t>(n);
  spec.elem_size = 1;
  return spec;
}

ReplayResult Simulated(const Platform& platform, const std::string& layout_spec, const CallSpec& spec) {
  Layout layout;
  EXPECT_TRUE(LayoutFromSpec(layout_spec, &layout).ok());
  ReplayResult result;
  const Status s = Replay(platform, layout, [&](std::vector<RankSchedule>* out) {
    std::unique_ptr<CallRecorder> recorder;
    TESSERA_RETURN_IF_ERROR(CallRecorder::Create(layout, "", FabricShape(), CostModel(), &recorder));
    return recorder->RecordAll(spec, out);
  }, &result);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return result;
}

TEST(ReplayTest, RingOfWholeBlocksMatchesTheClosedForm) {
  const int p = 4;
  const double n = 4e6;  // bytes: blocks of 1 MB, moved whole (one chunk each)
  CallSpec spec;
  spec.algorithm = "ring";
  spec.count = static_cast<size_t>(n / 4);
  const ReplayResult r = Simulated(Trivial("16777216", 2), "4x1", spec);
  const double block = n / p;
  const double expected = 2 * (p - 1) * (kHopS + block / 1e9) + (p - 1) * block / 2e9;
  EXPECT_NEAR(r.seconds, expected, expected * 1e-6) << "simulated " << r.seconds << " s";
  ASSERT_EQ(r.finish_s.size(), 4u);
}

TEST(ReplayTest, ChainBroadcastPipelinesItsChunks) {
  const int p = 4;
  const double n = 8e6, c = 1e6;
  const CallSpec spec = ChainBroadcast(n);
  const ReplayResult r = Simulated(Trivial("1000000", 100), "4x1", spec);
  const double expected = (n / c + p - 2) * (kHopS + c / 1e9);
  EXPECT_NEAR(r.seconds, expected, expected * 1e-6) << "simulated " << r.seconds << " s";
  // Store and forward (whole buffer per hop) would take (p - 1) n / rate: 24 ms.
  EXPECT_LT(r.seconds, 0.5 * (p - 1) * n / 1e9);
}

// One message of n bytes: its first w bytes (sharing the link with the rest while they
// fly) wake the receiver, whose overhead o then runs beside the arrival of the rest.
TEST(ReplayTest, TheReceiversOverheadRunsFromTheFirstBytes) {
  const double n = 1e6, w = 1e4;
  const CallSpec spec = ChainBroadcast(n);
  for (double o_us : {100.0, 2000.0}) {
    const ReplayResult r = Simulated(Trivial("16777216", 100, "10000", o_us), "2x1", spec);
    const double arrived = kHopS + n / 1e9, noticed = kHopS + 2 * w / 1e9 + o_us * 1e-6;
    const double expected = std::max(arrived, noticed);
    EXPECT_NEAR(r.seconds, expected, expected * 1e-6) << "overhead " << o_us << " us: simulated " << r.seconds;
  }
}

// A hand-written schedule of one exchange per rank: (peer, bytes, is_send, gate).
RankSchedule OneExchange(const std::vector<Message>& messages) {
  RankSchedule s;
  s.messages = messages;
  Step step;
  step.count = static_cast<uint32_t>(messages.size());
  s.steps.push_back(step);
  return s;
}

Message Msg(int peer, uint32_t bytes, bool is_send, int gate = -1) {
  Message m;
  m.peer = peer;
  m.bytes = bytes;
  m.is_send = is_send ? 1 : 0;
  m.gate = gate;
  return m;
}

Status ReplaySchedules(const Platform& platform, const std::string& layout_spec, std::vector<RankSchedule> all,
                       ReplayResult* result) {
  Layout layout;
  EXPECT_TRUE(LayoutFromSpec(layout_spec, &layout).ok());
  return Replay(platform, layout, [&](std::vector<RankSchedule>* out) {
    *out = all;
    return Status::Ok();
  }, result);
}

// Rank 1 forwards the last quarter of what it receives from rank 0 (a gate offset, as
// the torus's first column send): the forward waits for the fourth chunk, not the
// first. Chunks of c move one at a time per queue, T each.
TEST(ReplayTest, ASendGatedAtAnOffsetWaitsForThoseBytes) {
  const double c = 1e6, T = kHopS + c / 1e9;
  std::vector<RankSchedule> all = {
      OneExchange({Msg(1, 4000000, true)}),
      OneExchange({Msg(0, 4000000, false), Msg(2, 1000000, true, 0)}),
      OneExchange({Msg(1, 1000000, false)}),
  };
  all[1].gate_offsets.push_back(GateOffset{1, 3000000});
  ReplayResult r;
  const Status s = ReplaySchedules(Trivial("1000000", 100), "3x1", all, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(r.seconds, 5 * T, 5 * T * 1e-6) << "simulated " << r.seconds;
}

// A send longer than its gate (the torus's row allgather piece of several sub-blocks
// leaves on the column receive of the last one): once the gate is done, the send may
// read all of its data, as the engine's Available says.
TEST(ReplayTest, ASendLongerThanItsGateLeavesOnceTheGateIsDone) {
  std::vector<RankSchedule> all = {
      OneExchange({Msg(1, 1000000, true)}),
      OneExchange({Msg(0, 1000000, false), Msg(2, 3000000, true, 0)}),
      OneExchange({Msg(1, 3000000, false)}),
  };
  ReplayResult r;
  const Status s = ReplaySchedules(Trivial("1000000", 100), "3x1", all, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double T = kHopS + 1e6 / 1e9;
  EXPECT_NEAR(r.seconds, 4 * T, 4 * T * 1e-6) << "simulated " << r.seconds;
}

// Two ranks each forwarding what only the other would send: no time, but an error that
// says the replay cannot complete and where each rank stopped.
TEST(ReplayTest, AReplayThatCannotCompleteFailsNamingWhereRanksStopped) {
  std::vector<RankSchedule> all = {
      OneExchange({Msg(1, 1000, false), Msg(1, 1000, true, 0)}),
      OneExchange({Msg(0, 1000, false), Msg(0, 1000, true, 0)}),
  };
  ReplayResult r;
  const Status s = ReplaySchedules(Trivial("1000000", 100), "2x1", all, &r);
  EXPECT_EQ(s.code(), Code::kInternalError) << s.ToString();
  EXPECT_NE(s.message().find("cannot complete: 2 of 2 ranks"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("rank 0 stopped in step 0 of 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("gated on the receive of 1000 B from rank 1"), std::string::npos) << s.ToString();
  EXPECT_EQ(r.seconds, 0);
}

TEST(ReplayTest, RefusesANodeOverItsRanks) {
  Platform p = Trivial("1000000", 100);
  p.max_ranks_per_node = 2;
  Layout layout;
  ASSERT_TRUE(LayoutFromSpec("1x3", &layout).ok());
  ReplayResult result;
  const Status s = Replay(p, layout, [](std::vector<RankSchedule>* out) {
    out->assign(3, RankSchedule());
    return Status::Ok();
  }, &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("node.max_ranks"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace tessera
