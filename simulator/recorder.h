// Schedules from the real code: runs one collective algorithm of the table
// (collectives/algorithms.h) as rank r of a layout would, against the recording stand-in
// of the transport seam (recording_transport.h), and returns that rank's schedule.
// The algorithm is the one the library runs, unchanged and unaware: it gets a
// CollectiveContext whose LinkTable holds the recording transport, whose LocalMemory is
// the recorder, and whose grids are the communicator's for the layout
// (MakeLayoutGrids). Its buffers are reserved address space that no one may touch, so
// a schedule that depended on the data would fault rather than be recorded.
//
// Cost, measured (docs/scale.md): the recorded schedule takes 16 bytes per message; a
// ring allreduce of p ranks has 4(p-1) messages per rank.
#ifndef TESSERA_SIMULATOR_RECORDER_H_
#define TESSERA_SIMULATOR_RECORDER_H_

#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/grid.h"
#include "simulator/recording_transport.h"
#include "simulator/schedule.h"
#include "topology/layout.h"

namespace tessera {

// One call of a collective.
struct CallSpec {
  OpKind collective = OpKind::kAllReduce;
  std::string algorithm = "ring";  // a row of the collective's table (algorithms.h)
  size_t count = 0;                // elements, as nccl.h counts them for the collective
  size_t elem_size = 4;            // bytes per element as they travel
  int root = 0;
};

class CallRecorder {
 public:
  // The layout's grids as a communicator builds them; `torus` as TESSERA_TORUS ("XxY",
  // empty: the model chooses), `fabric` what lies above the hosts, `model` the cost model
  // the ranks agreed on (the torus allreduce chooses its grid by it). InvalidArgument
  // for a torus grid that does not fit.
  static Status Create(const Layout& layout, const std::string& torus, const FabricShape& fabric,
                       const CostModel& model, std::unique_ptr<CallRecorder>* out);

  const Shape& shape() const { return grids_.shape; }
  const CostModel& model() const { return model_; }
  const LayoutGrids& grids() const { return grids_; }

  // The row `spec` names; InvalidArgument when there is none or it does not apply to
  // the layout (naming why, as the table says).
  Status Row(const CallSpec& spec, const AlgorithmInfo** out) const;

  // Rank `rank`'s schedule for the call. keep_addresses: also each message's buffer
  // address (RankSchedule::addresses), for tests of the data flow.
  Status RecordRank(const CallSpec& spec, int rank, RankSchedule* out, bool keep_addresses = false);
  // Every rank's, checked to fit together (CheckSchedulesMatch).
  Status RecordAll(const CallSpec& spec, std::vector<RankSchedule>* out);

  // The reserved buffers of a call: send and receive as the executor would pass them
  // (out of place); exposed for tests that relate addresses to the buffers.
  struct Buffers {
    char* send = nullptr;
    char* recv = nullptr;
  };
  const Buffers& buffers() const { return buffers_; }

 private:
  CallRecorder() = default;
  Status PrepareBuffers(const CallSpec& spec);

  LayoutGrids grids_;
  CostModel model_;
  ReservedArena arena_;
  Buffers buffers_;
};

}  // namespace tessera

#endif  // TESSERA_SIMULATOR_RECORDER_H_
