// Every collective's algorithms, registered in one table of one shape, and the choice
// among them. A row names an algorithm, says whether it applies to the communicator's
// shape, points to its cost formula (in the algorithm's own file, built from
// cost_model.h) and to its schedule. Selection, TESSERA_ALGO, tesseraAllReduceAlgorithm
// and the tests all read these rows: "auto" asks the cost model for the fastest row
// that applies; TESSERA_ALGO forces one by name.
#ifndef TESSERA_COLLECTIVES_ALGORITHMS_H_
#define TESSERA_COLLECTIVES_ALGORITHMS_H_

#include <string>
#include <vector>

#include "base/types.h"
#include "collectives/collective.h"
#include "collectives/cost_model.h"

namespace tessera {

// The size that predictions of `c` take: the whole buffer of p blocks for allgather (its
// result), reduce-scatter (its input), alltoall, gather and scatter, whose `count` is
// one block; count * elem_size for the others.
size_t PredictedBytes(OpKind c, int nranks, size_t count, size_t elem_size);

// Which of the context's grids a schedule runs on; logs show that grid's X x Y.
enum class GridUse { kNone, kHost, kTorus };

struct AlgorithmInfo {
  OpKind collective;
  // Unique within the collective: TESSERA_ALGO forces the row by it, and
  // tesseraAllReduceAlgorithm answers it.
  const char* name;
  const char* description;
  // Whether the schedule exists on the shape, and why not when it does not (for the log
  // of a choice: "<label>: <not_applicable>").
  bool (*applies)(const Shape& s);
  const char* not_applicable;
  // Predicted seconds for PredictedBytes of a call, where the row applies.
  double (*predict)(const CostModel& m, const Shape& s, size_t bytes);
  // Runs the schedule; ctx and args as collective.h says.
  Status (*run)(const CollectiveContext& ctx, const CollectiveArgs& args);
  // Whether the schedule streams chunks from step to step (the ring-based ones), rather
  // than finishing each round before the next starts (recursive doubling, Rabenseifner).
  bool pipelined;
  GridUse grid = GridUse::kNone;
  // Whether "auto" considers the row; false: only TESSERA_ALGO chooses it.
  bool automatic = true;
  // What logs, traces and error breadcrumbs call the schedule when not its name: "grid"
  // for the grid rows of allgather and reduce-scatter (forced by "hierarchical" for the
  // host grid, "torus" for the torus grid).
  const char* label = nullptr;

  const char* Label() const { return label != nullptr ? label : name; }
};

// When a pipelined schedule's prediction is within this fraction of the best one, it is
// chosen instead: the model adds step times as if nothing overlapped, which favours
// round-based schedules by more than this where steps are long enough to overlap.
constexpr double kPipelinedPreference = 0.05;
// ... where the buffer's blocks (bytes / p, a ring step) hold at least this many bytes:
// below it a pipelined schedule's steps are short, what each step costs beyond its
// bytes outweighs what overlaps, and the model prices those costs low, so the
// preference would pick a pipelined schedule that runs slower than the best predicted.
constexpr size_t kPipelinedFromBlockBytes = 32 << 10;

// The rows of one collective, in the order selection walks them (first wins a tie).
const std::vector<AlgorithmInfo>& AlgorithmsOf(OpKind c);
// The row of `c` named `name`, or null.
const AlgorithmInfo* FindAlgorithm(OpKind c, const std::string& name);
// The row's prediction, or a negative value when it does not apply to the shape (or
// there is no such row).
double PredictSeconds(OpKind c, const std::string& name, const CostModel& m, const Shape& s, size_t bytes);

// TESSERA_ALGO: "auto" or the name of an allreduce algorithm; InvalidArgument listing
// the names otherwise. The other collectives' rows answer to some of those names
// ("ring", "hierarchical", "torus"); a name that one collective lacks lets the model
// choose for it.
Status CheckAlgorithmName(const std::string& name);

// Every measured choice (CostModel::measured) names a collective and one of its
// algorithms; InvalidArgument naming the file's line otherwise.
Status CheckMeasuredChoices(const std::vector<MeasuredChoice>& rows, const std::string& path);

struct Selection {
  const AlgorithmInfo* algo = nullptr;
  double predicted_s = -1;  // the model's prediction for the chosen algorithm
};

// The algorithm of `c` for `bytes` (PredictedBytes). A `forced` name (TESSERA_ALGO) is
// chosen where its row applies. Otherwise, and for "auto", the model's measured choice
// for this layout and size where it has one that applies (TESSERA_ALGO_TABLE), else
// the automatic row with the smallest prediction, or from blocks of
// kPipelinedFromBlockBytes a pipelined one within kPipelinedPreference of it. Every call
// returns a row: each collective has one that applies to every shape.
// Text is built only when `why` is not null: then it says "forced by TESSERA_ALGO", or
// lists every candidate's prediction (and, for a forced name that does not apply here,
// says so first).
Selection SelectAlgorithm(OpKind c, const std::string& forced, const CostModel& m, const Shape& s, size_t bytes,
                          std::string* why = nullptr);

// How far above the best prediction an automatic row may be predicted and still be
// measured in the job (TESSERA_AUTOTUNE): the formulas stay within about 20% of what
// schedules take where ranks fit their cores, and can be off by up to 2x where ranks
// outnumber them.
constexpr double kContenderSpread = 3.0;

// The automatic rows of `c` that apply to the shape and are predicted within
// kContenderSpread of the fastest for `bytes`, in table order.
std::vector<const AlgorithmInfo*> Contenders(OpKind c, const CostModel& m, const Shape& s, size_t bytes);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_ALGORITHMS_H_
