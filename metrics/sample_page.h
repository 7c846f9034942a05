// Health snapshots of two communicators, one naming a straggler and one broken, with a
// host name that needs escaping: the pages' tests print and check them.
#ifndef TESSERA_METRICS_SAMPLE_PAGE_H_
#define TESSERA_METRICS_SAMPLE_PAGE_H_

#include <vector>

#include "diagnosis/health.h"

namespace tessera {

std::vector<HealthSnapshot> SamplePage();

}  // namespace tessera

#endif  // TESSERA_METRICS_SAMPLE_PAGE_H_
