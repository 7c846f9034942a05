// tesseraCommGetHealth's answer: a rank's health snapshot (diagnosis/health.h) in the
// public struct, tesseraHealth_t.
#ifndef TESSERA_COMM_HEALTH_REPORT_H_
#define TESSERA_COMM_HEALTH_REPORT_H_

#include "base/status.h"
#include "diagnosis/health.h"
#include "tessera/tessera.h"

namespace tessera {

// InvalidArgument when `health` is NULL or smaller than this version's struct, or
// npeers < 0.
Status CheckHealthArguments(const tesseraHealth_t* health, int npeers);
// Fills this version's fields of *out (its size stays the caller's) and the first
// min(npeers, nranks) entries of peer_stalled_s (when not NULL).
void FillHealth(const HealthSnapshot& h, tesseraHealth_t* out, double* peer_stalled_s, int npeers);

}  // namespace tessera

#endif  // TESSERA_COMM_HEALTH_REPORT_H_
