// What each rank puts in its buffers, and what a reduction over all ranks must give,
// chosen so that the result is exact in every data type and every order of reduction:
// checks compare bytes, with no tolerance.
//
// Values are small integers that depend on (rank, element index), repeating every
// kPatternPeriod elements. Per operator:
//   sum   values in [-A, A] (unsigned types: [0, A]), with A = min(3, L / nranks), where
//         L is the largest integer every partial sum may reach exactly in the type
//         (int8 127, uint8 255, bfloat16 256, half 2048). When nranks > L (A = 0),
//         exactly one rank contributes a 1 to each element.
//   prod  values in {1, -1} (unsigned types: {1}), and a 2 from at most one rank per
//         element: every product is +-1 or +-2.
//   max,
//   min   values in [-4, 4] (unsigned types: [0, 8]).
//   avg   value = base(element) + d(rank, element), where the d of paired ranks cancel
//         (d in {-1, 0, 1}) and |base| + 1 <= A: the sum is exactly nranks * base, and
//         the average is base, with no rounding whether the library divides the sum
//         or multiplies by 1 / nranks for nranks a power of two. (For other nranks,
//         multiplying by a rounded reciprocal may legitimately differ in the last bit.)
// Integer sums and products are taken modulo 2^bits, as every integer implementation
// computes them.
#ifndef TESSERA_BENCH_PERF_DATA_H_
#define TESSERA_BENCH_PERF_DATA_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/perf_types.h"

namespace tessera_bench {

// Patterns repeat every kPatternPeriod elements (divisible by 1..10, so every modulus
// used in a pattern divides it).
constexpr size_t kPatternPeriod = 2520;

// The value `rank` (of `nranks`) contributes at element `index`.
int64_t SendValue(DataType type, ReduceOp op, int rank, int nranks, size_t index);

// `op` over ranks 0..nranks-1 of SendValue at `index`, computed exactly (integer sums
// and products modulo 2^64, which truncates to the type's own wrap-around).
int64_t ReducedValue(DataType type, ReduceOp op, int nranks, size_t index);

// Writes `value` as one element of `type` (integers truncated to the type's width,
// floating types converted, exactly for the values above).
void EncodeValue(DataType type, int64_t value, void* element);

// One period of encoded elements, tiled into buffers and compared against them.
class ElementPattern {
 public:
  // The pattern of `values` (kPatternPeriod of them) encoded as `type`.
  ElementPattern(DataType type, const std::vector<int64_t>& values);

  // Writes elements 0..count-1 of the repeating pattern to `buffer`.
  void Fill(void* buffer, size_t count) const;

  // Number of elements among 0..count-1 of `buffer` whose bytes differ from the pattern.
  size_t CountMismatches(const void* buffer, size_t count) const;

 private:
  size_t element_size_;
  std::vector<unsigned char> period_bytes_;
};

// The pattern this rank sends, and the pattern every rank must receive from an
// allreduce, for (type, op, rank, nranks).
ElementPattern SendPattern(DataType type, ReduceOp op, int rank, int nranks);
ElementPattern ReducedPattern(DataType type, ReduceOp op, int nranks);

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_PERF_DATA_H_
