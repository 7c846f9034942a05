// Which images each rank reads in an epoch.
//
// Training: the whole train list is shuffled once per epoch with a permutation that
// depends only on (seed, epoch). The epoch's steps read positions [0, span) of it, in
// order: each global step reads the next G positions (G: the global batch), and rank r
// of `world` takes the slice [n*r/world, n*(r+1)/world) of a step's n positions (equal
// slices when world divides G, as it does at launch). The tail of the list that does
// not fill a global batch is dropped: span = (images / G) * G, or less when epochs are
// cut short. So within an epoch no image is read twice, by any rank, and the images of
// a global step are the same whatever the number of ranks.
//
// When ranks are lost mid-epoch (the trainer's --elastic), the survivors read the rest
// [position, span) at the new world, and at a new G if it changed (the per-rank batch
// kept): the last step of the epoch then reads what is left, possibly fewer than G. So
// no image of the epoch is skipped or read twice across the change either.
//
// Validation: rank r takes a contiguous 1/world of the val list, in order, in batches
// of up to `batch` (the last may be smaller): every image is evaluated exactly once.
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

// The positions an epoch reads, [0, span): whole global batches of `count` images, at
// most max_steps of them (0: no limit).
int64_t EpochSpan(int64_t count, int64_t global_batch, int64_t max_steps);

// Steps left to read [position, span) at global batch G (the last may read fewer).
int64_t StepsLeft(int64_t span, int64_t position, int64_t global_batch);

// Rank `rank`'s slice [*begin, *end) of a step's n positions (offsets into the step).
void RankSlice(int64_t n, int world, int rank, int64_t* begin, int64_t* end);

// Rank `rank`'s training batches for the steps that read [position, span) of the
// epoch's permutation at global batch G (see above).
Batches TrainBatchesForRank(const std::vector<int64_t>& permutation, int64_t position, int64_t span,
                            int64_t global_batch, int world, int rank);

// Rank `rank`'s validation batches over `count` images.
Batches ValBatchesForRank(int64_t count, int64_t batch, int world, int rank);

}  // namespace trainer

#endif  // TESSERA_TRAINER_EPOCH_SHARD_H_
