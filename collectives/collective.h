// What every collective algorithm receives: who this rank is, how to reach its peers,
// and the bounds of its waits. Algorithms are schedules of Exchanges over Links; they
// never see which transport carries them.
#ifndef TESSERA_COLLECTIVES_COLLECTIVE_H_
#define TESSERA_COLLECTIVES_COLLECTIVE_H_

#include <cstddef>

#include "base/types.h"
#include "transport/exchange.h"
#include "transport/link_table.h"

namespace tessera {

struct Grid;

struct CollectiveContext {
  int rank = 0;
  int nranks = 1;
  LinkTable* links = nullptr;
  ExchangeOptions exchange;          // deadline of this call, spinning, abort flag
  const Grid* host_grid = nullptr;   // rows = hosts; null when hosts differ in rank count
  const Grid* torus_grid = nullptr;  // TESSERA_TORUS, else host_grid
};

// The buffers of one collective. `count` is in elements, with the meaning nccl.h gives
// it for that collective (per rank's block for AllGather, ReduceScatter, AlltoAll,
// Gather and Scatter). `reducer` is set for reducing collectives (its elem_size is the
// element size for all).
struct CollectiveArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  size_t elem_size = 1;
  Reducer reducer;
  int root = 0;
};

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COLLECTIVE_H_
