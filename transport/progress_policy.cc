#include "transport/progress_policy.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace tessera {

// The fourth field of /proc/loadavg, "running/total": its running count is the tasks
// runnable now, this one included. Read only after a late yield, which took 200 us or
// more: the read itself costs tens of microseconds.
int RunnableTasks() {
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* p = text;
  for (int field = 0; field < 3; ++field) {
    while (*p != '\0' && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  return end != p && *end == '/' && running >= 0 && running < (1 << 30) ? static_cast<int>(running) : -1;
}

void ProgressPolicy::YieldTook(int64_t took_us, int64_t now_us, int (*runnable)()) {
  bool beside_other_work = false;
  if (took_us > kLateYieldUs) {
    const int tasks = s_.kernel_ranks > 0 ? runnable() : -1;
    beside_other_work = tasks < 0 || tasks > s_.kernel_ranks;
  }
  const int sample = beside_other_work ? 256 : 0;
  late_share_ += (sample - late_share_) / 8;
  if (late_share_ > kStopYieldingShare) {
    no_yield_until_us_ = now_us + kNoYieldUs;
    late_share_ = 0;
  }
}

}  // namespace tessera
