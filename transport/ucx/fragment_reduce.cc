#include "transport/ucx/fragment_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tessera {

bool FragmentReduce::Fragment(size_t offset, const void* src, size_t bytes) {
  if (offset > length || bytes > length - offset) return false;
  const size_t e = reducer->elem_size;
  // The whole chunk at once (every small message) at an aligned address: no cut.
  if (offset == 0 && bytes == length && reinterpret_cast<uintptr_t>(src) % e == 0) {
    reducer->fn(dst, acc, src, length / e);
    return true;
  }
  const char* from = static_cast<const char*>(src);
  const size_t end = offset + bytes;
  const size_t first = (offset + e - 1) / e, last = end / e;  // whole elements [first, last)
  if (first < last) {
    // UCX's buffers may put a fragment at any address (its TCP receive buffers do); a
    // reducer takes its operands aligned to their type, so such a fragment goes
    // through staging, which is.
    const char* whole = from + (first * e - offset);
    if (reinterpret_cast<uintptr_t>(whole) % e != 0) {
      std::memcpy(staging + first * e, whole, (last - first) * e);
      whole = staging + first * e;
    }
    reducer->fn(dst + first * e, acc + first * e, whole, last - first);
  }
  // The bytes outside whole elements: a head and a tail, or all of a fragment that
  // lies inside one element.
  const size_t head_end = first < last ? first * e : end;
  const size_t tail_begin = first < last ? last * e : end;
  std::memcpy(staging + offset, from, head_end - offset);
  std::memcpy(staging + tail_begin, from + (tail_begin - offset), end - tail_begin);
  if (offset % e != 0) cut.push_back(offset / e);
  if (end % e != 0) cut.push_back(end / e);
  return true;
}

void FragmentReduce::Finish() {
  std::sort(cut.begin(), cut.end());
  cut.erase(std::unique(cut.begin(), cut.end()), cut.end());
  const size_t e = reducer->elem_size;
  for (size_t i : cut) reducer->fn(dst + i * e, acc + i * e, staging + i * e, 1);
  cut.clear();
}

}  // namespace tessera
