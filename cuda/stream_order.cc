#include "cuda/stream_order.h"

#include <string>

namespace tessera {
namespace cuda {

Status CompletionOrder::Finish(uint32_t seq, uint32_t* publish) {
  if (SequenceReached(finished_, seq)) {  // already released by ReleaseAll
    *publish = finished_;
    return Status::Ok();
  }
  if (seq != finished_ + 1 || !SequenceReached(issued_, seq)) {
    *publish = finished_;
    return InternalError("staged operation " + std::to_string(seq) + " finished out of order (published " +
                         std::to_string(finished_) + ", issued up to " + std::to_string(issued_) + ")");
  }
  finished_ = seq;
  *publish = finished_;
  return Status::Ok();
}

size_t SlotBytes(size_t bytes) {
  size_t capacity = size_t{64} << 10;
  while (capacity < bytes && capacity <= (SIZE_MAX >> 1)) capacity <<= 1;
  return capacity < bytes ? bytes : capacity;
}

SlotChoice ChooseSlot(const std::vector<SlotState>& slots, size_t bytes, size_t max_slots, uint32_t now_seq) {
  SlotChoice choice;
  bool found = false;
  // The smallest free slot that fits.
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].busy || slots[i].capacity < bytes) continue;
    if (!found || slots[i].capacity < slots[choice.index].capacity) {
      choice = SlotChoice{SlotAction::kReuse, i, 0};
      found = true;
    }
  }
  if (found) return choice;
  if (slots.size() < max_slots || slots.empty()) return SlotChoice{SlotAction::kAllocate, slots.size(), SlotBytes(bytes)};
  // The largest free slot, grown.
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].busy) continue;
    if (!found || slots[i].capacity > slots[choice.index].capacity) {
      choice = SlotChoice{SlotAction::kGrow, i, SlotBytes(bytes)};
      found = true;
    }
  }
  if (found) return choice;
  // All busy: the oldest operation (largest distance back from now_seq) finishes first.
  size_t oldest = 0;
  for (size_t i = 1; i < slots.size(); ++i) {
    if (now_seq - slots[i].last_seq > now_seq - slots[oldest].last_seq) oldest = i;
  }
  return SlotChoice{SlotAction::kWaitFor, oldest, 0};
}

}  // namespace cuda
}  // namespace tessera
