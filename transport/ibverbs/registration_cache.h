// RegistrationCache: memory regions registered with the NIC, kept for reuse. Registering
// memory (pinning its pages and loading their translations into the NIC) costs tens of
// microseconds per megabyte, far more than sending it, so a buffer sent again and again
// (the gradients of every training step) is registered once.
//
// Regions are keyed by address range. A request covered by a cached region is a hit. A
// miss registers the request widened to page boundaries and merged with the cached
// regions it overlaps (when they are not in use), so neighbouring requests converge on
// one region. The cache is bounded in entries and bytes; beyond either bound the least
// recently used region not in use is deregistered. A region in use (pinned) is never
// deregistered under its user: Invalidate marks it stale, so it is no longer a hit and
// is deregistered when its last user unpins it.
//
// What a cache cannot see: memory freed and mapped again at the same address behind
// its back keeps its old registration (the NIC would read the old pages). The owner
// must Invalidate a range before it is freed (tessera does so on deregistration of a
// user buffer) or cache only memory whose lifetime it controls. See docs/ibverbs.md.
//
// The cache is pure logic over a MemoryRegistrar (ibv_reg_mr in production, a fake in
// tests). Not thread-safe: one per transport, used by one thread at a time.
#ifndef TESSERA_TRANSPORT_IBVERBS_REGISTRATION_CACHE_H_
#define TESSERA_TRANSPORT_IBVERBS_REGISTRATION_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>

#include "base/settings.h"
#include "base/status.h"

namespace tessera {
namespace ibverbs {

// A range of memory as the NIC knows it.
struct MemoryRegion {
  uintptr_t begin = 0;
  size_t length = 0;
  uint32_t lkey = 0;       // for local work requests
  uint32_t rkey = 0;       // for peers' RDMA into it
  void* handle = nullptr;  // the registrar's own (an ibv_mr*)

  uintptr_t end() const { return begin + length; }
  bool Covers(uintptr_t addr, size_t len) const { return addr >= begin && addr + len <= end() && addr + len >= addr; }
  bool Overlaps(uintptr_t b, uintptr_t e) const { return b < end() && begin < e; }
};

// Registers and deregisters ranges with a NIC (or pretends to, in tests).
class MemoryRegistrar {
 public:
  virtual ~MemoryRegistrar() = default;
  // Registers [begin, begin + length) and fills `out` (begin, length, keys, handle).
  virtual Status Register(uintptr_t begin, size_t length, MemoryRegion* out) = 0;
  virtual void Deregister(const MemoryRegion& region) = 0;
};

class RegistrationCache {
 public:
  struct Limits {  // defaults: the settings table's (TESSERA_IB_CACHE_ENTRIES, TESSERA_IB_CACHE_BYTES)
    size_t max_entries = SettingDefaults::ib_cache_entries;
    size_t max_bytes = SettingDefaults::ib_cache_bytes;
    size_t page_bytes = 4096;  // registrations start and end on multiples of it (a power of two)
  };

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;         // each one a registration
    uint64_t evictions = 0;      // deregistered to respect the limits
    uint64_t merges = 0;         // cached regions absorbed into a larger new one
    uint64_t invalidations = 0;  // regions dropped by Invalidate
    size_t entries = 0;          // registered now (stale ones still pinned included)
    size_t bytes = 0;
  };

  // `registrar` must outlive the cache.
  RegistrationCache(MemoryRegistrar* registrar, const Limits& limits);
  // Deregisters every region, pinned or not: users must be done with them.
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A region covering [addr, addr + len) (len >= 1), pinned for the caller: a cached one
  // or a new registration (see above). Valid until Unpin. Fails with the registrar's
  // status (nothing cached then) or InvalidArgument for an empty or wrapping range.
  Status Pin(const void* addr, size_t len, const MemoryRegion** out);
  // The hit half of Pin: the pinned covering region if one is cached, else null; never
  // registers anything. A lookup that misses counts as neither hit nor miss.
  const MemoryRegion* PinIfCached(const void* addr, size_t len);
  // Ends one Pin. The region is deregistered now if it is stale and unused, or later by
  // eviction.
  void Unpin(const MemoryRegion* region);

  // [addr, addr + len) is going away: cached regions overlapping it stop being hits and
  // are deregistered (at once, or at their last Unpin if pinned).
  void Invalidate(const void* addr, size_t len);

  Stats stats() const { return stats_; }

 private:
  struct Entry {
    MemoryRegion region;
    int pins = 0;
    bool stale = false;
  };
  using EntryList = std::list<Entry>;

  EntryList::iterator Find(const MemoryRegion* region);
  void Drop(EntryList::iterator it);  // deregisters and forgets
  void EvictBeyondLimits();

  MemoryRegistrar* const registrar_;
  const Limits limits_;
  EntryList entries_;  // most recently used first
  Stats stats_;
};

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_REGISTRATION_CACHE_H_
