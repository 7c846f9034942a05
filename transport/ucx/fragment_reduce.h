// A chunk reduced fragment by fragment, as UCX copies an eager message out of its
// shared-memory FIFO or socket buffer (the UCX link's reducing receives on hosts
// without RDMA, through a UCX generic datatype). Whole elements of a fragment are
// reduced straight into the destination, saving a pass through staging; the bytes of
// an element that a fragment boundary cuts wait in staging at their own offset, and
// Finish reduces those elements once every fragment has arrived. Fragments may come in
// any order, at any byte boundary and at any address (a misaligned one is reduced from
// staging: reducers take operands aligned to their type). `staging` and `dst` are
// aligned to the element size.
#ifndef TESSERA_TRANSPORT_UCX_FRAGMENT_REDUCE_H_
#define TESSERA_TRANSPORT_UCX_FRAGMENT_REDUCE_H_

#include <cstddef>
#include <vector>

#include "transport/transport.h"

namespace tessera {

struct FragmentReduce {
  char* dst = nullptr;          // dst = acc op received, for `length` bytes
  const char* acc = nullptr;
  char* staging = nullptr;      // `length` bytes
  size_t length = 0;            // a whole number of elements
  const Reducer* reducer = nullptr;
  std::vector<size_t> cut;      // elements cut by a fragment boundary (may repeat)

  // Takes bytes [offset, offset + bytes) of the chunk; false (and nothing written) if
  // they lie outside it.
  bool Fragment(size_t offset, const void* src, size_t bytes);
  // Reduces the cut elements, once all of the chunk's bytes were taken.
  void Finish();
};

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_UCX_FRAGMENT_REDUCE_H_
