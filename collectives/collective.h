// What every collective algorithm receives: who this rank is, how to reach its peers,
// and the bounds of its waits. Algorithms are schedules of Exchanges over Links; they
// never see which transport carries them.
#ifndef TESSERA_COLLECTIVES_COLLECTIVE_H_
#define TESSERA_COLLECTIVES_COLLECTIVE_H_

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "base/types.h"
#include "transport/exchange.h"
#include "transport/host_board.h"
#include "transport/link_table.h"

namespace tessera {

struct Grid;
class TorusGrids;
struct CostModel;
struct Shape;

// Where an algorithm's own copies and temporary buffers live. Algorithms use host
// memory (std::memcpy, std::vector) unless the context names a LocalMemory: a
// device-resident call (comm/device_path.cc) does, so that every buffer an algorithm
// touches is device memory and its copies run on the device. Use LocalCopy and Scratch
// below rather than std::memcpy and std::vector in algorithms.
class LocalMemory {
 public:
  virtual ~LocalMemory() = default;
  // dst = src for `bytes` (the ranges do not overlap); complete when it returns.
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // `bytes` of temporary memory, freed when the last owner lets go of *out.
  virtual Status Allocate(size_t bytes, std::shared_ptr<void>* out) = 0;
  // Whether this memory is the host's (Scratch then keeps a few bytes inline).
  virtual bool host() const { return false; }
};

struct CollectiveContext {
  int rank = 0;
  int nranks = 1;
  LinkTable* links = nullptr;
  ExchangeOptions exchange;          // deadline of this call, spinning, abort flag
  const Grid* host_grid = nullptr;   // rows = hosts; null when hosts differ in rank count
  const TorusGrids* torus_grids = nullptr;  // TESSERA_TORUS's, else those the model chooses among
  // The model and shape the call was chosen with (the torus allreduce chooses its grid
  // by them): the same on every rank.
  const CostModel* model = nullptr;
  const Shape* shape = nullptr;
  LocalMemory* local_memory = nullptr;  // null: host memory
  HostBoard* board = nullptr;  // every rank's host board (host-memory calls only), or null
};

// dst = src through the context's LocalMemory (std::memcpy when it has none).
inline Status LocalCopy(const CollectiveContext& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return Status::Ok();
  if (ctx.local_memory != nullptr) return ctx.local_memory->Copy(dst, src, bytes);
  std::memcpy(dst, src, bytes);
  return Status::Ok();
}

// An algorithm's temporary buffer, in the context's memory (host memory when it has none).
// Up to kInlineBytes of host memory live in the object itself: a small call's scratch
// then costs no allocation.
class Scratch {
 public:
  static constexpr size_t kInlineBytes = 4096;

  Scratch() = default;
  Scratch(const Scratch&) = delete;  // data() may point into the object itself
  Scratch& operator=(const Scratch&) = delete;

  Status Allocate(const CollectiveContext& ctx, size_t bytes) {
    if (bytes <= kInlineBytes && (ctx.local_memory == nullptr || ctx.local_memory->host())) {
      data_ = inline_;
      return Status::Ok();
    }
    if (ctx.local_memory == nullptr) {
      host_.resize(bytes);
      data_ = host_.data();
      return Status::Ok();
    }
    TESSERA_RETURN_IF_ERROR(ctx.local_memory->Allocate(bytes, &device_));
    data_ = static_cast<char*>(device_.get());
    return Status::Ok();
  }
  char* data() const { return data_; }

 private:
  alignas(std::max_align_t) char inline_[kInlineBytes];  // no more: not every home of a Scratch keeps 64 (UBSan)
  std::vector<char> host_;
  std::shared_ptr<void> device_;
  char* data_ = nullptr;
};

// The buffers of one collective. `count` is in elements, with the meaning nccl.h gives
// it for that collective (per rank's block for AllGather, ReduceScatter, AlltoAll,
// Gather and Scatter). `reducer` is set for reducing collectives (its elem_size is the
// element size for all).
struct CollectiveArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  size_t elem_size = 1;
  Reducer reducer;
  int root = 0;
  // AlltoAll only: recv's block `rank` is left as it is (the caller reads its own block
  // from send), saving a copy of it.
  bool skip_own_block = false;
};

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COLLECTIVE_H_
