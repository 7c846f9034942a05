// The metrics pages' text: label escaping, cumulative buckets, the straggler gauge only
// when one is named, and the /health JSON.
#include "metrics/exposition.h"

#include "gtest/gtest.h"
#include "metrics/sample_page.h"

namespace tessera {
namespace {

TEST(Exposition, LabelValuesAreEscaped) { EXPECT_EQ(LabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd"); }

TEST(Exposition, HistogramsAreCumulativeAndTheStragglerOnlyWhenNamed) {
  const std::string page = PrometheusText(SamplePage());
  EXPECT_NE(page.find("tessera_call_duration_seconds_bucket{comm=\"0123456789abcdef\",rank=\"0\",kind=\"allreduce\","
                      "le=\"0.001\"} 990\n"),
            std::string::npos);
  EXPECT_NE(page.find("kind=\"allreduce\",le=\"0.004\"} 1000\n"), std::string::npos);
  EXPECT_NE(page.find("tessera_call_failures_total{comm=\"0123456789abcdef\",rank=\"0\",kind=\"send/recv\"} 1\n"),
            std::string::npos);
  EXPECT_NE(page.find("tessera_peer_stalled_seconds_total{comm=\"0123456789abcdef\",rank=\"0\",peer=\"3\"} 0.035\n"),
            std::string::npos);
  EXPECT_EQ(page.find("peer=\"0\""), std::string::npos);  // not on itself
  EXPECT_NE(page.find("host=\"node \\\"a\\\"\\\\1\""), std::string::npos);
  // One straggler sample: the second communicator names none.
  const size_t first = page.find("\ntessera_straggler{");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(page.find("\ntessera_straggler{", first + 1), std::string::npos);
  EXPECT_NE(page.find("tessera_broken{comm=\"0000000000000007\",rank=\"0\"} 1\n"), std::string::npos);
}

TEST(Exposition, HealthPageIsJson) {
  const std::string page = HealthPage(SamplePage());
  EXPECT_EQ(page.rfind("{\"communicators\": [{\"comm_id\": \"0123456789abcdef\"", 0), 0u);
  EXPECT_NE(page.find("\"straggler\": {\"rank\": 3, \"window_calls\": 1000, \"late_calls\": 910, \"wait_share\": "
                      "0.910, \"time_share\": 0.350, \"median_lag_s\": 0.038000, \"waiters\": [0, 1, 2]"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("\"straggler\": null"), std::string::npos);
  EXPECT_NE(page.find("\"host\": \"node \\\"a\\\"\\\\1\""), std::string::npos);
}

}  // namespace
}  // namespace tessera
