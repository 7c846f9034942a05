// Checks that the system libraries behind //third_party compile, link and run offline:
// each one is asked for its version, which must match the Debian package it came
// from, or does one small real piece of work.
#include <benchmark/benchmark.h>
#include <hwloc.h>
#include <mpi.h>
#include <pmix.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

TEST(SystemLibrariesTest, OpenMpiIsVersion41) {
  int version = 0;
  int subversion = 0;
  ASSERT_EQ(MPI_Get_version(&version, &subversion), MPI_SUCCESS);
  EXPECT_EQ(version, 3);  // Open MPI 4.1 implements MPI 3.1.
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  ASSERT_EQ(MPI_Get_library_version(library, &length), MPI_SUCCESS);
  EXPECT_NE(std::string(library, length).find("Open MPI v4.1"), std::string::npos)
      << library;
}

TEST(SystemLibrariesTest, HwlocFindsAtLeastOneCore) {
  EXPECT_EQ(hwloc_get_api_version() >> 16, 2u);
  hwloc_topology_t topology;
  ASSERT_EQ(hwloc_topology_init(&topology), 0);
  ASSERT_EQ(hwloc_topology_load(topology), 0);
  EXPECT_GE(hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE), 1);
  hwloc_topology_destroy(topology);
}

TEST(SystemLibrariesTest, PmixIsVersion42) {
  const char* version = PMIx_Get_version();
  ASSERT_NE(version, nullptr);
  EXPECT_NE(std::strstr(version, "4.2"), nullptr) << version;
}

TEST(SystemLibrariesTest, UcxLibraryMatchesItsHeaders) {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned release = 0;
  ucp_get_version(&major, &minor, &release);
  EXPECT_EQ(major, 1u);
  EXPECT_EQ(major, static_cast<unsigned>(UCP_API_MAJOR));
  EXPECT_EQ(minor, static_cast<unsigned>(UCP_API_MINOR));
}

TEST(SystemLibrariesTest, BenchmarkRunsARegisteredBenchmark) {
  int iterations = 0;
  auto count = [&iterations](benchmark::State& state) {
    for (auto _ : state) {
      ++iterations;
      benchmark::DoNotOptimize(iterations);
    }
  };
  benchmark::RegisterBenchmark("SystemLibrariesTest/Count", count)->Iterations(10);
  std::ostringstream output;
  benchmark::ConsoleReporter reporter;
  reporter.SetOutputStream(&output);
  reporter.SetErrorStream(&output);
  EXPECT_EQ(benchmark::RunSpecifiedBenchmarks(&reporter), 1u);
  EXPECT_EQ(iterations, 10);
  EXPECT_NE(output.str().find("SystemLibrariesTest/Count"), std::string::npos)
      << output.str();
}

}  // namespace
