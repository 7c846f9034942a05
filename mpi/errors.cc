#include "mpi/errors.h"

#include <mutex>
#include <string>

namespace tessera_mpi {
namespace {

std::mutex g_mutex;  // guards the codes and their strings
bool g_added = false;
int g_codes[tesseraNumResults];

// The MPI error code of a tessera result, and its message set as the code's string.
// MPI_ERR_OTHER where MPI could not add codes.
int CodeWithMessage(tesseraResult_t result, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_added) {
    int error_class = 0;
    if (PMPI_Add_error_class(&error_class) != MPI_SUCCESS) return MPI_ERR_OTHER;
    for (int& code : g_codes) {
      if (PMPI_Add_error_code(error_class, &code) != MPI_SUCCESS) return MPI_ERR_OTHER;
    }
    g_added = true;
  }
  const int index = result > tesseraSuccess && result < tesseraNumResults ? result : tesseraInternalError;
  const int code = g_codes[index];
  PMPI_Add_error_string(code, message.substr(0, MPI_MAX_ERROR_STRING - 1).c_str());
  return code;
}

}  // namespace

int TesseraErrorCode(Collective collective, const Mirror& mirror, tesseraResult_t result) {
  // MPI cuts error strings at MPI_MAX_ERROR_STRING (256 in Open MPI): the culprit that
  // tessera's diagnosis names goes first, before the long explanation.
  const std::string detail = tesseraGetLastError(mirror.comm);
  const size_t tag = detail.find("[culprit: ");
  const std::string culprit = tag == std::string::npos ? "" : " " + detail.substr(tag, detail.find(']', tag) - tag + 1);
  const std::string message = std::string("tessera ") + tesseraGetErrorString(result) + culprit + " in " +
                              MpiName(collective) + " on " + mirror.name + " (rank " + std::to_string(mirror.rank) +
                              " of " + std::to_string(mirror.nranks) + "): " + detail;
  return CodeWithMessage(result, message);
}

int RaiseTesseraError(Collective collective, const Mirror& mirror, tesseraResult_t result) {
  const int code = TesseraErrorCode(collective, mirror, result);
  PMPI_Comm_call_errhandler(mirror.mpi_comm, code);
  return code;
}

int RaiseMpiError(const Mirror& mirror, int code) {
  PMPI_Comm_call_errhandler(mirror.mpi_comm, code);
  return code;
}

}  // namespace tessera_mpi
