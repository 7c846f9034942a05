// The flight recorder end to end: a rank that stays alive but never makes the fourth
// allreduce. The others time out, write their flight records (the error names the
// file), and tools/flight_report.py, reading every record, names the silent rank.
#include <dirent.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> FlightFiles(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).rfind("tessera-flight-", 0) == 0) names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

std::string RunTool(const std::string& dir) {
  const std::string command = "/usr/bin/python3 tools/flight_report.py " + dir + " 2>&1";
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    pclose(p);
  }
  return out;
}

TEST(FlightRecord, SilentRankIsNamedFromTheRecords) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/flight_" + std::to_string(getpid());
  ASSERT_EQ(0, system(("mkdir -p " + dir).c_str()));
  RankOptions opts;
  opts.env["TESSERA_FLIGHT_RECORDER_DIR"] = dir;
  opts.env["TESSERA_TIMEOUT_MS"] = "2000";
  auto results = RunRanks(3, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    std::vector<float> data(1024, 1.0f);
    for (int i = 0; i < 3; ++i) {
      c.ExpectCode(tesseraAllReduce(data.data(), data.data(), data.size(), tesseraFloat32, tesseraSum, comm, nullptr),
                   tesseraSuccess, "allreduce " + std::to_string(i + 1));
    }
    if (rank == 2) {  // alive, silent: never makes the fourth call
      c.Expect(WaitForRanksDone({0, 1}, Milliseconds(25000)), "ranks 0 and 1 never finished");
      return c.str();
    }
    const tesseraResult_t r =
        tesseraAllReduce(data.data(), data.data(), data.size(), tesseraFloat32, tesseraSum, comm, nullptr);
    c.Expect(r != tesseraSuccess, "the fourth allreduce succeeded without rank 2");
    c.ExpectContains(LastError(comm), "flight record: ", "the error names the flight record");
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));

  std::vector<std::string> files = FlightFiles(dir);
  ASSERT_EQ(files.size(), 2u) << "ranks 0 and 1 write a record, silent rank 2 does not";
  for (const std::string& name : files) {
    const std::string json = ReadFile(dir + "/" + name);
    EXPECT_NE(json.find("\"seq\": 3, \"op\": \"allreduce\", \"bytes\": 4096"), std::string::npos) << json;
    EXPECT_NE(json.find("\"state\": \"failed\""), std::string::npos) << json;
    EXPECT_EQ(json.find("-rank2.json"), std::string::npos);
  }
  const std::string report = RunTool(dir);
  printf("%s\n", report.c_str());
  EXPECT_NE(report.find("records from 2 of 3 ranks"), std::string::npos) << report;
  EXPECT_NE(report.find("no record from rank(s) 2"), std::string::npos) << report;
  EXPECT_NE(report.find("verdict: suspect rank(s) 2; the others were waiting in #4"), std::string::npos) << report;
  system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace tessera_test
