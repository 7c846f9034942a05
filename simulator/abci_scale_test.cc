// Every allreduce algorithm of the table replayed to completion on ABCI
// (platforms/abci.platform) at the scale of Mikami et al., on ResNet-50's fp16 gradient:
// no replay may deadlock, and none may beat what a node's NICs allow. The layouts are
// TESSERA_SCALE_TEST_LAYOUTS (HxR, comma-separated; BUILD sets them: 64 x 4 GPUs in
// CI, where the torus and hierarchical replays once deadlocked as they do at 544 x 4,
// which a target tagged manual runs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "simulator/platform.h"
#include "simulator/recorder.h"
#include "simulator/replay.h"

namespace tessera {
namespace {

constexpr size_t kResNet50Params = 25557032;  // fp16 on the wire: 51,114,064 bytes

std::vector<std::string> Layouts() {
  const char* env = std::getenv("TESSERA_SCALE_TEST_LAYOUTS");
  std::vector<std::string> out;
  std::istringstream in(env != nullptr ? env : "64x4");
  for (std::string l; std::getline(in, l, ',');) out.push_back(l);
  return out;
}

// Every allreduce moves at least 2 (N-1)/N of the buffer out of each of N nodes
// (Patarasuk and Yuan's bound with nodes as the participants), through its NICs.
double NicBoundSeconds(const Platform& p, int nodes, double bytes) {
  return 2.0 * (nodes - 1) / nodes * bytes / (p.nics * p.nic_Bps);
}

TEST(AbciScaleTest, EveryAllReduceCompletesAboveTheNicBound) {
  Platform platform;
  ASSERT_TRUE(ReadPlatformFile("simulator/platforms/abci.platform", &platform).ok());
  for (const std::string& spec : Layouts()) {
    Layout layout;
    ASSERT_TRUE(LayoutFromSpec(spec, &layout).ok()) << spec;
    std::unique_ptr<CallRecorder> recorder;
    ASSERT_TRUE(CallRecorder::Create(layout, "", platform.Fabric(), platform.Model(), &recorder).ok());
    const double bound = NicBoundSeconds(platform, layout.num_hosts(), 2.0 * kResNet50Params);
    int replayed = 0;
    for (const AlgorithmInfo& a : AlgorithmsOf(OpKind::kAllReduce)) {
      if (!a.applies(recorder->shape())) continue;
      CallSpec call;
      call.algorithm = a.name;
      call.count = kResNet50Params;
      call.elem_size = 2;
      ReplayResult r;
      const Status s = Replay(platform, layout, [&](std::vector<RankSchedule>* out) {
        return recorder->RecordAll(call, out);
      }, &r, ReplayOptionsFor(a));
      ++replayed;
      EXPECT_TRUE(s.ok()) << spec << " " << a.name << ": " << s.ToString();
      if (!s.ok()) continue;
      EXPECT_TRUE(std::isfinite(r.seconds)) << spec << " " << a.name;
      EXPECT_GE(r.seconds, bound) << spec << " " << a.name << " beats the NICs' bound";
      ASSERT_EQ(r.finish_s.size(), static_cast<size_t>(layout.nranks()));
      for (double f : r.finish_s) EXPECT_GT(f, 0) << spec << " " << a.name;
      std::printf("%s %-22s %10.1f us simulated (NIC bound %.1f us)\n", spec.c_str(), a.name, r.seconds * 1e6,
                  bound * 1e6);
    }
    EXPECT_GE(replayed, 6) << spec;  // ring, both doublings, the torus and the hierarchies
  }
}

}  // namespace
}  // namespace tessera
