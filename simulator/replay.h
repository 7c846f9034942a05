// The SimGrid replay of recorded schedules (schedule.h) on a platform (platform.h):
// one S4U actor per rank, on a host of its own inside its node.
//
// The platform, in SimGrid terms (simgrid_platform.cc): each node is a zone holding
// its ranks' hosts, a link per pair of them (NVLink, shared memory), each rank's link
// to its NIC (PCIe) and the node's NICs; the nodes are the leaves of a fat tree (one
// switch, or leaf switches under spines). Links are full duplex and shared max-min
// fairly (SimGrid's CM02 model, without its TCP corrections).
//
// What an actor does with its schedule (replay.cc), following the Exchange engine:
//   - steps one after the other; a copy computes copy_bytes at copy.GBps;
//   - in an exchange, the messages of each (peer, direction) in order, all of those
//     queues at once. A message moves in chunks of its class's chunk_bytes (see
//     ReplayOptions::max_chunks), one chunk
//     in flight per queue; a send starts after its class's overhead, and its chunk k
//     waits until its gate receive has made final min(bytes, (k+1) chunk) bytes. A
//     received chunk is final at once for a copy; for a reduction, after the rank has
//     reduced it at reduce.GBps (the rank's compute is shared by its reductions, and by
//     all ranks when cpu.shared_cores is set).
// All ranks start at time 0; a call's time is when its last rank finishes.
#ifndef TESSERA_SIMULATOR_REPLAY_H_
#define TESSERA_SIMULATOR_REPLAY_H_

#include <functional>
#include <vector>

#include "base/status.h"
#include "collectives/algorithms.h"
#include "simulator/platform.h"
#include "simulator/schedule.h"
#include "topology/layout.h"

namespace tessera {

struct ReplayResult {
  double seconds = 0;            // the last rank's finish
  std::vector<double> finish_s;  // by rank
  // What it cost to get there, in the simulation's process.
  double record_wall_s = 0;      // producing the schedules
  double replay_wall_s = 0;      // building the platform and running the simulation
  uint64_t messages = 0;         // in all schedules
  uint64_t schedule_bytes = 0;   // what the schedules held
  uint64_t max_rss_bytes = 0;    // the process's peak resident memory
  uint64_t simgrid_hosts = 0;
};

// Produces the schedules of the call, inside the simulation's process (so that their
// memory goes with it).
using ScheduleSource = std::function<Status(std::vector<RankSchedule>* out)>;

struct ReplayOptions {
  // Stop after producing the schedules (what recording alone costs; seconds stays 0).
  bool record_only = false;
  // At most this many chunks per message (0: no bound): for schedules that do not
  // stream (algorithms.h: not `pipelined`), whose sends are never gated, chunks only
  // overlap a receive's reduction with its arrival, and a few keep that overlap while
  // sparing SimGrid millions of activities at tens of thousands of ranks.
  uint32_t max_chunks = 0;
};

// The options a simulation of `algorithm` runs with: schedules that do not stream
// (algorithms.h: not `pipelined`) move each message in at most 4 chunks.
ReplayOptions ReplayOptionsFor(const AlgorithmInfo& algorithm);

// Runs one simulation of the call in a child process (SimGrid's engine can run once
// per process) and returns its result. InvalidArgument when the layout does not fit
// the platform (too many ranks on a node) or the schedules do not fit the layout.
Status Replay(const Platform& platform, const Layout& layout, const ScheduleSource& schedules, ReplayResult* out,
              const ReplayOptions& options = ReplayOptions());

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_REPLAY_H_
