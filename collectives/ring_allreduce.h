#ifndef TESSERA_COLLECTIVES_RING_ALLREDUCE_H_
#define TESSERA_COLLECTIVES_RING_ALLREDUCE_H_

#include "collectives/collective.h"

namespace tessera {

// Ring allreduce (reduce-scatter, then allgather); see ring_allreduce.cc.
Status RingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RING_ALLREDUCE_H_
