// The shared-memory transport's ring shape: full rings while a host's channels fit its
// segment budget, fewer slots, then smaller ones past it; and a message through the
// smallest rings arrives whole (three ranks of one process, one thread each); a sleeping
// receiver is woken by the sender's Flush.
#include "transport/shm/shm_transport.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

TEST(ShmRingShape, FullRingsWhileTheyFitThenFewerSlotsThenSmallerOnes) {
  ShmTransport::Options o;  // 8 slots of 128 KiB, 64 MiB a segment
  for (size_t n : {2, 8, 32, 62}) {
    const ShmTransport::RingShape s = ShmTransport::ShapeFor(o, n);
    EXPECT_EQ(s.slots, 8u) << n;
    EXPECT_EQ(s.slot_bytes, 131072u) << n;
  }
  size_t last_slots = 8;
  for (size_t n : {64, 128, 200}) {
    const ShmTransport::RingShape s = ShmTransport::ShapeFor(o, n);
    EXPECT_EQ(s.slot_bytes, 131072u) << n;
    EXPECT_GE(s.slots, 2u) << n;
    EXPECT_LE(s.slots, last_slots) << n;
    EXPECT_LE(n * s.slots * (s.slot_bytes + 64), static_cast<size_t>(o.segment_bytes)) << n;
    last_slots = s.slots;
  }
  EXPECT_EQ(ShmTransport::ShapeFor(o, 128).slots, 3u);
  for (size_t n : {256, 512, 1024, 4096}) {
    const ShmTransport::RingShape s = ShmTransport::ShapeFor(o, n);
    EXPECT_EQ(s.slots, 2u) << n;
    EXPECT_LT(s.slot_bytes, 131072u) << n;
    EXPECT_EQ(s.slot_bytes % 64, 0u) << n;
    EXPECT_LE(n * 2 * (s.slot_bytes + 64), static_cast<size_t>(o.segment_bytes)) << n;
  }
  EXPECT_EQ(ShmTransport::ShapeFor(o, 1000000).slot_bytes, 4096u);  // the floor
}

// Moves `len` bytes from `from` to `to` over their links, both progressed by this thread.
void Move(Link* from, Link* to, const std::vector<char>& src, std::vector<char>* dst) {
  from->SetCall(CallStamp());
  to->SetCall(CallStamp());
  from->BeginSend(src.data(), src.size());
  to->BeginRecv(dst->data(), dst->size(), nullptr, nullptr);
  bool sent = false, received = false;
  while (!sent || !received) {
    bool progressed = false;
    if (!sent) {
      ASSERT_TRUE(from->ProgressSend(src.size(), &progressed, &sent).ok());
    }
    if (!received) {
      ASSERT_TRUE(to->ProgressRecv(&progressed, &received).ok());
    }
  }
}

// Three ranks' transports on the smallest rings: 2 slots of what 1 MiB segments hold.
class SmallRings {
 public:
  explicit SmallRings(int64_t prefault_bytes = SettingDefaults::shm_prefault_bytes, int64_t single_copy_bytes = 0) {
    o_.prefault_bytes = prefault_bytes;
    o_.single_copy_bytes = single_copy_bytes;
    o_.segment_bytes = 1 << 20;
    o_.slot_bytes = 1 << 20;  // asks for more than fits: 2 slots of what does
    std::vector<ShmTransport::Member> local;
    for (int r = 0; r < kRanks; ++r) {
      segments_[r] = ShmTransport::NewSegmentName();
      local.push_back({r, getpid(), segments_[r]});
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] { made_[r] = ShmTransport::Create(o_, r, local, Deadline::AfterMs(10000), &t_[r]); });
    }
    for (std::thread& th : threads) th.join();
  }
  static constexpr int kRanks = 3;
  ShmTransport::Options o_;
  std::string segments_[kRanks];
  std::unique_ptr<ShmTransport> t_[kRanks];
  Status made_[kRanks];
};

TEST(ShmTransport, AMessageCrossesTheSmallestRingsWhole) {
  SmallRings rings;
  for (const Status& s : rings.made_) ASSERT_TRUE(s.ok()) << s.message();
  std::unique_ptr<Link> out, in;
  ASSERT_TRUE(rings.t_[0]->Connect(2, Deadline::AfterMs(1000), &out).ok());
  ASSERT_TRUE(rings.t_[2]->Connect(0, Deadline::AfterMs(1000), &in).ok());
  std::vector<char> src(1000003), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  Move(out.get(), in.get(), src, &dst);
  EXPECT_EQ(src, dst);
}

// Sums bytes: dst = acc + in, each byte modulo 256.
void AddBytes(void* dst, const void* acc, const void* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(static_cast<const uint8_t*>(acc)[i] +
                                                         static_cast<const uint8_t*>(in)[i]);
  }
}

// A message to a copying receiver (Link::set_peer_copies) of at least
// TESSERA_SHM_SINGLE_COPY_BYTES is read from the sender's buffer: it arrives whole, and
// the send is done only once the receiver has read all of it. A reducing receiver
// (the sender was told it copies: the hint is a hint) still gets the sum.
TEST(ShmTransport, SingleCopyMessagesAreReadFromTheSendersBuffer) {
  SmallRings rings(SettingDefaults::shm_prefault_bytes, 4096);
  for (const Status& s : rings.made_) ASSERT_TRUE(s.ok()) << s.message();
  std::unique_ptr<Link> out, in;
  ASSERT_TRUE(rings.t_[0]->Connect(1, Deadline::AfterMs(1000), &out).ok());
  ASSERT_TRUE(rings.t_[1]->Connect(0, Deadline::AfterMs(1000), &in).ok());
  std::vector<char> src(100003), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  out->set_peer_copies(true);
  out->BeginSend(src.data(), src.size());
  bool progressed = false, sent = false, received = false;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(out->ProgressSend(src.size(), &progressed, &sent).ok());
  EXPECT_FALSE(sent) << "the send finished before the receiver read the buffer";
  in->BeginRecv(dst.data(), dst.size(), nullptr, nullptr);
  while (!received) ASSERT_TRUE(in->ProgressRecv(&progressed, &received).ok());
  while (!sent) ASSERT_TRUE(out->ProgressSend(src.size(), &progressed, &sent).ok());
  EXPECT_EQ(src, dst);

  const Reducer add{AddBytes, 1};
  std::vector<char> acc(src.size(), 1), sum(src.size());
  out->BeginSend(src.data(), src.size());
  in->BeginRecv(sum.data(), sum.size(), acc.data(), &add);
  sent = received = false;
  while (!sent || !received) {
    if (!sent) ASSERT_TRUE(out->ProgressSend(src.size(), &progressed, &sent).ok());
    if (!received) ASSERT_TRUE(in->ProgressRecv(&progressed, &received).ok());
  }
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(static_cast<char>(src[i] + 1), sum[i]) << i;
}

// The Rss of each of this process's mappings of `segment` (/proc/self/smaps: the bytes
// of it that are mapped in this process's page tables), in bytes.
std::vector<int64_t> MappedBytes(const std::string& segment) {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<int64_t> rss;
  bool ours = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find(':') > line.find(' ')) {  // a mapping's first line: "start-end perms offset dev:ice ..."
      ours = line.find("/dev/shm" + segment) != std::string::npos;
    } else if (ours && line.compare(0, 4, "Rss:") == 0) {
      rss.push_back(std::stoll(line.substr(4)) * 1024);
    }
  }
  return rss;
}

// Where segments are small, a rank maps every page of a channel it uses when it
// connects to the peer (its channel into the peer's segment, the peer's into its own),
// and none at creation; with TESSERA_SHM_PREFAULT_BYTES 0 only the pages that
// messages reach.
TEST(ShmTransport, SmallSegmentsChannelsAreMappedAtConnect) {
  for (int64_t prefault : {int64_t{0}, SettingDefaults::shm_prefault_bytes}) {
    SCOPED_TRACE("TESSERA_SHM_PREFAULT_BYTES " + std::to_string(prefault));
    SmallRings rings(prefault);
    for (const Status& s : rings.made_) ASSERT_TRUE(s.ok()) << s.message();
    const ShmTransport::RingShape shape = ShmTransport::ShapeFor(rings.o_, SmallRings::kRanks);
    const int64_t channel = static_cast<int64_t>(shape.slots * shape.slot_bytes);
    const std::string target = rings.segments_[2];
    std::vector<int64_t> before = MappedBytes(target);
    ASSERT_EQ(before.size(), static_cast<size_t>(SmallRings::kRanks));  // each rank maps it once
    std::unique_ptr<Link> out, in;
    ASSERT_TRUE(rings.t_[0]->Connect(2, Deadline::AfterMs(1000), &out).ok());
    ASSERT_TRUE(rings.t_[2]->Connect(0, Deadline::AfterMs(1000), &in).ok());
    std::vector<int64_t> after = MappedBytes(target);
    ASSERT_EQ(after.size(), before.size());
    std::sort(before.rbegin(), before.rend());
    std::sort(after.rbegin(), after.rend());
    EXPECT_LT(before[0], channel);  // creation maps the header's pages only
    if (prefault > 0) {
      EXPECT_GE(after[1], channel);  // rank 0's mapping and rank 2's both hold the channel
    } else {
      EXPECT_LT(after[0], channel);
    }
  }
}

// Pieces small enough to travel in a slot's first line and full ones, one after the
// other through the same slots: each message arrives whole.
TEST(ShmTransport, SmallAndLargePiecesShareTheSlots) {
  SmallRings rings;
  for (const Status& s : rings.made_) ASSERT_TRUE(s.ok()) << s.message();
  const size_t slot = ShmTransport::ShapeFor(rings.o_, SmallRings::kRanks).slot_bytes;
  std::unique_ptr<Link> out, in;
  ASSERT_TRUE(rings.t_[1]->Connect(0, Deadline::AfterMs(1000), &out).ok());
  ASSERT_TRUE(rings.t_[0]->Connect(1, Deadline::AfterMs(1000), &in).ok());
  for (size_t len : {size_t{1}, size_t{8}, size_t{32}, size_t{33}, slot + 32, slot - 1, size_t{4}, 2 * slot + 31,
                     size_t{32}, slot, size_t{3}}) {
    std::vector<char> src(len), dst(len, 0);
    for (size_t i = 0; i < len; ++i) src[i] = static_cast<char>(i * 13 + len);
    Move(out.get(), in.get(), src, &dst);
    EXPECT_EQ(src, dst) << len;
  }
}

// A float32 sum allreduce's stamp of `bytes`, the communicator's call `seq`.
CallStamp SumOf(size_t bytes, uint32_t seq) {
  CallStamp c;
  c.count = bytes / 4;
  c.seq = seq;
  c.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  c.type = static_cast<uint8_t>(DataType::kFloat32);
  c.op = static_cast<uint8_t>(RedOp::kSum);
  return c;
}

// A receiver in another call fails before it consumes anything, naming the sender's
// whole call, whichever side's piece travels in the slot's first line (the sender's
// stamp sits after that line then, and within it otherwise).
TEST(ShmTransport, AReceiverInAnotherCallNamesTheSendersCall) {
  const size_t sizes[][2] = {{8, 8}, {8, 4096}, {4096, 8}, {32, 4096}, {4096, 4096}};
  uint32_t seq = 0;
  for (const auto& size : sizes) {
    std::unique_ptr<Link> out, in;  // fresh links over fresh rings for each case
    SmallRings fresh;
    for (const Status& s : fresh.made_) ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(fresh.t_[1]->Connect(0, Deadline::AfterMs(1000), &out).ok());
    ASSERT_TRUE(fresh.t_[0]->Connect(1, Deadline::AfterMs(1000), &in).ok());
    const size_t sent_bytes = size[0], expected_bytes = size[1];
    const CallStamp theirs = SumOf(sent_bytes, ++seq);
    CallStamp mine = SumOf(expected_bytes, seq);
    if (sent_bytes == expected_bytes) mine.op = static_cast<uint8_t>(RedOp::kMax);
    out->SetCall(theirs);
    in->SetCall(mine);
    std::vector<char> src(sent_bytes, 'x'), dst(expected_bytes, 0);
    out->BeginSend(src.data(), src.size());
    in->BeginRecv(dst.data(), dst.size(), nullptr, nullptr);
    bool progressed = false, done = false;
    ASSERT_TRUE(out->ProgressSend(src.size(), &progressed, &done).ok());
    const Status s = in->ProgressRecv(&progressed, &done);
    ASSERT_FALSE(s.ok()) << sent_bytes << " sent, " << expected_bytes << " expected";
    EXPECT_NE(s.message().find(DescribeCall(theirs)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(DescribeCall(mine)), std::string::npos) << s.message();
    EXPECT_FALSE(progressed);
    EXPECT_EQ(dst, std::vector<char>(expected_bytes, 0));
  }
}

// A receiver asleep on its doorbell (the wait loop's protocol: announce, look, sleep) is
// woken by the sender's Flush after it published, well before its sleep would end.
TEST(ShmTransport, FlushWakesASleepingReceiver) {
  SmallRings rings;
  for (const Status& s : rings.made_) ASSERT_TRUE(s.ok()) << s.message();
  std::unique_ptr<Link> out, in;
  ASSERT_TRUE(rings.t_[1]->Connect(0, Deadline::AfterMs(1000), &out).ok());
  ASSERT_TRUE(rings.t_[0]->Connect(1, Deadline::AfterMs(1000), &in).ok());
  out->SetCall(CallStamp());
  in->SetCall(CallStamp());
  const std::vector<char> src(8, 'x');
  std::vector<char> dst(8, 0);
  in->BeginRecv(dst.data(), dst.size(), nullptr, nullptr);
  constexpr int64_t kSleepUs = 10000000;
  int64_t slept_us = -1;
  std::thread receiver([&] {
    WaitSet waits;
    in->AddWaits(&waits, false, true);
    const uint32_t token = waits.Announce();
    bool progressed = false, done = false;
    if (in->ProgressRecv(&progressed, &done).ok() && !done) {
      const int64_t start = NowMicros();
      waits.Sleep(token, kSleepUs);
      slept_us = NowMicros() - start;
    }
    waits.Retire();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the receiver is asleep by now
  out->BeginSend(src.data(), src.size());
  bool progressed = false, sent = false;
  ASSERT_TRUE(out->ProgressSend(src.size(), &progressed, &sent).ok());
  ASSERT_TRUE(sent);
  out->Flush();
  receiver.join();
  EXPECT_LT(slept_us, kSleepUs / 2) << "the receiver slept until its timeout: no wake-up";
  bool received = false;
  ASSERT_TRUE(in->ProgressRecv(&progressed, &received).ok());
  EXPECT_TRUE(received);
  EXPECT_EQ(src, dst);
}

}  // namespace
}  // namespace tessera
