// RegistrationCache over a fake registrar that records every registration: hits,
// misses, page rounding, merging of overlapping regions, LRU eviction by entries and by
// bytes, pinned regions never deregistered under their user, invalidation.
#include "transport/ibverbs/registration_cache.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

constexpr uintptr_t kPage = 4096;

class FakeRegistrar : public MemoryRegistrar {
 public:
  Status Register(uintptr_t begin, size_t length, MemoryRegion* out) override {
    if (fail_next) {
      fail_next = false;
      return SystemError("fake registration failure");
    }
    out->begin = begin;
    out->length = length;
    out->lkey = out->rkey = next_key++;
    out->handle = reinterpret_cast<void*>(static_cast<uintptr_t>(out->lkey));
    live[out->lkey] = {begin, length};
    ++registrations;
    return Status::Ok();
  }
  void Deregister(const MemoryRegion& region) override {
    EXPECT_EQ(live.count(region.lkey), 1u) << "deregistered twice or never registered";
    live.erase(region.lkey);
    ++deregistrations;
  }

  bool fail_next = false;
  uint32_t next_key = 1;
  int registrations = 0;
  int deregistrations = 0;
  std::map<uint32_t, std::pair<uintptr_t, size_t>> live;  // key -> (begin, length)
};

const void* At(uintptr_t a) { return reinterpret_cast<const void*>(a); }

RegistrationCache::Limits Limits(size_t entries, size_t bytes = size_t{1} << 40) {
  RegistrationCache::Limits l;
  l.max_entries = entries;
  l.max_bytes = bytes;
  l.page_bytes = kPage;
  return l;
}

TEST(RegistrationCacheTest, MissRegistersWholePagesThenHits) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  const MemoryRegion* r = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x10010), 100, &r).ok());
  EXPECT_EQ(r->begin, 0x10000u);
  EXPECT_EQ(r->length, kPage);
  EXPECT_EQ(reg.registrations, 1);
  cache.Unpin(r);

  // Anything inside the registered pages is a hit.
  const MemoryRegion* again = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x10800), 0x800, &again).ok());
  EXPECT_EQ(again, r);
  EXPECT_EQ(reg.registrations, 1);
  EXPECT_EQ(cache.PinIfCached(At(0x10000), kPage), r);
  EXPECT_EQ(cache.PinIfCached(At(0x10000), kPage + 1), nullptr);  // one byte too far
  cache.Unpin(again);
  cache.Unpin(r);

  const auto st = cache.stats();
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.bytes, kPage);
}

TEST(RegistrationCacheTest, OverlappingRequestsMergeIntoOneRegion) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  const MemoryRegion* a = nullptr;
  const MemoryRegion* b = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x20000), 2 * kPage, &a).ok());
  cache.Unpin(a);
  ASSERT_TRUE(cache.Pin(At(0x40000), kPage, &b).ok());
  cache.Unpin(b);
  // Spans the end of the first and the start of the second: one region for all three.
  const MemoryRegion* c = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x21000), 0x20000, &c).ok());
  EXPECT_EQ(c->begin, 0x20000u);
  EXPECT_EQ(c->end(), 0x41000u);
  EXPECT_EQ(reg.live.size(), 1u);
  EXPECT_EQ(reg.deregistrations, 2);
  EXPECT_EQ(cache.stats().merges, 2u);
  EXPECT_EQ(cache.PinIfCached(At(0x40000), kPage), c);
  cache.Unpin(c);
  cache.Unpin(c);
}

TEST(RegistrationCacheTest, PinnedRegionsAreNotMergedAway) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  const MemoryRegion* a = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x20000), kPage, &a).ok());  // stays pinned (an RDMA write in flight)
  const MemoryRegion* b = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x20800), kPage, &b).ok());  // overlaps a but a is busy
  EXPECT_NE(a, b);
  EXPECT_EQ(reg.live.size(), 2u);
  EXPECT_EQ(a->begin, 0x20000u);  // a untouched
  cache.Unpin(a);
  cache.Unpin(b);
}

TEST(RegistrationCacheTest, EvictsLeastRecentlyUsedBeyondEntryLimit) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(3));
  const uintptr_t bases[] = {0x100000, 0x200000, 0x300000};
  for (uintptr_t base : bases) {
    const MemoryRegion* r = nullptr;
    ASSERT_TRUE(cache.Pin(At(base), kPage, &r).ok());
    cache.Unpin(r);
  }
  // Use the oldest again, so the second becomes the least recently used.
  const MemoryRegion* first = cache.PinIfCached(At(0x100000), kPage);
  ASSERT_NE(first, nullptr);
  cache.Unpin(first);
  const MemoryRegion* fourth = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x400000), kPage, &fourth).ok());
  cache.Unpin(fourth);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.stats().entries, 3u);
  EXPECT_EQ(cache.PinIfCached(At(0x200000), kPage), nullptr);  // evicted
  for (uintptr_t base : {0x100000ul, 0x300000ul, 0x400000ul}) {
    const MemoryRegion* r = cache.PinIfCached(At(base), kPage);
    EXPECT_NE(r, nullptr) << std::hex << base;
    if (r != nullptr) cache.Unpin(r);
  }
}

TEST(RegistrationCacheTest, EvictsBeyondByteLimitButNeverPinned) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(100, 4 * kPage));
  const MemoryRegion* big = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x100000), 3 * kPage, &big).ok());  // pinned
  const MemoryRegion* small = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x200000), kPage, &small).ok());
  cache.Unpin(small);
  EXPECT_EQ(cache.stats().bytes, 4 * kPage);
  // Two more pages: over the limit; only the unpinned small region can go, and still
  // over, the pinned region stays.
  const MemoryRegion* more = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x300000), 2 * kPage, &more).ok());
  EXPECT_EQ(cache.PinIfCached(At(0x200000), kPage), nullptr);
  EXPECT_EQ(reg.live.count(big->lkey), 1u);
  EXPECT_EQ(cache.stats().bytes, 5 * kPage);
  // Unpinning brings it back within the limit, dropping the least recently used.
  cache.Unpin(big);
  EXPECT_LE(cache.stats().bytes, 4 * kPage);
  EXPECT_EQ(reg.live.count(more->lkey), 1u);  // still pinned
  cache.Unpin(more);
}

TEST(RegistrationCacheTest, InvalidateDropsIdleRegionsAtOnceAndPinnedOnesAtUnpin) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  const MemoryRegion* idle = nullptr;
  const MemoryRegion* busy = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x100000), kPage, &idle).ok());
  cache.Unpin(idle);
  ASSERT_TRUE(cache.Pin(At(0x200000), kPage, &busy).ok());
  const uint32_t busy_key = busy->lkey;

  cache.Invalidate(At(0x100800), 16);
  EXPECT_EQ(reg.live.size(), 1u);  // the idle one is gone
  cache.Invalidate(At(0x1FF000), 2 * kPage);
  EXPECT_EQ(reg.live.count(busy_key), 1u);                     // still in use by its pinner
  EXPECT_EQ(cache.PinIfCached(At(0x200000), kPage), nullptr);  // but no longer a hit
  cache.Unpin(busy);
  EXPECT_TRUE(reg.live.empty());
  EXPECT_EQ(cache.stats().invalidations, 2u);
  EXPECT_EQ(cache.stats().entries, 0u);

  // The same addresses register afresh (the memory behind them may be new).
  const MemoryRegion* fresh = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x200000), kPage, &fresh).ok());
  EXPECT_NE(fresh->lkey, busy_key);
  cache.Unpin(fresh);
}

TEST(RegistrationCacheTest, FailedRegistrationCachesNothing) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  const MemoryRegion* r = nullptr;
  ASSERT_TRUE(cache.Pin(At(0x100000), kPage, &r).ok());
  cache.Unpin(r);
  reg.fail_next = true;
  const MemoryRegion* merged = nullptr;
  Status s = cache.Pin(At(0x100800), 2 * kPage, &merged);  // would have absorbed r
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.PinIfCached(At(0x100000), kPage), r);  // the old region survived
  cache.Unpin(r);
  EXPECT_EQ(cache.Pin(At(0x1000), 0, &merged).code(), Code::kInvalidArgument);
}

TEST(RegistrationCacheTest, DestructorDeregistersEverything) {
  FakeRegistrar reg;
  {
    RegistrationCache cache(&reg, Limits(8));
    const MemoryRegion* r = nullptr;
    ASSERT_TRUE(cache.Pin(At(0x100000), kPage, &r).ok());
    ASSERT_TRUE(cache.Pin(At(0x900000), kPage, &r).ok());
    cache.Unpin(r);
  }
  EXPECT_TRUE(reg.live.empty());
  EXPECT_EQ(reg.deregistrations, 2);
}

TEST(RegistrationCacheTest, UnpinOfAForeignRegionIsIgnored) {
  FakeRegistrar reg;
  RegistrationCache cache(&reg, Limits(8));
  MemoryRegion stranger;
  cache.Unpin(&stranger);  // no crash, no effect
  EXPECT_EQ(reg.deregistrations, 0);
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
