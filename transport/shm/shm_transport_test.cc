// The shared-memory transport's ring shape: full rings while a host's channels fit its
// segment budget, fewer slots, then smaller ones past it; and a message through the
// smallest rings arrives whole (three ranks of one process, one thread each).
#include "transport/shm/shm_transport.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

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
    if (!sent) ASSERT_TRUE(from->ProgressSend(src.size(), &progressed, &sent).ok());
    if (!received) ASSERT_TRUE(to->ProgressRecv(&progressed, &received).ok());
  }
}

TEST(ShmTransport, AMessageCrossesTheSmallestRingsWhole) {
  ShmTransport::Options o;
  o.segment_bytes = 1 << 20;
  o.slot_bytes = 1 << 20;  // asks for more than fits: 2 slots of what does
  const int n = 3;
  std::vector<ShmTransport::Member> local;
  for (int r = 0; r < n; ++r) local.push_back({r, getpid(), ShmTransport::NewSegmentName()});
  std::vector<std::unique_ptr<ShmTransport>> t(n);
  std::vector<std::thread> threads;
  std::vector<Status> made(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { made[r] = ShmTransport::Create(o, r, local, Deadline::AfterMs(10000), &t[r]); });
  }
  for (std::thread& th : threads) th.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(made[r].ok()) << made[r].message();
  std::unique_ptr<Link> out, in;
  ASSERT_TRUE(t[0]->Connect(2, Deadline::AfterMs(1000), &out).ok());
  ASSERT_TRUE(t[2]->Connect(0, Deadline::AfterMs(1000), &in).ok());
  std::vector<char> src(1000003), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  Move(out.get(), in.get(), src, &dst);
  EXPECT_EQ(src, dst);
}

}  // namespace
}  // namespace tessera
