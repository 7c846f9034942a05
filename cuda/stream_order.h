// The bookkeeping behind staged device operations (cuda/device_buffers.h), as pure logic
// with no CUDA in it, so it is tested on machines without a GPU.
//
// How a staged operation keeps the caller's stream order: the caller's thread enqueues,
// on the stream, a copy of the inputs to pinned host memory, a GPU-side wait until a
// 32-bit word in host memory reaches the operation's sequence number, then the copy of
// the results back, and returns. The proxy thread runs the operations in issue order
// and, as each finishes, publishes its number in the word. So the stream continues
// exactly when the host part of that operation is done, and no host thread blocks.
//
// CompletionOrder numbers the operations and says what to publish. StagingSlots decides
// which pinned buffer an operation uses (a buffer is reused once its stream has copied
// the results out of it).
#ifndef TESSERA_CUDA_STREAM_ORDER_H_
#define TESSERA_CUDA_STREAM_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tessera {
namespace cuda {

// True when a published word `word` releases the wait for `seq`. Cyclic, exactly as the
// GPU compares for CU_STREAM_WAIT_VALUE_GEQ ((int32_t)(word - seq) >= 0), so numbers
// may wrap around 2^32 as long as fewer than 2^31 operations are outstanding.
inline bool SequenceReached(uint32_t word, uint32_t seq) { return static_cast<int32_t>(word - seq) >= 0; }

// Sequence numbers of one stager. Not thread-safe: the stager locks around it.
class CompletionOrder {
 public:
  // `published` is the word's initial value; the first operation is published + 1.
  explicit CompletionOrder(uint32_t published = 0) : issued_(published), finished_(published) {}

  // The number the next operation will wait for. CommitIssue() once its wait is on a
  // stream: only then must it be finished.
  uint32_t NextToIssue() const { return issued_ + 1; }
  void CommitIssue() { ++issued_; }

  // The host part of `seq` is done: *publish is the word to store (never lower than
  // before). `seq` must be the oldest unfinished operation, or one already released by
  // ReleaseAll (then *publish is unchanged); anything else is an InternalError.
  Status Finish(uint32_t seq, uint32_t* publish);

  // Releases every issued operation (abort, destruction, a broken stager): the word to
  // publish so that no stream waits any more.
  uint32_t ReleaseAll() {
    finished_ = issued_;
    return finished_;
  }

  uint32_t published() const { return finished_; }
  uint32_t outstanding() const { return issued_ - finished_; }

 private:
  uint32_t issued_;
  uint32_t finished_;
};

// What a pinned staging slot looks like to the chooser. `busy`: its last operation's
// stream has not yet copied the results out (the caller refreshes this from the slot's
// CUDA event before choosing). `last_seq`: the number of that operation.
struct SlotState {
  size_t capacity = 0;
  bool busy = false;
  uint32_t last_seq = 0;
};

enum class SlotAction {
  kReuse,     // use slots[index] as it is
  kAllocate,  // add a new slot of `bytes` (index = slots.size())
  kGrow,      // slots[index] is free but too small: free it, allocate `bytes` in its place
  kWaitFor,   // every slot is busy and no more may be added: wait for slots[index] (the
              // oldest), then choose again
};

struct SlotChoice {
  SlotAction action = SlotAction::kReuse;
  size_t index = 0;
  size_t bytes = 0;  // for kAllocate and kGrow: the capacity to allocate
};

// Capacity allocated for a need of `bytes`: the next power of two, at least 64 KiB, so
// that slots are few and reused across sizes.
size_t SlotBytes(size_t bytes);

// Picks a slot for an operation needing `bytes` (0 is fine: the slot still carries the
// operation's events). Prefers the smallest free slot that fits, then a new slot while
// fewer than max_slots exist, then growing the largest free slot, and only when all are
// busy waits for the one with the oldest operation. `now_seq` is the number the
// operation will get (for the cyclic "oldest" comparison).
SlotChoice ChooseSlot(const std::vector<SlotState>& slots, size_t bytes, size_t max_slots, uint32_t now_seq);

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_STREAM_ORDER_H_
