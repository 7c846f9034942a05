#include "comm/last_error.h"

#include "base/log.h"

namespace tessera {
namespace {

thread_local std::string t_last_error;
thread_local std::string t_returned_error;  // what tesseraGetLastError handed out

}  // namespace

tesseraResult_t ReportFailure(tesseraComm* comm, const char* function, const Status& s) {
  if (s.code() == Code::kInProgress) return tesseraInProgress;
  std::string text = std::string(function) + (comm != nullptr ? " (" + comm->Describe() + ")" : "") + ": " + s.message();
  LogLevel level = LogLevel::kWarn;
  if (comm != nullptr) {
    if (comm->impl()) level = comm->impl()->log_level();
    std::lock_guard<std::mutex> lock(comm->error_mu);
    comm->last_error = text;
  }
  t_last_error = text;
  Log(level, LogLevel::kWarn, text + " [" + CodeName(s.code()) + "]");
  return ToResult(s.code());
}

const char* LastError(tesseraComm* comm) {
  t_returned_error = t_last_error;
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->error_mu);
    if (!comm->last_error.empty()) t_returned_error = comm->last_error;
  }
  return t_returned_error.c_str();
}

const std::string& ThreadLastError() { return t_last_error; }

void SetThreadLastError(const std::string& text) { t_last_error = text; }

}  // namespace tessera
