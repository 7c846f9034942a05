// Per-epoch shuffle and per-rank shards (see epoch_shard.h).
#include "trainer/epoch_shard.h"

#include <algorithm>
#include <numeric>

#include "trainer/random.h"

namespace trainer {

std::vector<int64_t> EpochPermutation(int64_t count, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(StreamSeed(seed, 0x5348554646ull /* "SHUFF" */, static_cast<uint64_t>(epoch)));
  for (int64_t i = count - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

int64_t StepsPerEpoch(int64_t count, int64_t global_batch) {
  return global_batch > 0 ? count / global_batch : 0;
}

int64_t EpochSpan(int64_t count, int64_t global_batch, int64_t max_steps) {
  int64_t steps = StepsPerEpoch(count, global_batch);
  if (max_steps > 0) steps = std::min(steps, max_steps);
  return steps * global_batch;
}

int64_t StepsLeft(int64_t span, int64_t position, int64_t global_batch) {
  if (global_batch <= 0 || position >= span) return 0;
  return (span - position + global_batch - 1) / global_batch;
}

void RankSlice(int64_t n, int world, int rank, int64_t* begin, int64_t* end) {
  *begin = n * rank / world;
  *end = n * (rank + 1) / world;
}

Batches TrainBatchesForRank(const std::vector<int64_t>& permutation, int64_t position, int64_t span,
                            int64_t global_batch, int world, int rank) {
  Batches batches;
  if (world <= 0 || rank < 0 || rank >= world || global_batch <= 0) return batches;
  span = std::min<int64_t>(span, static_cast<int64_t>(permutation.size()));
  for (int64_t first = position; first < span; first += global_batch) {
    int64_t begin = 0, end = 0;
    RankSlice(std::min(global_batch, span - first), world, rank, &begin, &end);
    batches.emplace_back(permutation.begin() + first + begin, permutation.begin() + first + end);
  }
  return batches;
}

Batches ValBatchesForRank(int64_t count, int64_t batch, int world, int rank) {
  Batches batches;
  if (world <= 0 || batch <= 0) return batches;
  const int64_t begin = count * rank / world, end = count * (rank + 1) / world;
  for (int64_t first = begin; first < end; first += batch) {
    std::vector<int64_t> positions;
    for (int64_t i = first; i < std::min(end, first + batch); ++i) positions.push_back(i);
    batches.push_back(std::move(positions));
  }
  return batches;
}

}  // namespace trainer
