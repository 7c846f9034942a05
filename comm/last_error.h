// Report: the one place where a Status becomes a tesseraResult_t. A failure is kept as
// the last error of its communicator and of the calling thread (tesseraGetLastError:
// per communicator and per thread, no global error buffer) and logged, with the C
// function's name and the rank.
#ifndef TESSERA_COMM_LAST_ERROR_H_
#define TESSERA_COMM_LAST_ERROR_H_

#include <string>

#include "base/status.h"
#include "comm/handle.h"
#include "tessera/tessera.h"

namespace tessera {

inline tesseraResult_t ToResult(Code c) { return static_cast<tesseraResult_t>(static_cast<int>(c)); }

// The result code of `s` from C function `function`: OK and InProgress as they are; a
// failure is kept as comm's last error (comm may be null: a call without a live
// communicator) and this thread's, and logged at WARN (or at comm's TESSERA_DEBUG
// level) as "function (rank r of n): message [code]". Inline: every call reports, and
// success is a compare.
tesseraResult_t ReportFailure(tesseraComm* comm, const char* function, const Status& s);
inline tesseraResult_t Report(tesseraComm* comm, const char* function, const Status& s) {
  return s.ok() ? tesseraSuccess : ReportFailure(comm, function, s);
}

// tesseraGetLastError: the last error of `comm` (a live handle, or null), else this
// thread's; valid until this thread calls it again.
const char* LastError(tesseraComm* comm);

// This thread's last error, to carry it to another thread (tesseraCommInitAll).
const std::string& ThreadLastError();
void SetThreadLastError(const std::string& text);

}  // namespace tessera

#endif  // TESSERA_COMM_LAST_ERROR_H_
