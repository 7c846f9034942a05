// A tessera failure as an MPI program expects one: an error code passed to the
// communicator's error handler, whose string is tessera's message.
//
// Each tessera result but success has an MPI error code of its own, in one error class
// added to MPI on the first failure (MPI_Add_error_class). Before the handler runs, the
// code's string is set to this failure's message (MPI_Add_error_string replaces it), so
// MPI_ERRORS_ARE_FATAL prints it, and a program under MPI_ERRORS_RETURN reads it with
// MPI_Error_string. The message names the culprit where tessera's diagnosis found one,
// the MPI call, the communicator and the rank, then carries tessera's own, cut at
// MPI_MAX_ERROR_STRING (tessera's log has it whole).
#ifndef TESSERA_MPI_ERRORS_H_
#define TESSERA_MPI_ERRORS_H_

#include <mpi.h>
#include <tessera/tessera.h>

#include "mpi/mirror.h"
#include "mpi/settings.h"

namespace tessera_mpi {

// The MPI error code of `result` (not tesseraSuccess) of `collective` on `mirror`'s
// communicator, its string set to this failure's message.
int TesseraErrorCode(Collective collective, const Mirror& mirror, tesseraResult_t result);

// Reports `result` (not tesseraSuccess) of `collective` on `mirror`'s communicator through
// its error handler and returns the MPI error code, for the entry point to return.
int RaiseTesseraError(Collective collective, const Mirror& mirror, tesseraResult_t result);

// Reports an MPI error code (from PMPI_Pack, ...) the same way: through the
// communicator's error handler; returns it.
int RaiseMpiError(const Mirror& mirror, int code);

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_ERRORS_H_
