// A platform file: the machine the simulator replays schedules on (docs/scale.md).
// `key = value` lines, '#' starts a comment; rates in GB/s (1e9 bytes per second),
// times in microseconds:
//
//   name = abci                  # for the output
//   node.max_ranks = 4           # ranks (GPUs) a node holds; 0: any
//   intra.GBps = 50              # between two ranks of a node, each direction, per pair
//   intra.latency_us = 1
//   intra.transport = cuda_ipc   # what carries them: its pipelining unit (the setting's
//   inter.transport = ibverbs    #   default in base/settings.h) is a message's chunk
//   intra.chunk_bytes = ...      # or this, to override it (the same for inter.)
//   intra.wake_bytes = ...       # what of a message wakes its receiver (default: a chunk;
//                                #   a 1448-byte segment for tcp)
//   intra.overhead_us = 5        # the receiver's software time per message, from then
//   inter.overhead_us = 5
//   nic.count = 2                # NICs per node; local rank i uses NIC i * count / ranks
//   nic.GBps = 12.5              # each, each direction
//   nic.latency_us = 1
//   pcie.GBps = 13               # a rank's own link to its NIC (0: none)
//   fabric.nodes_per_leaf = 34   # a fat tree: nodes under one leaf switch, and
//   fabric.spines = 2            #   spine switches above the leaves (0: one switch);
//   fabric.links_per_spine = 6   #   parallel links from each leaf to each spine
//   fabric.link_GBps = 25
//   fabric.latency_us = 0.2      # per link
//   reduce.GBps = 300            # a rank's reduction: bytes of output per second
//   copy.GBps = 400              # a rank's local copies
//   cpu.shared_cores = 0         # >0: all ranks compute on one CPU of this many cores
//                                #   (the emulated cluster: one machine)
//
// Every key has a default (kPlatformDefaults in platform.cc); a key the parser does
// not know is an error naming the line.
#ifndef TESSERA_SIMULATOR_PLATFORM_H_
#define TESSERA_SIMULATOR_PLATFORM_H_

#include <cstddef>
#include <string>

#include "base/status.h"
#include "collectives/cost_model.h"

namespace tessera {

// Messages between two ranks of a node, or of different nodes.
struct MessageClass {
  std::string transport;
  size_t chunk_bytes = 0;  // the pipelining unit: what a receive makes final at once
  // How much of a message wakes its receiver: a TCP stream's first segment; a slot or
  // chunk for the others (the receiver sees it when the first one lands).
  size_t wake_bytes = 0;
  // The receiver's software time per message (waking, system calls, a kernel launch),
  // counted from when its first wake_bytes arrived: the message's data is final no
  // sooner, and no sooner than it has all arrived.
  double overhead_s = 0;
};

struct Platform {
  std::string name = "platform";
  int max_ranks_per_node = 0;
  double intra_Bps = 0, intra_latency_s = 0;
  int nics = 1;
  double nic_Bps = 0, nic_latency_s = 0, pcie_Bps = 0;
  int nodes_per_leaf = 0, spines = 0, links_per_spine = 1;
  double fabric_Bps = 0, fabric_latency_s = 0;
  double reduce_Bps = 0, copy_Bps = 0;
  int shared_cores = 0;
  MessageClass intra, inter;

  // The cost model tessera would settle on here (what its probe measures): alpha of a
  // message inside a node and across nodes, beta of the node's whole link (the probe
  // divides what its parallel column rings measured by their number), gamma of the
  // reduction. docs/scale.md compares its choice with the simulated best.
  CostModel Model() const;
  // What a fabric description of this machine says (topology/fabric.h): its NICs, its
  // leaves as racks, and their uplinks (spines x links_per_spine links) over the sum of
  // their nodes' links (each node's NICs, at most its one link to its leaf).
  FabricShape Fabric() const;
  std::string Describe() const;
};

// Parses platform file text; `source` names it in errors. InvalidArgument names the line.
Status ParsePlatform(const std::string& text, const std::string& source, Platform* out);
Status ReadPlatformFile(const std::string& path, Platform* out);

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_PLATFORM_H_
