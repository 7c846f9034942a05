#include "transport/ibverbs/registration_cache.h"

#include <algorithm>
#include <vector>

namespace tessera {
namespace ibverbs {

RegistrationCache::RegistrationCache(MemoryRegistrar* registrar, const Limits& limits)
    : registrar_(registrar), limits_(limits) {}

RegistrationCache::~RegistrationCache() {
  while (!entries_.empty()) Drop(entries_.begin());
}

RegistrationCache::EntryList::iterator RegistrationCache::Find(const MemoryRegion* region) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (&it->region == region) return it;
  }
  return entries_.end();
}

void RegistrationCache::Drop(EntryList::iterator it) {
  registrar_->Deregister(it->region);
  stats_.entries -= 1;
  stats_.bytes -= it->region.length;
  entries_.erase(it);
}

const MemoryRegion* RegistrationCache::PinIfCached(const void* addr, size_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->stale || !it->region.Covers(a, len)) continue;
    ++it->pins;
    ++stats_.hits;
    entries_.splice(entries_.begin(), entries_, it);  // now the most recently used
    return &entries_.front().region;
  }
  return nullptr;
}

Status RegistrationCache::Pin(const void* addr, size_t len, const MemoryRegion** out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || a + len < a) {
    return InvalidArgument("cannot register " + std::to_string(len) + " bytes at " + std::to_string(a));
  }
  if ((*out = PinIfCached(addr, len)) != nullptr) return Status::Ok();

  // Miss: widen to pages, then absorb the unpinned regions the range overlaps.
  const uintptr_t page = limits_.page_bytes;
  uintptr_t begin = a & ~(page - 1);
  uintptr_t end = (a + len + page - 1) & ~(page - 1);
  if (end < a + len) end = a + len;  // rounding wrapped at the top of the address space
  std::vector<EntryList::iterator> absorbed;
  bool grew = true;
  while (grew) {  // a merged region may reach further regions
    grew = false;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->pins > 0 || it->stale || !it->region.Overlaps(begin, end)) continue;
      if (std::find(absorbed.begin(), absorbed.end(), it) != absorbed.end()) continue;
      absorbed.push_back(it);
      if (it->region.begin < begin || it->region.end() > end) grew = true;
      begin = std::min(begin, it->region.begin);
      end = std::max(end, it->region.end());
    }
  }
  MemoryRegion region;
  TESSERA_RETURN_IF_ERROR(registrar_->Register(begin, end - begin, &region));
  if (!region.Covers(a, len)) {  // the registrar clamped it (e.g. to a GPU allocation)
    registrar_->Deregister(region);
    return InvalidArgument("cannot register " + std::to_string(len) + " bytes at " + std::to_string(a) +
                           " as one region (does the range span two allocations?)");
  }
  ++stats_.misses;
  for (auto it : absorbed) {
    Drop(it);
    ++stats_.merges;
  }
  entries_.push_front(Entry{region, 1, false});
  stats_.entries += 1;
  stats_.bytes += region.length;
  *out = &entries_.front().region;
  EvictBeyondLimits();
  return Status::Ok();
}

void RegistrationCache::Unpin(const MemoryRegion* region) {
  auto it = Find(region);
  if (it == entries_.end() || it->pins == 0) return;  // not ours: ignore rather than crash
  if (--it->pins == 0 && it->stale) {
    Drop(it);
    return;
  }
  EvictBeyondLimits();
}

void RegistrationCache::Invalidate(const void* addr, size_t len) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t e = b + len < b ? UINTPTR_MAX : b + len;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (!it->stale && it->region.Overlaps(b, e)) {
      ++stats_.invalidations;
      if (it->pins == 0) {
        Drop(it);
      } else {
        it->stale = true;
      }
    }
    it = next;
  }
}

void RegistrationCache::EvictBeyondLimits() {
  // Walk from the least recently used end, skipping regions in use.
  auto it = entries_.end();
  while ((stats_.entries > limits_.max_entries || stats_.bytes > limits_.max_bytes) && it != entries_.begin()) {
    --it;
    if (it->pins > 0) continue;
    auto victim = it;
    it = std::next(it);  // stays valid: list erase only invalidates the victim
    Drop(victim);
    ++stats_.evictions;
  }
}

}  // namespace ibverbs
}  // namespace tessera
