// Which images each rank reads in an epoch.
//
// Training: the whole train list is shuffled once per epoch with a permutation that
// depends only on (seed, epoch). Global step s uses positions [s*G, (s+1)*G) of it
// (G: the epoch's global batch) and rank r takes the slice [r*b, (r+1)*b) of that
// (b = G / world). The last incomplete global batch is dropped. So within an epoch no
// image is read twice, by any rank, and the images of a global step are the same
// whatever the number of ranks. Validation: rank r takes a contiguous 1/world of the
// val list, in order, in batches of up to `batch` (the last may be smaller): every image
// is evaluated exactly once.
#ifndef TESSERA_TRAINER_EPOCH_SHARD_H_
#define TESSERA_TRAINER_EPOCH_SHARD_H_

#include <cstdint>
#include <vector>

namespace trainer {

using Batches = std::vector<std::vector<int64_t>>;  // positions into the image list

// A permutation of 0 .. count-1 (Fisher-Yates driven by trainer::Rng).
std::vector<int64_t> EpochPermutation(int64_t count, uint64_t seed, int epoch);

// Number of global steps of an epoch of `count` images at global batch G.
int64_t StepsPerEpoch(int64_t count, int64_t global_batch);

// Rank `rank`'s training batches for the epoch (see above). global_batch must be a
// multiple of world.
Batches TrainBatchesForRank(const std::vector<int64_t>& permutation, int64_t global_batch, int world, int rank);

// Rank `rank`'s validation batches over `count` images.
Batches ValBatchesForRank(int64_t count, int64_t batch, int world, int rank);

}  // namespace trainer

#endif  // TESSERA_TRAINER_EPOCH_SHARD_H_
