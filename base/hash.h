// FNV-1a, 64-bit: the project's one non-cryptographic hash of bytes, for digests that
// ranks (or runs) compare with each other. Unlike std::hash its value is fixed by its
// definition, so ranks built against different standard libraries agree on it. Not for
// anything an adversary chooses to collide.
#ifndef TESSERA_BASE_HASH_H_
#define TESSERA_BASE_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

constexpr uint64_t kFnv1aBasis = 14695981039346656037ull;
constexpr uint64_t kFnv1aPrime = 1099511628211ull;

// The hash of `size` bytes at `data`, continuing from `hash` (a previous call's result,
// so that pieces hashed one after the other give the hash of their concatenation).
inline uint64_t Fnv1a(const void* data, size_t size, uint64_t hash = kFnv1aBasis) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * kFnv1aPrime;
  return hash;
}

inline uint64_t Fnv1a(std::string_view text, uint64_t hash = kFnv1aBasis) {
  return Fnv1a(text.data(), text.size(), hash);
}

}  // namespace tessera

#endif  // TESSERA_BASE_HASH_H_
