// The platform of platform.h built in SimGrid's engine (replay.h says what it holds).
#ifndef TESSERA_SIMULATOR_SIMGRID_PLATFORM_H_
#define TESSERA_SIMULATOR_SIMGRID_PLATFORM_H_

#include <vector>

#include <simgrid/s4u/Host.hpp>

#include "base/status.h"
#include "simulator/platform.h"
#include "topology/layout.h"

namespace tessera {

struct SimGridPlatform {
  std::vector<simgrid::s4u::Host*> rank_hosts;  // rank r's host
  simgrid::s4u::Host* shared_cpu = nullptr;     // cpu.shared_cores > 0: where all ranks compute
};

// Builds the platform in the (created, not yet running) engine: one node per host of
// the layout, its ranks in layout order. InvalidArgument when a node would hold more
// ranks than node.max_ranks.
Status BuildSimGridPlatform(const Platform& p, const Layout& layout, SimGridPlatform* out);

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_SIMGRID_PLATFORM_H_
