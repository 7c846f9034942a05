// What lies above the hosts of a communicator (docs/topology.md#the-fabric): the NICs of
// a host and which local ranks use which (rails), and the switches over the hosts: the
// racks (leaf switches, with the hosts under each) and how much of their hosts'
// bandwidth their uplinks carry. The cost model prices shared links with it
// (collectives/cost_model.h); nothing else depends on it.
//
// Where it comes from, first that says something:
//   - the layout file of TESSERA_TOPO_FILE, its `fabric` lines:
//       fabric nics 2                  # NICs per host; local rank i uses NIC i*nics/R
//       fabric uplink_percent 33       # a rack's uplinks, in % of its hosts' links
//       fabric rack r0 host0 host1     # a leaf switch and the hosts under it
//   - Slurm's topology.conf (TESSERA_TOPOLOGY_CONF, else under Slurm the one beside
//     slurm.conf): every switch with Nodes= is a rack of those nodes;
//   - inferred: the NICs from sysfs (the host's RDMA devices that are PCI functions,
//     else one); racks and uplinks cannot be seen from a host.
// TESSERA_NICS and TESSERA_RACK_UPLINK_PERCENT fill what the description leaves out.
#ifndef TESSERA_TOPOLOGY_FABRIC_H_
#define TESSERA_TOPOLOGY_FABRIC_H_

#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "topology/layout.h"

namespace tessera {

// The fabric as the cost model sees it: a flow across hosts uses one NIC of its host
// (local rank i's: NIC i * nics / R) and flows on one NIC share it; racks are runs of
// hosts_per_rack consecutive hosts (in the layout's host order), whose uplinks carry
// uplink_share of the sum of their hosts' links (1: full bisection).
struct FabricShape {
  int nics = 1;
  int hosts_per_rack = 0;  // 0: every host under one switch (no racks)
  double uplink_share = 1;
};

struct Rack {
  std::string name;
  std::vector<std::string> hosts;  // host names (a layout's host ids, or hostnames)
};

struct Fabric {
  int nics = 0;               // per host; 0: not said
  std::vector<Rack> racks;    // empty: not said
  int uplink_percent = 0;     // a rack's uplinks in % of its hosts' links; 0: not said
  std::vector<std::string> sources;  // what said each part ("layout file F: nics, racks", ...)

  bool described() const { return nics > 0 || !racks.empty() || uplink_percent > 0; }
  // What the cost model sees on `layout` (hosts named as its host ids, or their
  // hostnames: HostnameOf). Racks: the mean number of the layout's hosts per rack that
  // holds any; a host of the layout in no rack counts as a rack of its own.
  FabricShape ShapeFor(const Layout& layout) const;
  // Lines for topo_dump and the log: the NICs, each rack with its hosts, the uplinks,
  // and where each came from.
  std::string Describe() const;
};

// Pure: the `fabric` lines of layout file text (other lines are the layout's,
// ParseLayoutFile). InvalidArgument names the source and the line.
Status ParseFabricLines(const std::string& text, const std::string& source, Fabric* out);

// Pure: Slurm's topology.conf (SwitchName=S [Switches=...] [Nodes=HOSTLIST] [LinkSpeed=..]
// lines; '#' comments; keys case-insensitive): each switch with Nodes= is a rack.
// InvalidArgument names the source and the line.
Status ParseSlurmTopology(const std::string& text, const std::string& source, Fabric* out);

// Pure: a Slurm hostlist, "node[01-04,07],login1" -> node01 .. node04, node07, login1
// (zero padding kept). InvalidArgument for a malformed list or one over 1,000,000 names.
Status ExpandHostlist(const std::string& list, std::vector<std::string>* out);

// Where the fabric is read from (the settings of docs/settings.md, passed as they are).
struct FabricSources {
  std::string topo_file;       // TESSERA_TOPO_FILE
  std::string topology_conf;   // TESSERA_TOPOLOGY_CONF ("none": never read one)
  int nics = 0;                // TESSERA_NICS
  int uplink_percent = 0;      // TESSERA_RACK_UPLINK_PERCENT
  bool infer = true;           // count the NICs in sysfs where nothing says them
};

// The sources a rank's settings name (the four rows above, out-of-range counts clamped).
FabricSources FabricSourcesOf(const Settings& settings);

// The fabric a rank reads: the layout file's fabric lines, else topology.conf (the
// setting's path; else, where SLURM_JOB_ID is set, topology.conf in the directory of
// $SLURM_CONF or /etc/slurm, when it exists), else inferred; then the settings fill
// what is left. A file that is named and cannot be read or parsed is an error.
Status ReadFabric(const FabricSources& sources, Fabric* out);

}  // namespace tessera

#endif  // TESSERA_TOPOLOGY_FABRIC_H_
