// FragmentReduce against a plain reduction of the whole chunk: the chunk cut into
// fragments at random byte boundaries (elements split between fragments, fragments
// inside one element), taken in order and shuffled, for 1-, 2-, 4- and 8-byte elements.
#include "transport/ucx/fragment_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// dst = a + b over unsigned integers of N bytes (wrapping): every byte counts.
template <typename T>
void Sum(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    const T z = static_cast<T>(x + y);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &z, sizeof(T));
  }
}

Reducer SumOf(size_t elem_size) {
  Reducer r;
  r.elem_size = elem_size;
  r.fn = elem_size == 1 ? Sum<uint8_t> : elem_size == 2 ? Sum<uint16_t> : elem_size == 4 ? Sum<uint32_t> : Sum<uint64_t>;
  return r;
}

// Fragment boundaries: sorted cut points in (0, length), some at odd bytes.
std::vector<std::pair<size_t, size_t>> Fragments(size_t length, std::mt19937* rng) {
  std::vector<size_t> points{0, length};
  std::uniform_int_distribution<size_t> at(1, length - 1);
  const size_t n = std::uniform_int_distribution<size_t>(0, 12)(*rng);
  for (size_t i = 0; i < n && length > 1; ++i) points.push_back(at(*rng));
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i + 1 < points.size(); ++i) out.emplace_back(points[i], points[i + 1] - points[i]);
  return out;
}

TEST(FragmentReduce, MatchesAWholeChunkReductionForAnySplitAndOrder) {
  std::mt19937 rng(20261126);
  for (size_t e : {1, 2, 4, 8}) {
    const Reducer sum = SumOf(e);
    for (int round = 0; round < 200; ++round) {
      const size_t length = e * std::uniform_int_distribution<size_t>(1, 300)(rng);
      std::vector<char> acc(length), received(length), staging(length, 0), dst(length), want(length);
      for (auto& c : acc) c = static_cast<char>(rng());
      for (auto& c : received) c = static_cast<char>(rng());
      sum.fn(want.data(), acc.data(), received.data(), length / e);
      auto fragments = Fragments(length, &rng);
      if (round % 2 == 1) std::shuffle(fragments.begin(), fragments.end(), rng);
      FragmentReduce chunk;
      chunk.dst = dst.data();
      chunk.acc = acc.data();
      chunk.staging = staging.data();
      chunk.length = length;
      chunk.reducer = &sum;
      for (const auto& f : fragments) ASSERT_TRUE(chunk.Fragment(f.first, received.data() + f.first, f.second));
      chunk.Finish();
      ASSERT_EQ(dst, want) << "element size " << e << ", " << length << " bytes in " << fragments.size()
                           << " fragments, round " << round;
    }
  }
}

TEST(FragmentReduce, InPlaceWhereTheDestinationIsTheOperand) {
  const Reducer sum = SumOf(4);
  std::vector<uint32_t> dst{1, 2, 3, 4}, received{10, 20, 30, 40};
  std::vector<char> staging(16);
  FragmentReduce chunk{reinterpret_cast<char*>(dst.data()), reinterpret_cast<const char*>(dst.data()),
                       staging.data(), 16, &sum, {}};
  const char* r = reinterpret_cast<const char*>(received.data());
  ASSERT_TRUE(chunk.Fragment(0, r, 7));
  ASSERT_TRUE(chunk.Fragment(7, r + 7, 9));
  chunk.Finish();
  EXPECT_EQ(dst, (std::vector<uint32_t>{11, 22, 33, 44}));
}

// A reducer that notes operands not aligned to their type.
bool g_misaligned = false;
void AlignedSum32(void* dst, const void* a, const void* b, size_t count) {
  for (const void* p : {static_cast<const void*>(dst), a, b}) {
    if (reinterpret_cast<uintptr_t>(p) % 4 != 0) g_misaligned = true;
  }
  Sum<uint32_t>(dst, a, b, count);
}

TEST(FragmentReduce, MisalignedFragmentsReachTheReducerAligned) {
  Reducer sum;
  sum.elem_size = 4;
  sum.fn = AlignedSum32;
  std::vector<uint32_t> dst(64, 1), acc(64, 2), staging(64, 0);
  std::vector<char> wire(64 * 4 + 1);  // the received bytes, one byte off alignment
  for (size_t i = 0; i < 64; ++i) {
    const uint32_t v = static_cast<uint32_t>(i);
    std::memcpy(wire.data() + 1 + 4 * i, &v, 4);
  }
  FragmentReduce chunk{reinterpret_cast<char*>(dst.data()), reinterpret_cast<const char*>(acc.data()),
                       reinterpret_cast<char*>(staging.data()), 256, &sum, {}};
  g_misaligned = false;
  ASSERT_TRUE(chunk.Fragment(0, wire.data() + 1, 100));
  ASSERT_TRUE(chunk.Fragment(100, wire.data() + 101, 156));
  chunk.Finish();
  EXPECT_FALSE(g_misaligned);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst[i], 2 + i) << i;
}

TEST(FragmentReduce, RefusesBytesOutsideTheChunk) {
  const Reducer sum = SumOf(4);
  std::vector<char> dst(8, 1), acc(8, 1), staging(8, 0), data(16, 5);
  FragmentReduce chunk{dst.data(), acc.data(), staging.data(), 8, &sum, {}};
  EXPECT_FALSE(chunk.Fragment(4, data.data(), 8));
  EXPECT_FALSE(chunk.Fragment(9, data.data(), 0));
  EXPECT_EQ(dst, std::vector<char>(8, 1));
  EXPECT_TRUE(chunk.Fragment(0, data.data(), 8));
}

}  // namespace
}  // namespace tessera
