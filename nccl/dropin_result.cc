// Result mapping and the drop-in's own error messages. See dropin_result.h.
#include "nccl/dropin_result.h"

namespace tessera_nccl {
namespace {

// Which failure happened last on this thread, so that LastError() answers with it.
enum class LatestFailure { kNone, kTessera, kTesseraTimeout, kDropin };

thread_local LatestFailure t_latest = LatestFailure::kNone;
thread_local std::string t_dropin_message;  // the drop-in's last own failure
thread_local std::string t_answer;          // what LastError() handed out last

std::string TesseraMessage(ncclComm_t comm) {
  const char* message = tesseraGetLastError(ToTessera(comm));
  return message != nullptr ? message : "";
}

}  // namespace

ncclResult_t FromTessera(tesseraResult_t result) {
  switch (result) {
    case tesseraSuccess:
    case tesseraInProgress:
      return static_cast<ncclResult_t>(result);
    case tesseraTimeout:
      t_latest = LatestFailure::kTesseraTimeout;
      return ncclRemoteError;
    default:
      t_latest = LatestFailure::kTessera;
      // Every other code has the same number in both enums (static_asserts in nccl_api.cc);
      // anything else would be a tessera bug, not a code a caller can act on.
      if (result < tesseraSuccess || result >= tesseraNumResults) return ncclInternalError;
      return static_cast<ncclResult_t>(result);
  }
}

ncclResult_t Fail(ncclResult_t code, const char* function, const std::string& why) {
  t_latest = LatestFailure::kDropin;
  t_dropin_message = std::string(function) + ": " + why;
  return code;
}

ncclResult_t NotSupported(const char* function, const std::string& why) {
  return Fail(ncclInvalidUsage, function,
              "not supported by tessera's drop-in libnccl.so.2 on this CPU build (" + why + ")");
}

const char* LastError(ncclComm_t comm) {
  switch (t_latest) {
    case LatestFailure::kDropin:
      t_answer = t_dropin_message;
      break;
    case LatestFailure::kTesseraTimeout:
      t_answer = std::string("timeout (tesseraTimeout, returned as ncclRemoteError): ") + TesseraMessage(comm);
      break;
    case LatestFailure::kTessera:
    case LatestFailure::kNone:
      // Also when nothing failed on this thread: comm may carry a failure of its own.
      t_answer = TesseraMessage(comm);
      break;
  }
  return t_answer.c_str();
}

}  // namespace tessera_nccl
