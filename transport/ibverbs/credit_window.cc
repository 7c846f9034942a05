#include "transport/ibverbs/credit_window.h"

#include <string>

namespace tessera {
namespace ibverbs {

CreditWindow::CreditWindow(uint32_t slots, uint32_t first_sequence)
    : slots_(slots == 0 ? 1 : slots), oldest_(first_sequence), next_(first_sequence), returned_(slots_, false) {}

uint32_t CreditWindow::Acquire() { return next_++; }

Status CreditWindow::Return(uint32_t first, uint32_t count) {
  // Check every slot before changing anything. Distances are taken modulo 2^32, so
  // the comparison is right across the wrap.
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t seq = first + k;
    if (seq - oldest_ >= in_flight()) {
      return InternalError("ibverbs credit for slot sequence " + std::to_string(seq) +
                           ", which is not in flight (in flight: " + std::to_string(oldest_) + " to " +
                           std::to_string(next_ - 1) + ")");
    }
    if (returned_[seq % slots_]) {
      return InternalError("ibverbs credit for slot sequence " + std::to_string(seq) + " returned twice");
    }
  }
  for (uint32_t k = 0; k < count; ++k) returned_[(first + k) % slots_] = true;
  while (oldest_ != next_ && returned_[oldest_ % slots_]) {
    returned_[oldest_ % slots_] = false;
    ++oldest_;
  }
  return Status::Ok();
}

uint32_t CreditWindow::ExpandSequence(uint16_t low) const {
  return oldest_ + static_cast<uint16_t>(low - static_cast<uint16_t>(oldest_));
}

}  // namespace ibverbs
}  // namespace tessera
