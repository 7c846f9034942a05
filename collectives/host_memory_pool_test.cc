// HostMemoryPool: buffers are reused across calls, the pool's limits hold, and a buffer
// outlives the pool safely.
#include "collectives/host_memory_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tessera {
namespace {

TEST(HostMemoryPool, ReusesTheSmallestFittingBuffer) {
  HostMemoryPool pool;
  std::shared_ptr<void> a, b;
  ASSERT_TRUE(pool.Allocate(1 << 20, &a).ok());
  ASSERT_TRUE(pool.Allocate(4 << 20, &b).ok());
  void* small = a.get();
  void* big = b.get();
  std::memset(small, 7, 1 << 20);  // writable over its whole size
  std::memset(big, 7, 4 << 20);
  a.reset();
  b.reset();
  EXPECT_EQ(pool.kept_buffers(), 2u);
  EXPECT_EQ(pool.kept_bytes(), size_t{5} << 20);
  std::shared_ptr<void> c, d;
  ASSERT_TRUE(pool.Allocate(512 << 10, &c).ok());
  EXPECT_EQ(c.get(), small);  // the 1 MiB one, not the 4 MiB one
  ASSERT_TRUE(pool.Allocate(2 << 20, &d).ok());
  EXPECT_EQ(d.get(), big);
  EXPECT_EQ(pool.kept_buffers(), 0u);
  std::shared_ptr<void> e;
  ASSERT_TRUE(pool.Allocate(3 << 20, &e).ok());  // none free: a new buffer
  EXPECT_NE(e.get(), small);
  EXPECT_NE(e.get(), big);
}

TEST(HostMemoryPool, KeepsAtMostItsLimits) {
  HostMemoryPool pool;
  std::vector<std::shared_ptr<void>> held(HostMemoryPool::kMaxKeptBuffers + 2);
  for (auto& h : held) ASSERT_TRUE(pool.Allocate(4096, &h).ok());
  held.clear();
  EXPECT_EQ(pool.kept_buffers(), HostMemoryPool::kMaxKeptBuffers);
  HostMemoryPool big_pool;
  std::shared_ptr<void> huge;
  ASSERT_TRUE(big_pool.Allocate(HostMemoryPool::kMaxKeptBytes + 1, &huge).ok());
  huge.reset();
  EXPECT_EQ(big_pool.kept_buffers(), 0u);  // over the byte limit: freed, not kept
}

// A sweep of growing sizes: each larger buffer replaces the smallest kept one, so the
// next call of that size reuses it instead of allocating a new one.
TEST(HostMemoryPool, LargerBuffersReplaceTheSmallestKept) {
  HostMemoryPool pool;
  std::vector<std::shared_ptr<void>> held(HostMemoryPool::kMaxKeptBuffers);
  for (auto& h : held) ASSERT_TRUE(pool.Allocate(4096, &h).ok());
  held.clear();
  std::shared_ptr<void> big;
  ASSERT_TRUE(pool.Allocate(1 << 20, &big).ok());
  void* const first = big.get();
  big.reset();
  EXPECT_EQ(pool.kept_buffers(), HostMemoryPool::kMaxKeptBuffers);
  EXPECT_EQ(pool.kept_bytes(), (HostMemoryPool::kMaxKeptBuffers - 1) * 4096 + (1 << 20));
  ASSERT_TRUE(pool.Allocate(1 << 20, &big).ok());
  EXPECT_EQ(big.get(), first);
}

TEST(HostMemoryPool, BuffersOutliveThePoolAndCopiesMayOverlap) {
  std::shared_ptr<void> kept;
  {
    HostMemoryPool pool;
    ASSERT_TRUE(pool.Allocate(64, &kept).ok());
    char* p = static_cast<char*>(kept.get());
    for (int i = 0; i < 16; ++i) p[i] = static_cast<char>(i);
    ASSERT_TRUE(pool.Copy(p + 4, p, 8).ok());  // overlapping: memmove semantics
    for (int i = 0; i < 8; ++i) EXPECT_EQ(p[4 + i], i);
  }
  static_cast<char*>(kept.get())[63] = 1;  // still valid; freed when `kept` goes
  ASSERT_TRUE(kept != nullptr);
}

}  // namespace
}  // namespace tessera
