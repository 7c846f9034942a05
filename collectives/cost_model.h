// The cost model that picks every collective's algorithm (algorithms.h): alpha
// (latency, s), beta (s/byte) per link class (inside a host, across hosts) and gamma
// (reduction, s/byte), applied to each algorithm's schedule on the communicator's shape
// (p ranks on H hosts of R). Each algorithm's formula sits in its own file, built from
// the blocks below; docs/algorithms.md derives them.
#ifndef TESSERA_COLLECTIVES_COST_MODEL_H_
#define TESSERA_COLLECTIVES_COST_MODEL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "topology/fabric.h"

namespace tessera {

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
  // The least a step over the link takes, however little it carries (seconds; 0: no
  // floor). Where ranks outnumber cores a step waits for its peer to get a core, and
  // the probe measures that wait in whole calls (docs/algorithms.md#the-step-floor).
  double floor = 0;
};

// A choice measured on one layout (TESSERA_ALGO_TABLE, as bench/algorithm_sweep -o
// writes it): on `hosts` hosts of `per_host` ranks each, calls of `collective` from
// `from_bytes` (PredictedBytes) up to the next row's run `algorithm`. The model's
// formulas stay within about 20% of what schedules take; where two are closer than
// that, only measuring tells them apart.
struct MeasuredChoice {
  std::string collective;  // OpName: "allreduce", ...
  int hosts = 0;
  int per_host = 0;
  size_t from_bytes = 0;
  std::string algorithm;
  int line = 0;  // in the file, for messages
};

struct CostModel {
  LinkCost intra{2e-6, 1.0 / 4e9};    // shared memory
  LinkCost inter{50e-6, 1.0 / 1e9};   // network
  double gamma = 1.0 / 8e9;           // reduction
  // alpha of a leaders' step (LeadersLink) as whole hierarchical_leader calls measured
  // it where ranks outnumber cores (seconds; 0: not measured, scaled from inter's).
  double leaders_alpha = 0;
  std::vector<MeasuredChoice> measured;  // consulted before the formulas (algorithms.h)

  // Reads "key = value" lines (alpha_intra_us, beta_intra_gbps, alpha_inter_us,
  // beta_inter_gbps, gamma_gbps, step_floor_intra_us, step_floor_inter_us); '#' starts
  // a comment.
  // InvalidArgument names the line.
  static Status FromTuningFile(const std::string& path, CostModel* out);
  // The same for the file's text; `path` only names it in errors. Any text gives OK or
  // an InvalidArgument (the values stay positive).
  static Status FromTuningText(const std::string& text, const std::string& path, CostModel* out);
  std::string ToString() const;

  // Reads measured choices, one per line: "COLLECTIVE HxR FROM_BYTES ALGORITHM" (e.g.
  // "allreduce 2x2 8192 hierarchical_leader"); '#' starts a comment. Any text gives OK
  // or an InvalidArgument naming the line; names are checked against the algorithm
  // table by CheckMeasuredChoices (algorithms.h).
  static Status ChoicesFromText(const std::string& text, const std::string& path, std::vector<MeasuredChoice>* out);
  static Status ChoicesFromFile(const std::string& path, std::vector<MeasuredChoice>* out);
  // The rows as ChoicesFromText reads them, a line each.
  static std::string ChoicesToText(const std::vector<MeasuredChoice>& rows);
  // Writes `rows` to the file at `path` after a comment line `header`, with the rows
  // already there for other collectives, layouts and sizes (a row of the same three is
  // replaced; a file that does not parse is replaced whole), sorted. The file is
  // replaced at once (written beside it, then renamed): a reader sees the old rows or
  // the new. SystemError names the path when it cannot be written.
  static Status SaveChoices(const std::string& path, const std::string& header, std::vector<MeasuredChoice> rows);
};

// The shape the model needs.
struct Shape {
  int p = 1;      // ranks
  int hosts = 1;  // H
  int per_host = 0;  // R when every host has R ranks, else 0
  // The torus grid (0: none): TESSERA_TORUS's when torus_forced, else the host grid,
  // and then the model chooses among the widths of TorusWidths (grid.h) per call.
  int torus_x = 0, torus_y = 0;
  bool torus_forced = false;
  // Bytes a host board's round carries when every rank posts on one (all on one host,
  // shared memory: transport/host_board.h); 0: no board.
  size_t board_bytes = 0;
  // Where the probe measured alpha across hosts (with every rank running): the ranks
  // that share each core then, the ranks on a kernel over its cores (the median over
  // ranks). 0: alpha across did not come from the probe.
  double ranks_per_core = 0;
  // What lies above the hosts (topology/fabric.h): the model's beta across hosts is a
  // host's whole link, all its NICs (what the probe's parallel column rings measure);
  // AcrossHosts prices a flow's share of one NIC and of its rack's uplinks.
  FabricShape fabric;
};

// --- Building blocks of the algorithms' formulas ------------------------------------
// Each algorithm's file predicts its own schedule from these, and its row in the table
// (algorithms.h) points to that prediction; docs/algorithms.md derives them.

// The link across hosts for a step in which each host sends `flows` flows (from that
// many of its local ranks, spread over its NICs as local ranks are) and a fraction `out`
// of them leave the host's rack: the model's link with beta that of one flow's share of
// the busier of its NIC and its rack's uplinks,
//   max(beta x nics x ceil(flows / nics), beta x flows x out / uplink_share),
// per byte of each flow. With one NIC and no racks it is beta x flows: the host link
// shared by the flows.
LinkCost AcrossHosts(const CostModel& m, const Shape& s, int flows, double out);
// Of the hosts, the fraction whose partner h + k (a ring over hosts, k apart) or
// h ^ k (k a power of two: a recursive round) lies in another rack: min(1, k / K) for a
// shift, on racks of K hosts; for a round 0 where 2k divides K (every pair inside a
// rack), 1 from k >= K, else k / K.
double ShiftOut(const Shape& s, int k);
double XorOut(const Shape& s, int k);

// The link that limits a schedule over all ranks in rank order (a ring, a chain):
// across hosts when there are several, where each host sends one flow, through one NIC.
LinkCost SlowestLink(const CostModel& m, const Shape& s);

// The link across hosts for a step where one rank per host runs and the host's others
// wait for it (the leaders' steps of the two-level schedules). The probe measures alpha
// across with every rank running; where ranks outnumber cores (ranks_per_core > 1) a
// step with one in R of them running waits that much less for a core: alpha and the
// step floor scaled by max(1, ranks_per_core / R) / ranks_per_core. Where the probe
// measured the leaders' alpha (m.leaders_alpha) that replaces the scaled one: where
// ranks do not stay on their cores, such a step pays the whole alpha or none of it, as
// the job's ranks happen to be placed, which only the measured calls tell
// (docs/algorithms.md#leaders-alpha).
LinkCost LeadersLink(const CostModel& m, const Shape& s);
// LeadersLink with the scaled alpha, whether or not the probe measured the leaders'.
LinkCost ScaledLeadersLink(const CostModel& m, const Shape& s);

// One step over `l` carrying `bytes` (shares of a link already counted in): alpha +
// bytes x beta, and at least the link's floor.
double StepSeconds(const LinkCost& l, double bytes);

// floor(log2 v), and 0 for v < 1.
int Log2Floor(int v);

// A ring of q ranks over n bytes: 2(q-1) steps for an allreduce, else q-1, each moving
// n/q through link `l` shared by `share` flows, and (q-1)/q of n reduced.
double RingSeconds(int q, double n, const LinkCost& l, double share, double gamma, bool allreduce);

// Of the `rounds` rounds (distance 2^k in round k) of a recursive schedule, how many
// cross hosts: the last lg H when every host has R ranks (block placement), all of them
// on uneven hosts, none on one host.
int CrossHostRounds(const Shape& s, int rounds);

// The links of an X x (p/X) grid schedule (torus allreduce, grid allgather and
// reduce-scatter), per byte of one flow: rows stay inside hosts when X divides the
// ranks per host, else a row of X = kR ranks spans k hosts, one flow out of each; columns
// cross hosts when there are several, min(X, R) flows out of each host, to the host
// X / R further on (AcrossHosts).
struct GridLinks {
  LinkCost row;
  LinkCost col;
};
GridLinks GridLinksOf(const CostModel& m, const Shape& s, int X);

// An X x Y grid schedule (grid allgather and reduce-scatter) over `bytes`, p blocks of
// bytes / p: its column ring alone (Y - 1 steps of one block), its row ring alone
// (X - 1 steps of Y blocks), and X - 1 row steps of one block.
struct GridPhaseSeconds {
  double block;  // bytes
  double col;
  double row;
  double row_of_one_block;
};
GridPhaseSeconds GridPhases(const CostModel& m, const Shape& s, int X, int Y, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_COST_MODEL_H_
