#include "base/log.h"

#include <unistd.h>

namespace tessera {

LogLevel ParseLogLevel(const std::string& name) {
  if (name == "NONE") return LogLevel::kNone;
  if (name == "INFO") return LogLevel::kInfo;
  return LogLevel::kWarn;
}

void Log(LogLevel threshold, LogLevel level, const std::string& line) {
  if (level == LogLevel::kNone || static_cast<int>(level) > static_cast<int>(threshold)) return;
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  std::string text = "tessera " + std::string(host) + ":" + std::to_string(getpid()) +
                     (level == LogLevel::kWarn ? " WARN " : " INFO ") + line + "\n";
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace tessera
