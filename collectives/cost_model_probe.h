// The cost model measured in the job, at communicator creation (TESSERA_PROBE), and
// agreed by every rank, so that every rank's predictions, and so every choice of
// algorithm, are the same.
//
// It lives beside the cost model because it needs nothing of the communicator: it runs
// the table's own schedules (ring allreduces, recursive doubling, hierarchical_leader)
// over a CollectiveContext and times them, as the algorithms it parameterises run, and
// fills the CostModel and Shape that their predictions read.
#ifndef TESSERA_COLLECTIVES_COST_MODEL_PROBE_H_
#define TESSERA_COLLECTIVES_COST_MODEL_PROBE_H_

#include "base/status.h"
#include "collectives/collective.h"
#include "collectives/cost_model.h"

namespace tessera {

struct ProbeOptions {
  // TESSERA_PROBE: 0 measures nothing; 1 the links across hosts and inside them, and a
  // host whose ranks outnumber its cores; 2 also the inside of any single host.
  int level = 1;
  // TESSERA_TUNING_FILE is set: nothing is measured, and the parameters read from it are
  // agreed (every rank takes each one's median).
  bool tuning_file = false;
  double ranks_per_core = 1;  // this rank's kernel's ranks over its cores
  int host_cores = 1;         // the host's online cores
  // This rank read a fabric description (topology/fabric.h: a layout file's fabric
  // lines, a topology.conf, the settings, NICs seen by hwloc): racks or uplinks that
  // differ between ranks where any rank read one fail creation.
  bool fabric_described = false;
};

// Measures alpha and beta of the host grid's rows (inside a host) and columns (across
// hosts, in blocks of at most kProbeHosts hosts), gamma, and where ranks outnumber cores
// the step floor and the leaders' alpha; then takes the median of every parameter over
// all ranks, round the ring of all ranks of `ctx` (collective: every rank calls it with
// the same options). All rows (or all columns) are measured at once, so the figures
// include what the real schedules meet: links shared by a host's ranks, and processes
// waiting for a core. Updates *model, and shape->ranks_per_core where columns were
// measured; *agreed says whether anything was measured or read (else every rank holds
// what it had: the built-in defaults; across hosts something is always agreed). The
// shape's fabric (NICs, hosts per rack, uplink share) is agreed with the rest, each the
// median over the ranks; where any rank read a description and the ranks' racks or
// uplinks differ, InvalidArgument names two ranks and what each has.
Status ProbeCostModel(const CollectiveContext& ctx, const ProbeOptions& options, CostModel* model, Shape* shape,
                      bool* agreed);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COST_MODEL_PROBE_H_
