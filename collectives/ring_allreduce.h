#ifndef TESSERA_COLLECTIVES_RING_ALLREDUCE_H_
#define TESSERA_COLLECTIVES_RING_ALLREDUCE_H_

#include <vector>

#include "collectives/collective.h"
#include "collectives/cost_model.h"

namespace tessera {

// Ring allreduce (reduce-scatter, then allgather); see ring_allreduce.cc.
Status RingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);
double PredictRingAllReduce(const CostModel& m, const Shape& s, size_t bytes);

// A ring over some of the communicator's ranks, for algorithms built from rings (2D
// torus, hierarchical): `ranks` in ring order, `pos` this rank's place in it.
struct RingGroup {
  std::vector<int> ranks;
  int pos = 0;
};
RingGroup WholeRing(const CollectiveContext& ctx);

enum RingPhase { kRingReduceScatter = 1, kRingAllGather = 2 };

// The ring's phases on `count` elements of `es` bytes. After the reduce-scatter phase,
// position i holds block RingOwnedBlock(i, n) (ring_pattern.h) of the reduction in
// recv, read from send (the other blocks of recv hold partial sums). The allgather
// phase spreads every position's owned block of recv to all. Both: an allreduce.
Status RunRing(const CollectiveContext& ctx, const RingGroup& group, const char* send, char* recv, size_t count,
               size_t es, const Reducer* reducer, int phases);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_RING_ALLREDUCE_H_
