// Status: the one error type of tessera's core. A value type (LevelDB-style): OK, or a
// code plus a message that says what failed, on which rank, with which peer. No
// exceptions cross the core; the C API is the single place that maps Status to
// tesseraResult_t (comm/c_api.cc).
#ifndef TESSERA_BASE_STATUS_H_
#define TESSERA_BASE_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace tessera {

// Numbering is tesseraResult_t's (and so ncclResult_t's), so mapping is a cast.
enum class Code : int {
  kOk = 0,
  kCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
};

// Two words: an OK status (every call's usual result, copied up through each layer)
// holds no string, so copying or destroying one costs no string construction; a
// message is shared, immutable, between copies.
class Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message)
      : code_(code), message_(message.empty() ? nullptr : std::make_shared<const std::string>(std::move(message))) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const;

  // Returns this status with `context` prepended ("context: message"), so an error
  // gathers a breadcrumb at each layer it passes (operation, rank, step...).
  Status Annotate(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message());
  }

  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::shared_ptr<const std::string> message_;
};

// Constructors that read like what they report.
inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status InvalidUsage(std::string m) { return Status(Code::kInvalidUsage, std::move(m)); }
inline Status SystemError(std::string m) { return Status(Code::kSystemError, std::move(m)); }
inline Status RemoteError(std::string m) { return Status(Code::kRemoteError, std::move(m)); }
inline Status TimeoutError(std::string m) { return Status(Code::kTimeout, std::move(m)); }
inline Status InternalError(std::string m) { return Status(Code::kInternalError, std::move(m)); }

// A SystemError for a failed OS call: "<what>: <strerror(errno_value)>".
Status ErrnoError(const std::string& what, int errno_value);

const char* CodeName(Code code);

// A failure that another process reported as (code, text) over a wire or in shared
// memory: always an error, whatever the bytes. A code that is not a failure code
// (0, negative, past kTimeout) becomes kRemoteError; the text ends at its first NUL.
Status FailureFromWire(int64_t code, const char* text, size_t max_bytes);

// Another rank's failure as this rank reports it: "rank <rank> failed: <reason>".
Status PeerFailure(int rank, const Status& reported);

// What this rank tells its peers of its failure. A failure that relays another rank's
// (a PeerFailure within its message) gives the innermost one, the root cause, which
// this rank's own context would otherwise push past what a notice carries.
Status RootCause(const Status& failure);

}  // namespace tessera

// Returns early from the enclosing function (which must return Status) when `expr` is
// not OK. The returned status is unchanged; annotate at layer boundaries instead.
#define TESSERA_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::tessera::Status _tessera_status = (expr);  \
    if (!_tessera_status.ok()) return _tessera_status; \
  } while (0)

#endif  // TESSERA_BASE_STATUS_H_
