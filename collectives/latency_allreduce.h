#ifndef TESSERA_COLLECTIVES_LATENCY_ALLREDUCE_H_
#define TESSERA_COLLECTIVES_LATENCY_ALLREDUCE_H_

#include "collectives/collective.h"
#include "collectives/cost_model.h"
#include "collectives/ring_allreduce.h"

namespace tessera {

// The allreduce algorithms for small buffers, whose time is their waits.
// Recursive doubling: lg p rounds of pairwise exchanges; recursive_doubling_allreduce.cc.
Status RecursiveDoublingAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);
// The same among the members of `group` (null: all ranks), who alone call it.
Status RecursiveDoublingOver(const CollectiveContext& ctx, const RingGroup* group, const CollectiveArgs& args);
double PredictRecursiveDoublingAllReduce(const CostModel& m, const Shape& s, size_t bytes);
// The host board, for ranks that all share one host: one wait for all; board_allreduce.cc.
// A round's alpha as a share of a message's: a round is a header line written and the
// others' read, where a message also goes through the exchange engine. On 2 ranks,
// where both wait once, the board is the faster for small buffers and recursive
// doubling from a few KiB: with this share the defaults cross over at 2.4 KiB.
constexpr double kBoardRoundAlpha = 0.85;
Status BoardAllReduce(const CollectiveContext& ctx, const CollectiveArgs& args);
double PredictBoardAllReduce(const CostModel& m, const Shape& s, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_LATENCY_ALLREDUCE_H_
