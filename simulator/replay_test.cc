// The replay against closed forms on trivial platforms: a ring allreduce moving whole
// blocks (store and forward: 2(p-1) steps of latency + block / rate, plus the
// reductions), a chain broadcast pipelined in chunks ((n/c + p - 2) chunk times), and
// the platform's refusals.
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
    TESSERA_RETURN_IF_ERROR(CallRecorder::Create(layout, "", &recorder));
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
