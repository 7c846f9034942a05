// Fixed-point grids: the kernels of deterministic sums (TESSERA_DETERMINISTIC,
// docs/semantics.md#deterministic-mode).
//
// A floating-point sum depends on the order of its additions; a sum of integers does
// not. Deterministic mode therefore puts every contribution on a grid that all ranks
// share, adds the grid values exactly, and rounds the sum once:
//  - Elements come in blocks of kGridBlock, counted from the start of the whole vector.
//    A block's key is the largest biased exponent among the finite values of every
//    contribution to it (MaxGridKeys on each, then a max-allreduce); 2^E, E = key - bias
//    + 1 (at least 2 - bias), bounds their magnitudes.
//  - An element x becomes the integer round(x / 2^q), ties to even, q = E + H - P,
//    held in a float of P-bit significand (the wire): float32 (P = 24) for float16 and
//    bfloat16, float64 (P = 53) for float32, and two float64 words for float64 (the
//    second one holds the remainder on a grid 2^(P - H + 1) finer). q never goes below
//    the type's smallest subnormal exponent, where every value is exact anyway.
//  - Each integer is at most 2^(P - H) in magnitude, so any 2^H = kMaxGridContributions
//    of them add exactly in float arithmetic, in any order and grouping: every
//    algorithm, layout and rank count gives the same wire sum, bit for bit.
//  - FromGrid returns sum * 2^q rounded once to the type (to nearest even). NaN and
//    infinities travel as themselves (a NaN, or +inf with -inf, makes NaN; otherwise an
//    infinity wins) and every NaN comes out as the type's canonical quiet NaN. A zero
//    is -0.0 exactly when every contribution rounded to -0.0 on the grid.
// Assumes the default floating-point environment (round to nearest, no flush-to-zero
// or denormals-are-zero), as every rank then computes the same bits.
//
// Every function has a baseline (SSE2), an AVX2 and an AVX-512 implementation with
// identical results; the plain names use the widest the CPU has: deterministic mode
// runs them on segments that stay in cache, where wider vectors do more per cycle
// (beyond the caches all three wait on memory; docs/kernels.md).
#ifndef TESSERA_COLLECTIVES_FIXED_POINT_H_
#define TESSERA_COLLECTIVES_FIXED_POINT_H_

#include <cstddef>
#include <cstdint>

#include "base/types.h"
#include "elementwise/simd_isa.h"
#include "transport/transport.h"

namespace tessera {

constexpr size_t kGridBlock = 1024;    // elements that share one key
constexpr int kGridHeadroomBits = 12;  // H
constexpr int kMaxGridContributions = 1 << kGridHeadroomBits;

// How a float type travels on its grid: the wire type and its words per element.
struct GridFormat {
  DataType wire = DataType::kFloat64;
  size_t words = 1;
  size_t wire_bytes() const { return SizeOf(wire) * words; }  // per element
};

// The format of float16, bfloat16, float32 and float64; false for other types.
bool GridFormatOf(DataType type, GridFormat* out);

// Blocks of a vector of `count` elements.
inline size_t GridBlocks(size_t count) { return (count + kGridBlock - 1) / kGridBlock; }

// q of a block with key `key`: element x sits on the grid as round(x / 2^q) (the first
// word's, for float64).
int GridExponent(DataType type, int32_t key);

// keys[b] = max(keys[b], key of block b of in[0, count)). keys holds GridBlocks(count).
void MaxGridKeys(DataType type, const void* in, size_t count, int32_t* keys);

// wire (count elements of the format) = (add: wire +) in[0, count) on the grid, where
// in[i] is element first + i of the vector that `keys` describes. wire may not overlap in.
void ToGrid(DataType type, const void* in, size_t count, size_t first, const int32_t* keys, void* wire, bool add);

// out[i] = wire element i (element first + i of the vector) rounded once to `type`.
void FromGrid(DataType type, const void* wire, size_t count, size_t first, const int32_t* keys, void* out);

// out[i] = the grid sum of inputs[0][i] ... inputs[n - 1][i], rounded once (n <=
// kMaxGridContributions), for count elements that are a whole vector: the keys are
// those of these inputs, so every rank that holds all of them computes the sum that
// MaxGridKeys, ToGrid and FromGrid would. One pass: each block is summed in a buffer
// on the stack. out may be one of the inputs.
void GridSum(DataType type, const void* const* inputs, size_t n, size_t count, void* out);

// The reducer of a two-rank reduce-scatter on the grid: its elements are whole grid
// blocks of `type` (elem_size = kGridBlock values), and fn(out, a, b, n) is GridSum of
// the n blocks of a and b (a's and b's blocks must be those of whole vectors). A
// transport then reduces each piece straight from its buffers. False for other types.
bool GridPairReducer(DataType type, Reducer* out);

// Deterministic mode's max and min: out = in with every zero made +0.0 and every NaN the
// canonical quiet NaN, for float16, bfloat16, float32 and float64, so that max and min,
// which return one of their operands, give the same bits in any order (out may be in).
void CanonicalizeZerosAndNans(DataType type, const void* in, size_t count, void* out);

// The same on a chosen implementation, for tests and benchmarks (one the CPU lacks runs
// the widest below it that it has).
SimdIsa PreferredGridIsa();
void MaxGridKeysWith(SimdIsa isa, DataType type, const void* in, size_t count, int32_t* keys);
void ToGridWith(SimdIsa isa, DataType type, const void* in, size_t count, size_t first, const int32_t* keys,
                void* wire, bool add);
void FromGridWith(SimdIsa isa, DataType type, const void* wire, size_t count, size_t first, const int32_t* keys,
                  void* out);
void CanonicalizeZerosAndNansWith(SimdIsa isa, DataType type, const void* in, size_t count, void* out);
void GridSumWith(SimdIsa isa, DataType type, const void* const* inputs, size_t n, size_t count, void* out);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_FIXED_POINT_H_
