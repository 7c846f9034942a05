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

Batches TrainBatchesForRank(const std::vector<int64_t>& permutation, int64_t global_batch, int world, int rank) {
  Batches batches;
  if (world <= 0 || global_batch % world != 0) return batches;
  const int64_t per_rank = global_batch / world;
  const int64_t steps = StepsPerEpoch(static_cast<int64_t>(permutation.size()), global_batch);
  for (int64_t step = 0; step < steps; ++step) {
    auto first = permutation.begin() + step * global_batch + rank * per_rank;
    batches.emplace_back(first, first + per_rank);
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
