// The flight recorder's ring and its JSON.
#include "comm/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera {
namespace {

// The executor's observer calls for one call (base/call_observer.h).
void Begin(FlightRecorder& r, const char* what, uint64_t bytes, uint64_t seq) {
  CallRecord call;
  call.what = what;
  call.bytes = bytes;
  call.stamp.seq = static_cast<uint32_t>(seq);
  r.CallBegan(call, NowMicros());
}

void End(FlightRecorder& r, bool ok) { r.CallEnded(ok ? CallOutcome::kDone : CallOutcome::kFailed, NowMicros()); }

TEST(FlightRecorder, KeepsTheLastEntriesInOrder) {
  FlightRecorder r(3);
  for (int i = 0; i < 5; ++i) {
    Begin(r, "allreduce", 8 * (i + 1), static_cast<uint64_t>(i + 1));
    r.AlgorithmChosen(OpKind::kAllReduce, "ring");
    End(r, i != 4);
  }
  const std::vector<FlightEntry> e = r.Entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].seq, 3u);
  EXPECT_EQ(e[2].seq, 5u);
  EXPECT_EQ(e[2].bytes, 40u);
  EXPECT_STREQ(e[2].algorithm, "ring");
  EXPECT_EQ(e[1].state, FlightEntry::State::kDone);
  EXPECT_EQ(e[2].state, FlightEntry::State::kFailed);
  EXPECT_GE(e[2].end_us, e[2].start_us);
}

TEST(FlightRecorder, AnOpenOperationIsRunning) {
  FlightRecorder r(4);
  Begin(r, "broadcast", 16, 1);
  End(r, true);
  Begin(r, "send/recv", 32, 0);
  const std::vector<FlightEntry> e = r.Entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[1].state, FlightEntry::State::kRunning);
  EXPECT_EQ(e[1].end_us, 0);
}

// The writer takes no lock: a reader on another thread sees every entry whole (its
// fields from one write), never a mix of two operations (ThreadSanitizer runs this).
TEST(FlightRecorder, AReaderOnAnotherThreadSeesWholeEntries) {
  static const char* const kAlgorithms[] = {"ring", "board", "recursive doubling"};
  FlightRecorder r(4);
  std::atomic<size_t> reads{0};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {  // until the reader has read 2000 times
    uint64_t i = 1;
    for (; reads.load() < 2000; ++i) {
      Begin(r, "allreduce", 8 * i, i);
      r.AlgorithmChosen(OpKind::kAllReduce, kAlgorithms[i % 3]);
      End(r, i % 5 != 0);
    }
    written.store(i - 1);
  });
  while (reads.load() < 2000) {  // reads that saw entries
    const std::vector<FlightEntry> entries = r.Entries();
    if (entries.empty()) continue;
    for (const FlightEntry& e : entries) {
      ASSERT_EQ(e.bytes, 8 * e.seq);
      if (e.algorithm[0] != '\0') {
        ASSERT_STREQ(e.algorithm, kAlgorithms[e.seq % 3]);
      }
      if (e.state == FlightEntry::State::kRunning) {
        ASSERT_EQ(e.end_us, 0);
      }
      if (e.state != FlightEntry::State::kRunning) {
        ASSERT_EQ(e.state == FlightEntry::State::kFailed, e.seq % 5 == 0);
        ASSERT_GE(e.end_us, e.start_us);
      }
    }
    reads.fetch_add(1);
  }
  writer.join();
  const std::vector<FlightEntry> last = r.Entries();
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[3].seq, written.load());
}

TEST(FlightRecorder, CapacityZeroRecordsNothing) {
  FlightRecorder r(0);
  Begin(r, "allreduce", 8, 1);
  End(r, true);
  EXPECT_TRUE(r.Entries().empty());
  r.SetCapacity(2);
  Begin(r, "allreduce", 8, 2);
  ASSERT_EQ(r.Entries().size(), 1u);
  EXPECT_EQ(r.Entries()[0].seq, 2u);
}

TEST(FlightRecorder, DumpsJsonNamedAfterCommunicatorAndRank) {
  FlightRecorder r(2);
  Begin(r, "allreduce", 64, 1);
  End(r, false);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  std::string path;
  const FlightIdentity who{0xabcdef, 3, 4, 77, "host \"b\""};
  ASSERT_TRUE(r.Dump(dir, who, "rank 1 timed out", &path).ok());
  EXPECT_EQ(path, dir + "/tessera-flight-0000000000abcdef-rank3.json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  EXPECT_NE(json.find("\"rank\": 3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"host\": \"host \\\"b\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"reason\": \"rank 1 timed out\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\": \"failed\""), std::string::npos) << json;
  EXPECT_EQ(r.Dump("/nonexistent/dir", who, "", &path).code(), Code::kSystemError);
  unlink((dir + "/tessera-flight-0000000000abcdef-rank3.json").c_str());
}

}  // namespace
}  // namespace tessera
