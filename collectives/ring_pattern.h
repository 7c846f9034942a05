// Peer and block arithmetic of ring algorithms, as pure functions (tested alone).
//
// `count` elements are cut into `nranks` contiguous blocks whose sizes differ by at
// most one element (the first count % nranks blocks get the extra one), so any count,
// divisible by the number of ranks or not, is handled without padding.
#ifndef TESSERA_COLLECTIVES_RING_PATTERN_H_
#define TESSERA_COLLECTIVES_RING_PATTERN_H_

#include <cstddef>

namespace tessera {

struct Block {
  size_t offset;  // in elements
  size_t count;   // in elements
};

inline Block RingBlock(size_t count, int nranks, int index) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t i = static_cast<size_t>(index);
  const size_t base = count / n, extra = count % n;
  return Block{i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

inline int RingRight(int rank, int nranks) { return (rank + 1) % nranks; }
inline int RingLeft(int rank, int nranks) { return (rank + nranks - 1) % nranks; }

// Reduce-scatter step s (0 <= s < nranks - 1): the block this rank sends, and the one
// it receives and reduces. After the last step this rank owns the fully reduced block
// RingOwnedBlock(rank).
inline int RingReduceScatterSendBlock(int rank, int nranks, int step) { return ((rank - step) % nranks + nranks) % nranks; }
inline int RingReduceScatterRecvBlock(int rank, int nranks, int step) { return ((rank - step - 1) % nranks + nranks) % nranks; }
inline int RingOwnedBlock(int rank, int nranks) { return (rank + 1) % nranks; }

// Allgather step s (0 <= s < nranks - 1), starting from the owned block.
inline int RingAllGatherSendBlock(int rank, int nranks, int step) { return ((rank + 1 - step) % nranks + nranks) % nranks; }
inline int RingAllGatherRecvBlock(int rank, int nranks, int step) { return ((rank - step) % nranks + nranks) % nranks; }

// Rings over parts of a long list (the cost-model probe's columns): the list cut into
// consecutive parts of `most` members (most >= 2), a last part of one joined to the one
// before, so every part has at least two members and at most most + 1. The part of the
// member at `pos` of `n`, as [first, end).
struct RingPart {
  int first;
  int end;
};
inline RingPart RingPartOf(int n, int pos, int most) {
  int first = pos / most * most;
  int end = first + most < n ? first + most : n;
  if (n - end == 1) end = n;
  if (end - first == 1 && first > 0) first -= most;
  return RingPart{first, end};
}

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RING_PATTERN_H_
