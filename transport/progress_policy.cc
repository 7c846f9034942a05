#include "transport/progress_policy.h"

namespace tessera {

void ProgressPolicy::YieldTook(int64_t took_us, int64_t now_us) {
  const int sample = took_us > kLateYieldUs ? 256 : 0;
  late_share_ += (sample - late_share_) / 8;
  if (late_share_ > kStopYieldingShare) {
    no_yield_until_us_ = now_us + kNoYieldUs;
    late_share_ = 0;
  }
}

}  // namespace tessera
