// Allgather and reduce-scatter along the host grid (collectives/grid_allgather.cc,
// grid_reduce_scatter.cc), exact against the serial reference on emulated layouts of
// H hosts x R ranks (TESSERA_HOST_ID per rank: shared memory inside a host, TCP between),
// with the grid forced (TESSERA_ALGO=hierarchical or torus), the flat ring forced, and
// the model's choice (auto). Counts 0, 1, odd and large; in place and out of place;
// int8, int32, bfloat16 (sum, widened to float32), float32 (sum, max, avg, PreMulSum)
// and float64. Layouts with X = 1 or Y = 1 fall back to the ring and must be exact too;
// an interleaved placement gives rows that are not rank-contiguous.
//
// The traces (TESSERA_TRACE_DIR) show which schedule ran: the grid's Y - 1 messages
// across hosts and Y inside, to two peers, against the flat ring's p - 1 to one.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/collective_calls.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

struct Case {
  int hosts;
  int per_host;
  const char* algo;   // TESSERA_ALGO
  bool interleaved;   // rank r on host r % hosts, instead of r / per_host
  const char* torus;  // TESSERA_TORUS or ""
};

// Every (collective, type, op, count, placement) of the suite on one communicator.
std::string CheckAll(int rank, int nranks, tesseraComm_t comm) {
  struct TypeOps {
    tesseraDataType_t type;
    std::vector<OpKind> ops;
  };
  const std::vector<TypeOps> types = {
      {tesseraFloat32, {OpKind::kSum, OpKind::kMax, OpKind::kAvg, OpKind::kPreMulSum}},
      {tesseraBfloat16, {OpKind::kSum}},
      {tesseraInt8, {OpKind::kSum}},
      {tesseraInt32, {OpKind::kSum}},
      {tesseraFloat64, {OpKind::kSum}},
  };
  std::string failures;
  int call_index = 0;
  for (Collective kind : {Collective::kAllGather, Collective::kReduceScatter}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{20011}}) {
      for (const TypeOps& t : types) {
        for (OpKind op : kind == Collective::kAllGather ? std::vector<OpKind>{OpKind::kCopy} : t.ops) {
          for (bool in_place : {false, true}) {
            CallSpec s{kind, t.type, op, in_place, 0, count, call_index++};
            PreparedCall call(s, rank, nranks);
            if (call.CreateOp(comm) != tesseraSuccess) return call.what() + ": create op: " + LastError(nullptr);
            std::string step;
            const tesseraResult_t r = call.Issue(comm, &step);
            const std::string message = r == tesseraSuccess ? "" : LastError(nullptr);
            call.DestroyOp(comm);
            if (r != tesseraSuccess) return call.what() + ": " + step + " returned " + CodeName(r) + ": " + message;
            const std::string wrong = call.Check();
            if (!wrong.empty()) failures += wrong + "\n";
            if (failures.size() > 2000) return failures;
          }
        }
      }
    }
  }
  return failures;
}

RankOptions OptionsFor(const Case& c) {
  RankOptions opts;
  opts.timeout = std::chrono::milliseconds(120000);
  opts.failure_grace = std::chrono::milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = "60000";
  opts.env["TESSERA_ALGO"] = c.algo;
  if (c.torus[0] != '\0') opts.env["TESSERA_TORUS"] = c.torus;
  const int hosts = c.hosts, per_host = c.per_host;
  const bool interleaved = c.interleaved;
  opts.env_for_rank = [hosts, per_host, interleaved](int rank) {
    const int host = interleaved ? rank % hosts : rank / per_host;
    return EnvVars{{"TESSERA_HOST_ID", "host" + std::to_string(host)}};
  };
  return opts;
}

class GridCollectives : public testing::TestWithParam<Case> {};

TEST_P(GridCollectives, ExactOnLayout) {
  const Case& c = GetParam();
  const int n = c.hosts * c.per_host;
  auto results = RunRanks(n, [n](int rank, tesseraComm_t comm) { return CheckAll(rank, n, comm); }, OptionsFor(c));
  EXPECT_EQ("", Failures(results));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const auto& l : std::vector<std::pair<int, int>>{{2, 2}, {4, 2}, {2, 4}, {3, 3}, {3, 1}, {1, 4}}) {
    cases.push_back({l.first, l.second, "hierarchical", false, ""});
    cases.push_back({l.first, l.second, "auto", false, ""});
  }
  cases.push_back({2, 3, "hierarchical", true, ""});  // rows {0,2,4} and {1,3,5}
  cases.push_back({2, 2, "ring", false, ""});
  cases.push_back({2, 4, "torus", false, "2x4"});  // rows of 2 inside hosts, columns of 4
  cases.push_back({1, 4, "torus", false, "2x2"});  // a forced grid on one host
  return cases;
}

std::string Name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string torus = c.torus;
  for (char& ch : torus) ch = ch == 'x' ? '_' : ch;
  return std::to_string(c.hosts) + "x" + std::to_string(c.per_host) + "_" + c.algo +
         (c.interleaved ? "_interleaved" : "") + (torus.empty() ? "" : "_grid" + torus);
}

INSTANTIATE_TEST_SUITE_P(Layouts, GridCollectives, testing::ValuesIn(Cases()), Name);

// What one rank's trace shows of one operation's sends.
struct SendStats {
  int sends = 0;
  int network_sends = 0;   // over TCP: across emulated hosts
  std::vector<int> peers;  // distinct, in order of appearance
};

// Per trace file in `dir`, the sends of operation `label` (e.g. "allgather#1 (grid)").
std::vector<SendStats> SendsPerRank(const std::string& dir, const std::string& label) {
  std::vector<SendStats> all;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return all;
  const std::string needle = "\"" + label + " send to ";
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("tessera-trace-", 0) != 0) continue;
    std::ifstream in(dir + "/" + name);
    SendStats stats;
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(needle);
      if (at == std::string::npos) continue;
      ++stats.sends;
      const int peer = std::atoi(line.c_str() + at + needle.size());
      bool seen = false;
      for (int q : stats.peers) seen = seen || q == peer;
      if (!seen) stats.peers.push_back(peer);
      if (line.find("\"link\": \"tcp\"") != std::string::npos) ++stats.network_sends;
    }
    all.push_back(stats);
  }
  closedir(d);
  return all;
}

// The trace names the schedule that ran and shows its shape. On the host grid X x Y
// every rank sends Y - 1 messages across hosts and Y inside its host, to two
// peers (column and row neighbours); the flat ring sends p - 1 messages to one peer.
// Where the hosts give no grid (X or Y is 1), a forced grid falls back to the ring.
TEST(GridTrace, ScheduleAndMessagesPerRank) {
  struct Expect {
    Case c;
    const char* name;  // what the trace must call the schedule
    int X, Y;          // the grid that runs (0 x 0 for the flat ring)
  };
  const Expect expects[] = {
      {{4, 2, "hierarchical", false, ""}, "grid", 2, 4},
      {{2, 4, "auto", false, ""}, "grid", 4, 2},  // (Y-1)/Y = 1/2 of the ring's 7/8 across hosts
      {{2, 3, "hierarchical", true, ""}, "grid", 3, 2},
      {{2, 2, "ring", false, ""}, "ring", 0, 0},
      {{3, 1, "hierarchical", false, ""}, "ring", 0, 0},
      {{1, 4, "torus", false, ""}, "ring", 0, 0},
  };
  for (const Expect& e : expects) {
    char dir_template[] = "/tmp/tessera-grid-trace-XXXXXX";
    const std::string dir = mkdtemp(dir_template);
    const int n = e.c.hosts * e.c.per_host;
    RankOptions opts = OptionsFor(e.c);
    opts.env["TESSERA_TRACE_DIR"] = dir;
    opts.env["TESSERA_PROBE"] = "0";  // the built-in model: the auto choice is known
    auto results = RunRanks(n, [n](int rank, tesseraComm_t comm) {
      const size_t count = 1 << 16;
      std::vector<float> send(count, static_cast<float>(rank)), all(count * n);
      if (tesseraAllGather(send.data(), all.data(), count, tesseraFloat32, comm, nullptr) != tesseraSuccess) {
        return std::string(tesseraGetLastError(comm));
      }
      for (int q = 0; q < n; ++q) {
        if (all[q * count + 5] != static_cast<float>(q)) return "allgather: block " + std::to_string(q) + " wrong";
      }
      std::vector<float> ones(count * n, 1.0f), mine(count);
      if (tesseraReduceScatter(ones.data(), mine.data(), count, tesseraFloat32, tesseraSum, comm, nullptr) !=
          tesseraSuccess) {
        return std::string(tesseraGetLastError(comm));
      }
      return mine[count - 1] == static_cast<float>(n) ? std::string() : "reduce-scatter: wrong sum";
    }, opts);
    const std::string where = Name(testing::TestParamInfo<Case>(e.c, 0));
    ASSERT_EQ("", Failures(results)) << where;
    for (const std::string op : {"allgather#1", "reduce-scatter#2"}) {
      const std::vector<SendStats> ranks = SendsPerRank(dir, op + " (" + e.name + ")");
      ASSERT_EQ(static_cast<int>(ranks.size()), n) << where << ": trace files in " << dir;
      for (const SendStats& r : ranks) {
        if (e.X == 0) {
          EXPECT_EQ(r.sends, n - 1) << where << ": " << op;
          EXPECT_EQ(r.peers.size(), 1u) << where << ": " << op;
        } else {
          EXPECT_EQ(r.sends, (e.Y - 1) + (e.X - 1) * e.Y) << where << ": " << op;
          EXPECT_EQ(r.network_sends, e.Y - 1) << where << ": " << op;
          EXPECT_EQ(r.peers.size(), 2u) << where << ": " << op;
        }
      }
    }
    EXPECT_EQ(0, std::system(("rm -rf " + dir).c_str()));
  }
}

}  // namespace
}  // namespace tessera_test
