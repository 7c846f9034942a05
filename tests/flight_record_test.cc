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

  // Ranks 0 and 1 write theirs on failing; rank 2's is written when rank 0's diagnosis
  // asks, while it is outside tessera.
  std::vector<std::string> files = FlightFiles(dir);
  ASSERT_EQ(files.size(), 3u) << "every rank writes a record";
  for (const std::string& name : files) {
    const std::string json = ReadFile(dir + "/" + name);
    EXPECT_NE(json.find("\"seq\": 3, \"op\": \"allreduce\", \"bytes\": 4096"), std::string::npos) << json;
    const bool silent = name.find("-rank2.json") != std::string::npos;
    EXPECT_EQ(json.find("\"state\": \"failed\"") != std::string::npos, !silent) << json;
    if (silent) EXPECT_NE(json.find("asked by a peer's diagnosis or the dump signal"), std::string::npos) << json;
  }
  const std::string report = RunTool(dir);
  printf("%s\n", report.c_str());
  EXPECT_NE(report.find("records from 3 of 3 ranks"), std::string::npos) << report;
  EXPECT_NE(report.find("outside tessera: rank(s) 2 (never called #4)"), std::string::npos) << report;
  EXPECT_NE(report.find("verdict: suspect rank(s) 2; the others were waiting in #4"), std::string::npos) << report;
  EXPECT_NE(report.find("diagnosis agreed by the ranks: [culprit: rank 2]"), std::string::npos) << report;
  system(("rm -rf " + dir).c_str());
}

// A dump on request, while nothing failed: every rank writes its record; without the
// directory setting the call says so.
TEST(FlightRecord, DumpOnRequest) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/flight_req_" + std::to_string(getpid());
  ASSERT_EQ(0, system(("mkdir -p " + dir).c_str()));
  RankOptions opts;
  opts.env["TESSERA_FLIGHT_RECORDER_DIR"] = dir;
  auto results = RunRanks(2, [](int, tesseraComm_t comm) {
    RankChecks c;
    std::vector<float> data(16, 1.0f);
    c.ExpectCode(tesseraAllReduce(data.data(), data.data(), data.size(), tesseraFloat32, tesseraSum, comm, nullptr),
                 tesseraSuccess, "allreduce");
    c.ExpectCode(tesseraCommDumpFlightRecord(comm), tesseraSuccess, "dump on request");
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
  std::vector<std::string> files = FlightFiles(dir);
  ASSERT_EQ(files.size(), 2u);
  const std::string json = ReadFile(dir + "/" + files[0]);
  EXPECT_NE(json.find("asked by tesseraCommDumpFlightRecord"), std::string::npos) << json;
  EXPECT_NE(json.find("\"seq\": 1, \"op\": \"allreduce\", \"bytes\": 64"), std::string::npos) << json;
  system(("rm -rf " + dir).c_str());
  auto unset = RunRanks(2, [](int, tesseraComm_t comm) {
    RankChecks c;
    c.ExpectCode(tesseraCommDumpFlightRecord(comm), tesseraInvalidUsage, "dump without a directory");
    return c.str();
  }, RankOptions());
  EXPECT_EQ("", Failures(unset));
}

}  // namespace
}  // namespace tessera_test
