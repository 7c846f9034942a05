// The communicator layout, tested the way UCC tests its topology: each rank's host is
// faked (a hand-made vector of host identities, or a layout file each rank reads), and
// the queries every hierarchical algorithm relies on are checked against the intended
// placement. Also the layout file format: round trips and every malformed-file error.
#include "topology/layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

namespace tessera {
namespace {

Layout MustBuild(const std::vector<std::string>& host_ids) {
  Layout layout;
  Status status = Layout::FromHostIds(host_ids, &layout);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return layout;
}

// A path for a scratch file that no other test running at the same time uses.
std::string ScratchPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/layout_test_" + std::to_string(getpid()) + "_" + name;
}

void WriteText(const std::string& path, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), file), text.size());
  ASSERT_EQ(std::fclose(file), 0);
}

// Host identities as the real detection makes them: hostname, net namespace, boot id.
std::string RealLookingId(int host) {
  return "node" + std::to_string(host) + "/net:40265318" + std::to_string(40 + host) + "/boot:5e1f00" +
         std::to_string(10 + host);
}

// Hosts x ranks, block placement, written out by hand rather than by MakeGridLayout.
std::vector<std::string> BlockHostIds(int hosts, int ranks_per_host) {
  std::vector<std::string> ids;
  for (int host = 0; host < hosts; ++host) {
    for (int local = 0; local < ranks_per_host; ++local) ids.push_back(RealLookingId(host));
  }
  return ids;
}

struct HostsByRanks {
  int hosts;
  int ranks_per_host;
};

void PrintTo(const HostsByRanks& grid, std::ostream* out) { *out << grid.hosts << "x" << grid.ranks_per_host; }

class RegularLayoutTest : public ::testing::TestWithParam<HostsByRanks> {};

TEST_P(RegularLayoutTest, QueriesMatchTheBlockPlacement) {
  const int hosts = GetParam().hosts, per_host = GetParam().ranks_per_host;
  const Layout layout = MustBuild(BlockHostIds(hosts, per_host));
  ASSERT_EQ(layout.nranks(), hosts * per_host);
  EXPECT_EQ(layout.num_hosts(), hosts);
  EXPECT_TRUE(layout.IsRegular());
  EXPECT_EQ(layout.RanksPerHost(), per_host);
  for (int rank = 0; rank < layout.nranks(); ++rank) {
    EXPECT_EQ(layout.HostOf(rank), rank / per_host) << "rank " << rank;
    EXPECT_EQ(layout.LocalRank(rank), rank % per_host) << "rank " << rank;
    EXPECT_EQ(layout.LocalSize(rank), per_host) << "rank " << rank;
  }
  for (int host = 0; host < hosts; ++host) {
    EXPECT_EQ(layout.HostId(host), RealLookingId(host));
    std::vector<int> expected;
    for (int local = 0; local < per_host; ++local) {
      expected.push_back(host * per_host + local);
      EXPECT_EQ(layout.RankAt(host, local), host * per_host + local);
    }
    EXPECT_EQ(layout.RanksOnHost(host), expected) << "host " << host;
    EXPECT_EQ(layout.RankAt(host, per_host), -1);
  }
  for (int local = 0; local < per_host; ++local) {
    std::vector<int> expected;
    for (int host = 0; host < hosts; ++host) expected.push_back(host * per_host + local);
    EXPECT_EQ(layout.RanksWithLocalRank(local), expected) << "local rank " << local;
  }
  EXPECT_TRUE(layout.RanksWithLocalRank(per_host).empty());

  // The generator makes the same grouping (with its own host names).
  Layout generated;
  ASSERT_TRUE(MakeGridLayout(hosts, per_host, Placement::kBlock, &generated).ok());
  for (int rank = 0; rank < layout.nranks(); ++rank) {
    EXPECT_EQ(generated.HostOf(rank), layout.HostOf(rank));
    EXPECT_EQ(generated.LocalRank(rank), layout.LocalRank(rank));
  }
  Layout from_spec;
  ASSERT_TRUE(LayoutFromSpec(std::to_string(hosts) + "x" + std::to_string(per_host), &from_spec).ok());
  EXPECT_EQ(from_spec, generated);
}

INSTANTIATE_TEST_SUITE_P(Grids, RegularLayoutTest,
                         ::testing::Values(HostsByRanks{1, 1}, HostsByRanks{1, 4}, HostsByRanks{2, 2}, HostsByRanks{4, 2}, HostsByRanks{2, 4}, HostsByRanks{3, 3},
                                           HostsByRanks{3, 1}),
                         [](const ::testing::TestParamInfo<HostsByRanks>& info) {
                           return std::to_string(info.param.hosts) + "x" + std::to_string(info.param.ranks_per_host);
                         });

TEST(Layout, IrregularThreePlusOne) {
  const Layout layout = MustBuild({"a", "a", "a", "b"});
  EXPECT_EQ(layout.num_hosts(), 2);
  EXPECT_FALSE(layout.IsRegular());
  EXPECT_EQ(layout.RanksPerHost(), 0);
  EXPECT_EQ(layout.LocalSize(0), 3);
  EXPECT_EQ(layout.LocalSize(3), 1);
  EXPECT_EQ(layout.LocalRank(2), 2);
  EXPECT_EQ(layout.LocalRank(3), 0);
  EXPECT_EQ(layout.HostOf(3), 1);
  EXPECT_EQ(layout.RanksOnHost(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(layout.RanksOnHost(1), (std::vector<int>{3}));
  EXPECT_EQ(layout.RanksWithLocalRank(0), (std::vector<int>{0, 3}));
  EXPECT_EQ(layout.RanksWithLocalRank(1), (std::vector<int>{1}));
  EXPECT_EQ(layout.RankAt(1, 1), -1);
  EXPECT_EQ(layout.Describe(), "2 hosts, irregular (3+1 ranks)");
}

TEST(Layout, InterleavedPlacementNumbersHostsByFirstAppearance) {
  // Ranks alternate between two hosts, and the host named "z" comes first.
  const Layout layout = MustBuild({"z", "a", "z", "a", "z", "a"});
  EXPECT_EQ(layout.num_hosts(), 2);
  EXPECT_EQ(layout.HostId(0), "z");
  EXPECT_EQ(layout.HostId(1), "a");
  EXPECT_TRUE(layout.IsRegular());
  EXPECT_EQ(layout.RanksPerHost(), 3);
  const std::vector<int> host = {0, 1, 0, 1, 0, 1}, local = {0, 0, 1, 1, 2, 2};
  for (int rank = 0; rank < 6; ++rank) {
    EXPECT_EQ(layout.HostOf(rank), host[rank]) << "rank " << rank;
    EXPECT_EQ(layout.LocalRank(rank), local[rank]) << "rank " << rank;
    EXPECT_EQ(layout.LocalSize(rank), 3);
  }
  EXPECT_EQ(layout.host_of_rank(), host);
  EXPECT_EQ(layout.RanksOnHost(0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(layout.RanksOnHost(1), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(layout.RanksWithLocalRank(2), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout.Describe(), "2 hosts x 3 ranks");
}

TEST(Layout, RoundRobinGridMatchesInterleaving) {
  Layout layout;
  ASSERT_TRUE(MakeGridLayout(4, 2, Placement::kRoundRobin, &layout).ok());
  ASSERT_EQ(layout.nranks(), 8);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(layout.HostOf(rank), rank % 4);
    EXPECT_EQ(layout.LocalRank(rank), rank / 4);
    EXPECT_EQ(layout.HostId(layout.HostOf(rank)), "host" + std::to_string(rank % 4));
  }
  Layout from_spec;
  ASSERT_TRUE(LayoutFromSpec("4x2:round-robin", &from_spec).ok());
  EXPECT_EQ(from_spec, layout);
  ASSERT_TRUE(LayoutFromSpec("4x2:block", &from_spec).ok());
  EXPECT_NE(from_spec, layout);
  EXPECT_EQ(from_spec.HostOf(1), 0);
}

TEST(Layout, QueriesOutOfRangeAnswerNothing) {
  const Layout layout = MustBuild({"a", "b"});
  for (int rank : {-1, 2, 1000}) {
    EXPECT_EQ(layout.HostOf(rank), -1);
    EXPECT_EQ(layout.LocalRank(rank), -1);
    EXPECT_EQ(layout.LocalSize(rank), -1);
  }
  EXPECT_TRUE(layout.RanksOnHost(-1).empty());
  EXPECT_TRUE(layout.RanksOnHost(2).empty());
  EXPECT_EQ(layout.HostId(2), "");
  EXPECT_EQ(layout.RankAt(-1, 0), -1);
  EXPECT_EQ(layout.RankAt(0, -1), -1);

  const Layout empty;
  EXPECT_EQ(empty.nranks(), 0);
  EXPECT_EQ(empty.num_hosts(), 0);
  EXPECT_FALSE(empty.IsRegular());
  EXPECT_EQ(empty.RanksPerHost(), 0);
  EXPECT_EQ(empty.HostOf(0), -1);
}

TEST(Layout, RejectsNoRanksAndEmptyIdentities) {
  Layout layout;
  EXPECT_EQ(Layout::FromHostIds({}, &layout).code(), Code::kInvalidArgument);
  Status status = Layout::FromHostIds({"a", "", "a"}, &layout);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status.message();
}

TEST(Layout, SpecsThatAreNotGridsAreRefused) {
  for (const char* spec : {"", "4", "x2", "4x", "0x2", "4x0", "-1x2", "4x-2", "4x2:foo", "4x2:", "4 x 2", "4x2x1",
                           "99999x99999", "1234567890x1", "ax2"}) {
    Layout layout;
    Status status = LayoutFromSpec(spec, &layout);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << "spec '" << spec << "'";
    EXPECT_EQ(layout.nranks(), 0) << "spec '" << spec << "'";
  }
}

std::vector<Layout> LayoutsToRoundTrip() {
  std::vector<Layout> layouts;
  for (const char* spec : {"1x1", "1x4", "4x2", "2x4", "3x3", "3x1", "4x2:round-robin"}) {
    Layout layout;
    EXPECT_TRUE(LayoutFromSpec(spec, &layout).ok()) << spec;
    layouts.push_back(layout);
  }
  layouts.push_back(MustBuild({"a", "a", "a", "b"}));
  layouts.push_back(MustBuild({"z", "a", "z", "a", "q"}));
  layouts.push_back(MustBuild(BlockHostIds(3, 2)));
  return layouts;
}

TEST(LayoutFile, FormatThenParseGivesTheSameLayout) {
  for (const Layout& layout : LayoutsToRoundTrip()) {
    std::string text;
    ASSERT_TRUE(FormatLayoutFile(layout, &text).ok());
    EXPECT_EQ(text.rfind("tessera-layout 1\n", 0), 0u) << text;
    Layout parsed;
    Status status = ParseLayoutFile(text, "round-trip", &parsed);
    ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << text;
    EXPECT_EQ(parsed, layout) << text;
  }
}

TEST(LayoutFile, WriteThenReadGivesTheSameLayout) {
  const std::string path = ScratchPath("round_trip.txt");
  for (const Layout& layout : LayoutsToRoundTrip()) {
    ASSERT_TRUE(WriteLayoutFile(path, layout).ok());
    Layout read;
    Status status = ReadLayoutFile(path, &read);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(read, layout) << layout.Describe();
  }
  std::remove(path.c_str());
}

TEST(LayoutFile, TheDocumentedExampleParses) {
  const std::string text =
      "tessera-layout 1\r\n"
      "# 4 hosts x 2 ranks, but hosts listed out of order, with blank lines\r\n"
      "\r\n"
      "   rack1-b  6 7   # trailing comment\r\n"
      "rack0-a 0\t1\n"
      "rack0-b 3 2\n"
      "rack1-a 4 5\n";
  Layout layout;
  Status status = ParseLayoutFile(text, "example", &layout);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(layout.nranks(), 8);
  EXPECT_EQ(layout.num_hosts(), 4);
  EXPECT_EQ(layout.RanksPerHost(), 2);
  // Hosts are numbered by their lowest rank, not by line.
  EXPECT_EQ(layout.HostId(0), "rack0-a");
  EXPECT_EQ(layout.HostId(1), "rack0-b");
  EXPECT_EQ(layout.HostId(3), "rack1-b");
  EXPECT_EQ(layout.LocalRank(2), 0);
  EXPECT_EQ(layout.LocalRank(3), 1);
}

struct Malformed {
  const char* text;
  int line;
  const char* says;
};

TEST(LayoutFile, MalformedFilesNameTheLine) {
  const std::string long_name(kMaxLayoutHostNameBytes + 1, 'h');
  const std::string long_line = "tessera-layout 1\n" + long_name + " 0\n";
  const std::vector<Malformed> cases = {
      {"", 1, "the file is empty"},
      {"hello\nh0 0\n", 1, "expected the header 'tessera-layout 1'"},
      {"tessera-layout\nh0 0\n", 1, "expected the header"},
      {"h0 0\n", 1, "expected the header"},
      {"tessera-layout 2\nh0 0\n", 1, "version '2' is not supported"},
      {"tessera-layout 1\n", 1, "lists no hosts"},
      {"tessera-layout 1\n# only a comment\n\n", 3, "lists no hosts"},
      {"tessera-layout 1\n# c\nh0 0 1\nh1 2 x\n", 4, "'x' is not a rank number"},
      {"tessera-layout 1\nh0 0 -1\n", 2, "'-1' is not a rank number"},
      {"tessera-layout 1\nh0 0 1.5\n", 2, "'1.5' is not a rank number"},
      {"tessera-layout 1\nh0 0 1234567890\n", 2, "'1234567890' is not a rank number"},
      {"tessera-layout 1\nh0 0 2000000\n", 2, "rank 2000000 is too large"},
      {"tessera-layout 1\nh0 0 1\nh1 1 2\n", 3, "rank 1 is already on host 'h0' (line 2)"},
      {"tessera-layout 1\nh0 0 0\n", 2, "rank 0 is already on host 'h0' (line 2)"},
      {"tessera-layout 1\nh0 0\n\nh0 1\n", 4, "host 'h0' is already listed on line 2"},
      {"tessera-layout 1\nh0 0\nh1\n", 3, "host 'h1' lists no ranks"},
      {"tessera-layout 1\nh0 0 1\nh1 3\n", 3, "rank 3 is listed but rank 2 is on no host"},
      {"tessera-layout 1\nh1 5\nh0 0 1\n", 2, "rank 5 is listed but rank 2 is on no host"},
      {"tessera-layout 1\nh0 1\n", 2, "rank 1 is listed but rank 0 is on no host"},
      {long_line.c_str(), 2, "host name is longer than 127 bytes"},
  };
  for (const Malformed& bad : cases) {
    Layout layout;
    Status status = ParseLayoutFile(bad.text, "bad.txt", &layout);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << bad.text;
    const std::string where = "bad.txt line " + std::to_string(bad.line) + ": ";
    EXPECT_EQ(status.message().rfind(where, 0), 0u) << "wanted '" << where << "', got: " << status.message();
    EXPECT_NE(status.message().find(bad.says), std::string::npos)
        << "wanted '" << bad.says << "', got: " << status.message();
    EXPECT_EQ(layout.nranks(), 0);
  }
}

TEST(LayoutFile, HostIdsThatCannotBeWrittenAreRefused) {
  std::string text;
  EXPECT_EQ(FormatLayoutFile(Layout(), &text).code(), Code::kInvalidArgument);
  for (const std::string& id : {std::string("two words"), std::string("tab\there"), std::string("hash#tag"),
                                std::string(kMaxLayoutHostNameBytes + 1, 'h')}) {
    const Layout layout = MustBuild({"fine", id});
    Status status = FormatLayoutFile(layout, &text);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << id;
    EXPECT_EQ(WriteLayoutFile(ScratchPath("unwritable.txt"), layout).code(), Code::kInvalidArgument) << id;
  }
  // The longest allowed name survives a round trip.
  const Layout longest = MustBuild({std::string(kMaxLayoutHostNameBytes, 'h')});
  ASSERT_TRUE(FormatLayoutFile(longest, &text).ok());
  Layout parsed;
  ASSERT_TRUE(ParseLayoutFile(text, "longest", &parsed).ok());
  EXPECT_EQ(parsed, longest);
}

TEST(LayoutFile, MissingFileIsASystemErrorNamingThePath) {
  const std::string path = ScratchPath("does_not_exist.txt");
  Layout layout;
  Status status = ReadLayoutFile(path, &layout);
  EXPECT_EQ(status.code(), Code::kSystemError);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  // A directory is not a layout file either.
  const char* dir = std::getenv("TEST_TMPDIR");
  status = ReadLayoutFile(dir != nullptr ? dir : "/tmp", &layout);
  EXPECT_FALSE(status.ok());
  // Nor is a file that never ends.
  status = ReadLayoutFile("/dev/zero", &layout);
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.ToString();
}

TEST(HostIdFromLayoutFile, EachRankFindsItsEmulatedHost) {
  const std::string path = ScratchPath("4x2.txt");
  Layout written;
  ASSERT_TRUE(LayoutFromSpec("4x2", &written).ok());
  ASSERT_TRUE(WriteLayoutFile(path, written).ok());
  // Each of 8 "ranks" asks for its host identity, as communicator creation will; the
  // identities they would hand the rendezvous rebuild the layout of the file.
  std::vector<std::string> ids;
  for (int rank = 0; rank < 8; ++rank) {
    std::string id;
    Status status = HostIdFromLayoutFile(path, rank, 8, &id);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(id, "host" + std::to_string(rank / 2)) << "rank " << rank;
    ids.push_back(id);
  }
  EXPECT_EQ(MustBuild(ids), written);
  std::remove(path.c_str());
}

TEST(HostIdFromLayoutFile, RefusesAFileForAnotherCommunicator) {
  const std::string path = ScratchPath("2x2.txt");
  WriteText(path, "tessera-layout 1\nhostA 0 1\nhostB 2 3\n");
  std::string id = "unchanged";
  Status status = HostIdFromLayoutFile(path, 0, 8, &id);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("places 4 ranks but the communicator has 8"), std::string::npos)
      << status.message();
  EXPECT_EQ(HostIdFromLayoutFile(path, 4, 4, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(HostIdFromLayoutFile(path, -1, 4, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(id, "unchanged");
  ASSERT_TRUE(HostIdFromLayoutFile(path, 3, 4, &id).ok());
  EXPECT_EQ(id, "hostB");

  WriteText(path, "tessera-layout 1\nhostA 0 1\nhostB 2 2\n");
  status = HostIdFromLayoutFile(path, 0, 4, &id);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find(path + " line 3:"), std::string::npos) << status.message();

  std::remove(path.c_str());
  EXPECT_EQ(HostIdFromLayoutFile(path, 0, 4, &id).code(), Code::kSystemError);
}

}  // namespace
}  // namespace tessera
