#include "base/status.h"

#include <cctype>
#include <cstring>

namespace tessera {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "success";
    case Code::kCudaError: return "unhandled cuda error";
    case Code::kSystemError: return "system error";
    case Code::kInternalError: return "internal error";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kInvalidUsage: return "invalid usage";
    case Code::kRemoteError: return "remote process exited or there was a network error";
    case Code::kInProgress: return "operation in progress";
    case Code::kTimeout: return "timeout";
  }
  return "unknown result code";
}

const std::string& Status::message() const {
  static const std::string* const empty = new std::string();
  return message_ ? *message_ : *empty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message();
}

Status FailureFromWire(int64_t code, const char* text, size_t max_bytes) {
  const bool failure = code >= static_cast<int64_t>(Code::kCudaError) && code <= static_cast<int64_t>(Code::kTimeout);
  return Status(failure ? static_cast<Code>(code) : Code::kRemoteError, std::string(text, strnlen(text, max_bytes)));
}

Status PeerFailure(int rank, const Status& reported) {
  return Status(reported.code(), "rank " + std::to_string(rank) + " failed: " + reported.message());
}

Status RootCause(const Status& failure) {
  const std::string& m = failure.message();
  size_t root = std::string::npos;
  for (size_t at = m.find("rank "); at != std::string::npos; at = m.find("rank ", at + 1)) {
    size_t end = at + 5;
    while (end < m.size() && std::isdigit(static_cast<unsigned char>(m[end]))) ++end;
    if (end > at + 5 && m.compare(end, 9, " failed: ") == 0) root = at;
  }
  return root == std::string::npos ? failure : Status(failure.code(), m.substr(root));
}

Status ErrnoError(const std::string& what, int errno_value) {
  char buf[256];
  // GNU strerror_r returns the message pointer (which may not be buf).
  const char* text = strerror_r(errno_value, buf, sizeof(buf));
  return SystemError(what + ": " + text);
}

}  // namespace tessera
