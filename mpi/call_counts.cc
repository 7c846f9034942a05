#include "mpi/call_counts.h"

#include <atomic>
#include <cstdio>
#include <string>

namespace tessera_mpi {
namespace {

std::atomic<long> g_counts[kCollectives][kRoutes];

}  // namespace

void CountCall(Collective collective, Route route) {
  if (!CurrentSettings().stats) return;
  g_counts[static_cast<int>(collective)][static_cast<int>(route)].fetch_add(1, std::memory_order_relaxed);
}

void PrintCallCounts(int rank) {
  if (!CurrentSettings().stats) return;
  for (int c = 0; c < kCollectives; ++c) {
    long total = 0;
    std::string routes;
    for (int r = 0; r < kRoutes; ++r) {
      const long n = g_counts[c][r].load(std::memory_order_relaxed);
      total += n;
      if (n == 0 && r != static_cast<int>(Route::kRouted)) continue;
      routes += (routes.empty() ? "" : ", ") + std::string(RouteName(static_cast<Route>(r))) + " " + std::to_string(n);
    }
    if (total == 0) continue;
    std::fprintf(stderr, "tessera_mpi: rank %d: %s %ld (%s)\n", rank, MpiName(static_cast<Collective>(c)), total,
                 routes.c_str());
  }
}

}  // namespace tessera_mpi
