// HostMemoryPool: the host path's LocalMemory (collectives/collective.h). Algorithms'
// temporary buffers (the ring reduce-scatter's blocks, recursive doubling's second
// buffer, the grid's slots) come from a per-communicator pool instead of a fresh
// std::vector per call: a zero-filled vector of tens of MiB costs a memset and a page
// fault per 4 KiB on every call, more than the reduction over it.
//
// A buffer goes back to the pool when its last owner lets go. The pool keeps at most
// kMaxKeptBuffers free buffers and kMaxKeptBytes in all; beyond either limit it frees
// the smallest ones (a sweep of growing sizes would otherwise keep only the first, small
// buffers and fault in a new one on every larger call). Contents are not initialised.
// Thread-safe.
#ifndef TESSERA_COLLECTIVES_HOST_MEMORY_POOL_H_
#define TESSERA_COLLECTIVES_HOST_MEMORY_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/collective.h"

namespace tessera {

class HostMemoryPool : public LocalMemory {
 public:
  static constexpr size_t kMaxKeptBuffers = 4;
  static constexpr size_t kMaxKeptBytes = size_t{256} << 20;

  HostMemoryPool();
  ~HostMemoryPool() override;
  HostMemoryPool(const HostMemoryPool&) = delete;
  HostMemoryPool& operator=(const HostMemoryPool&) = delete;

  // memmove: host copies may overlap (a send to self inside its own receive buffer).
  Status Copy(void* dst, const void* src, size_t bytes) override;
  // The smallest free buffer of at least `bytes`, else a new one. kInternalError only
  // if memory runs out.
  Status Allocate(size_t bytes, std::shared_ptr<void>* out) override;
  bool host() const override { return true; }

  size_t kept_buffers() const;  // free buffers held now (tests)
  size_t kept_bytes() const;

 private:
  struct Shared;  // the free list, shared with the buffers' deleters
  std::shared_ptr<Shared> shared_;
};

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_HOST_MEMORY_POOL_H_
