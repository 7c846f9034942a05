#ifndef TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_ALLREDUCE_H_
#define TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_ALLREDUCE_H_

#include "collectives/collective.h"
#include "collectives/cost_model.h"

namespace tessera {

// Recursive-doubling allreduce for small buffers; see recursive_doubling_allreduce.cc.
Status RecursiveDoublingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);
double PredictRecursiveDoublingAllReduce(const CostModel& m, const Shape& s, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RECURSIVE_DOUBLING_ALLREDUCE_H_
