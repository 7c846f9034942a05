// Logging to stderr by level (TESSERA_DEBUG). Lines start with "tessera <host>:<pid>"
// so interleaved output of many ranks can be told apart.
#ifndef TESSERA_BASE_LOG_H_
#define TESSERA_BASE_LOG_H_

#include <string>

namespace tessera {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2 };

LogLevel ParseLogLevel(const std::string& name);  // "NONE", "WARN", "INFO"

// Writes one line if `level` <= `threshold`. Thread-safe (a single write(2)).
void Log(LogLevel threshold, LogLevel level, const std::string& line);

}  // namespace tessera

#endif  // TESSERA_BASE_LOG_H_
