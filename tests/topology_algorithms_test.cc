// Every allreduce algorithm, forced with TESSERA_ALGO, exact against a serial sum on
// emulated layouts of H hosts x R ranks (TESSERA_HOST_ID per rank: shared memory inside
// an emulated host, TCP between), with counts that divide by nothing, and the torus on
// forced grids. Algorithms that do not apply to a layout (hierarchical on one host)
// fall back to the model's choice, which must be exact too.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

struct Layout {
  int hosts;
  int per_host;
};

struct Case {
  Layout layout;
  const char* algo;
  const char* torus;  // TESSERA_TORUS or ""
};

float Input(size_t i, int rank) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 31) - 15); }

std::string Check(int rank, tesseraComm_t comm, int nranks) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{65537}}) {
    for (bool in_place : {false, true}) {
      std::vector<float> send(count), recv(count, -99.0f);
      for (size_t i = 0; i < count; ++i) send[i] = Input(i, rank);
      float* out = in_place ? send.data() : recv.data();
      tesseraResult_t r = tesseraAllReduce(send.data(), out, count, tesseraFloat32, tesseraSum, comm, nullptr);
      if (r != tesseraSuccess) return "count " + std::to_string(count) + ": " + tesseraGetLastError(comm);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 0; q < nranks; ++q) want += Input(i, q);
        if (out[i] != want) {
          return "count " + std::to_string(count) + (in_place ? " in-place" : "") + ": [" + std::to_string(i) +
                 "] = " + std::to_string(out[i]) + ", want " + std::to_string(want) + " (algorithm " +
                 tesseraAllReduceAlgorithm(comm, count, tesseraFloat32) + ")";
        }
      }
    }
  }
  return "";
}

class TopologyAlgorithms : public testing::TestWithParam<Case> {};

TEST_P(TopologyAlgorithms, ExactOnLayout) {
  const Case& c = GetParam();
  const int n = c.layout.hosts * c.layout.per_host;
  RankOptions opts;
  opts.timeout = std::chrono::milliseconds(120000);
  opts.ranks_per_host = c.layout.per_host;
  opts.env["TESSERA_TIMEOUT_MS"] = "60000";
  opts.env["TESSERA_ALGO"] = c.algo;
  if (c.torus[0] != '\0') opts.env["TESSERA_TORUS"] = c.torus;
  auto results = RunRanks(n, [n](int rank, tesseraComm_t comm) { return Check(rank, comm, n); }, opts);
  EXPECT_EQ("", Failures(results));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const Layout layouts[] = {{1, 1}, {1, 4}, {2, 2}, {4, 2}, {2, 4}, {3, 3}, {3, 1}};
  for (const Layout& l : layouts) {
    for (const char* algo : {"ring", "recursive_doubling", "rabenseifner", "torus", "hierarchical",
                             "hierarchical_leader", "hierarchical_doubling"}) {
      cases.push_back({l, algo, ""});
    }
  }
  // Forced grids that cut across hosts.
  cases.push_back({{2, 2}, "torus", "1x4"});
  cases.push_back({{4, 2}, "torus", "2x4"});
  cases.push_back({{3, 3}, "torus", "3x3"});
  cases.push_back({{1, 4}, "torus", "2x2"});
  return cases;
}

std::string Name(const testing::TestParamInfo<Case>& info) {
  std::string torus = info.param.torus;
  for (char& ch : torus) ch = ch == 'x' ? '_' : ch;
  return std::to_string(info.param.layout.hosts) + "x" + std::to_string(info.param.layout.per_host) + "_" +
         info.param.algo + (torus.empty() ? "" : "_grid" + torus);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TopologyAlgorithms, testing::ValuesIn(Cases()), Name);

// A layout file (TESSERA_TOPO_FILE) makes one machine look like 2 hosts x 2 ranks with
// an interleaved placement: hierarchical then applies, and is exact.
TEST(TopologyFile, EmulatesHostsFromALayoutFile) {
  const std::string path = testing::TempDir() + "/layout-2x2.txt";
  {
    std::ofstream f(path);
    f << "tessera-layout 1\n# two emulated hosts, ranks interleaved\nnodeA 0 2\nnodeB 1 3\n";
  }
  RankOptions opts;
  opts.timeout = std::chrono::milliseconds(60000);
  opts.env["TESSERA_TOPO_FILE"] = path;
  opts.env["TESSERA_ALGO"] = "hierarchical";
  auto results = RunRanks(4, [](int rank, tesseraComm_t comm) {
    const char* algo = tesseraAllReduceAlgorithm(comm, 1 << 20, tesseraFloat32);
    if (algo == nullptr || std::string(algo) != "hierarchical") {
      return std::string("expected hierarchical on 2 emulated hosts, got ") + (algo ? algo : "NULL");
    }
    return Check(rank, comm, 4);
  }, opts);
  EXPECT_EQ("", Failures(results));
  // A file for another rank count is refused by name.
  opts.env.erase("TESSERA_ALGO");
  auto bad = RunRanksRaw(2, [&](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, ctx.nranks, ctx.ids[0], ctx.rank);
    const std::string msg = tesseraGetLastError(nullptr);
    if (r == tesseraSuccess) return std::string("init succeeded with a 4-rank layout for 2 ranks");
    return msg.find("TESSERA_TOPO_FILE") != std::string::npos ? std::string() : "message lacks the setting: " + msg;
  }, opts);
  EXPECT_EQ("", Failures(bad));
}

// A layout file's fabric lines (topology/fabric.h): 4 hosts x 2 ranks in 2 racks whose
// uplinks carry a third of their hosts' links, 2 NICs a host. Every rank agrees on the
// fabric, and the model's choice and the schedules it shapes (Rabenseifner's
// nearest-first halving, the torus's width) are exact on it. Racks that differ between
// ranks fail creation on every rank, naming the fabrics.
TEST(TopologyFile, FabricOfTwoRacksIsAgreedAndExact) {
  const std::string path = testing::TempDir() + "/layout-racks.txt";
  {
    std::ofstream f(path);
    f << "tessera-layout 1\nfabric nics 2\nfabric rack r0 a0 a1\nfabric rack r1 b0 b1\n"
         "a0 0 1\na1 2 3\nb0 4 5\nb1 6 7\n";
  }
  RankOptions opts;
  opts.timeout = std::chrono::milliseconds(120000);
  opts.env["TESSERA_TOPO_FILE"] = path;
  opts.env["TESSERA_RACK_UPLINK_PERCENT"] = "33";
  for (const char* algo : {"", "rabenseifner", "torus", "hierarchical"}) {
    if (algo[0] != '\0') opts.env["TESSERA_ALGO"] = algo;
    auto results = RunRanks(8, [](int rank, tesseraComm_t comm) { return Check(rank, comm, 8); }, opts);
    EXPECT_EQ("", Failures(results)) << (algo[0] != '\0' ? algo : "the model's choice");
  }
  opts.env.erase("TESSERA_ALGO");
  opts.env_for_rank = [](int rank) {
    EnvVars env;
    if (rank == 5) env["TESSERA_RACK_UPLINK_PERCENT"] = "50";
    return env;
  };
  auto bad = RunRanksRaw(8, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRank(&comm, ctx.nranks, ctx.ids[0], ctx.rank);
    const std::string msg = tesseraGetLastError(nullptr);
    if (r == tesseraSuccess) return std::string("init succeeded with rank 5's uplinks differing");
    return msg.find("different fabrics") != std::string::npos && msg.find("rank 5") != std::string::npos
               ? std::string()
               : "message lacks the fabrics: " + msg;
  }, opts);
  EXPECT_EQ("", Failures(bad));
}

// Counts the "send to" events of every trace file in `dir`, per file.
std::vector<int> SendsPerRank(const std::string& dir) {
  std::vector<int> sends;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return sends;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("tessera-trace-", 0) != 0) continue;
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    const std::string t = text.str();
    int n = 0;
    for (size_t at = t.find("allreduce#1 (torus) send to"); at != std::string::npos;
         at = t.find("allreduce#1 (torus) send to", at + 1)) {
      ++n;
    }
    sends.push_back(n);
  }
  closedir(d);
  return sends;
}

// The trace of a 2D torus allreduce on an X x Y grid shows 2(X-1) + 2(Y-1) ring steps per
// rank, against the flat ring's 2(XY-1): a send per column step, and a row step cut into
// Y pieces (Y <= 8) that leave as the column needs or makes them (torus_allreduce.cc).
TEST(TopologyTrace, TorusTakesTwoXMinusOnePlusTwoYMinusOneSteps) {
  struct Grid {
    int hosts, per_host;
    const char* torus;
    int X, Y;
  };
  for (const Grid& g : {Grid{4, 2, "", 2, 4}, Grid{2, 4, "", 4, 2}, Grid{3, 3, "", 3, 3}, Grid{2, 2, "4x1", 4, 1}}) {
    char dir_template[] = "/tmp/tessera-trace-test-XXXXXX";
    const std::string dir = mkdtemp(dir_template);
    const int n = g.hosts * g.per_host;
    RankOptions opts;
    opts.timeout = std::chrono::milliseconds(60000);
    opts.ranks_per_host = g.per_host;
    opts.env["TESSERA_ALGO"] = "torus";
    opts.env["TESSERA_TRACE_DIR"] = dir;
    if (g.torus[0] != '\0') opts.env["TESSERA_TORUS"] = g.torus;
    auto results = RunRanks(n, [n](int rank, tesseraComm_t comm) {
      std::vector<float> buf(1031, 1.0f);
      if (tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat32, tesseraSum, comm, nullptr) != tesseraSuccess) {
        return std::string(tesseraGetLastError(comm));
      }
      return buf[0] == static_cast<float>(n) ? std::string() : "wrong sum";
    }, opts);
    ASSERT_EQ("", Failures(results));
    const std::vector<int> sends = SendsPerRank(dir);
    ASSERT_EQ(static_cast<int>(sends.size()), n) << "trace files in " << dir;
    for (int s : sends) EXPECT_EQ(s, 2 * (g.X - 1) * g.Y + 2 * (g.Y - 1)) << g.X << "x" << g.Y;
    std::system(("rm -rf " + dir).c_str());
  }
}

}  // namespace
}  // namespace tessera_test
