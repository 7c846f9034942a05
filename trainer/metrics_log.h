// What the trainer reports: CSV files of metrics per step and per epoch, a PNG plot of
// loss and accuracy (gnuplot), and a progress display with images/s and ETA.
// Written by rank 0 only; every value in them is already global (reduced over ranks).
//
//   <out>/steps.csv    one row per step: loss, rate, timing split of the step, ranks,
//                      and the sum and sum of squares of the image numbers the ranks
//                      read (so a test can tell that an epoch read every image once)
//   <out>/epochs.csv   one row per epoch: mean train loss, val loss, top-1, top-5, ...
//   <out>/events.csv   what --elastic did and when: a failure seen, the shrink, the first
//                      step on the survivors (time: seconds since 1970, so it can be set
//                      against the moment a rank was killed)
//   <out>/metrics.png  train loss per step and val top-1/top-5 per epoch
#ifndef TESSERA_TRAINER_METRICS_LOG_H_
#define TESSERA_TRAINER_METRICS_LOG_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/status.h"
#include "trainer/train_settings.h"

namespace trainer {

struct StepMetrics {
  int64_t global_step = 0;     // 1-based count of steps taken in the run
  int epoch = 0;
  int64_t step = 0;            // 1-based step within the epoch
  int64_t steps_in_epoch = 0;
  int64_t global_batch = 0;    // scheduled global batch
  int64_t images = 0;          // images actually used by all ranks (corrupt ones left out)
  double lr = 0;
  double loss = 0;             // mean over the step's images
  double loss_scale = 1;
  bool applied = true;         // false: skipped by the loss scaler (overflow)
  // Seconds, measured on rank 0.
  double step_s = 0;           // whole step
  double data_s = 0;           // waiting for the input pipeline
  double compute_s = 0;        // forward + backward (communication overlaps it)
  double exposed_comm_s = 0;   // after backward, waiting for the last allreduce
  double comm_busy_s = 0;      // communication thread busy with allreduces
  double update_s = 0;         // optimizer step
  int64_t skipped_total = 0;   // corrupt or unreadable files so far, all ranks
  int world = 1;               // ranks that took the step
  double image_id_sum = 0;     // of the images read (positions in the train list), all ranks
  double image_id_sq_sum = 0;
};

struct EpochMetrics {
  int epoch = 0;
  double train_loss = 0;       // mean over the epoch's steps
  double val_loss = -1;        // -1: not validated this epoch
  double top1 = -1;            // fraction in [0, 1]
  double top5 = -1;
  int64_t val_images = 0;
  double images_per_s = 0;     // training throughput of the epoch
  double seconds = 0;
  int64_t skipped_total = 0;
};

class MetricsLog {
 public:
  // Opens the CSV files in `dir` (created if missing; files already open are closed
  // first). keep_through_step < 0 starts them afresh; otherwise (resuming, or going on
  // after lost ranks) rows of later steps and of epochs >= keep_epoch are dropped, so
  // that the files read as if the run had never stopped; events.csv is kept whole.
  tessera::Status Open(const std::string& dir, int64_t keep_through_step, int keep_epoch);
  ~MetricsLog();

  void AddStep(const StepMetrics& metrics);
  // The global step of steps.csv's last row (-1: none).
  int64_t last_step() const { return last_step_; }
  void AddEpoch(const EpochMetrics& metrics);
  // One row of events.csv at wall-clock `time` (seconds since 1970). `detail` is free
  // text (commas become semicolons).
  void AddEvent(double time, const std::string& event, int64_t global_step, int epoch, int world,
                const std::string& detail);

  // Renders <dir>/metrics.png with gnuplot (an error if gnuplot is missing or fails).
  tessera::Status Plot() const;

 private:
  std::string dir_;
  void Close();

  FILE* steps_ = nullptr;
  int64_t last_step_ = -1;
  FILE* epochs_ = nullptr;
  FILE* events_ = nullptr;
};

// The progress line of rank 0: a bar redrawn in place on a terminal, or plain lines.
class ProgressDisplay {
 public:
  ProgressDisplay(ProgressStyle style, int epochs, FILE* out);

  // remaining_steps: steps left in the whole run after this one.
  void Step(const StepMetrics& metrics, int64_t remaining_steps);
  void EndEpoch(const EpochMetrics& metrics);
  // True while a bar is drawn in place (other output must start on a new line).
  bool redraws_in_place() const { return bar_ && !off_; }

 private:
  bool bar_;
  bool off_;
  int epochs_;
  FILE* out_;
  double mean_step_s_ = 0;   // running mean over the epoch, for the ETA
  int64_t mean_count_ = 0;
  double last_line_s_ = -1;  // lines mode: time of the last printed line
  double clock_s_ = 0;
};

// "1:02:03" or "4:05".
std::string FormatDuration(double seconds);

}  // namespace trainer

#endif  // TESSERA_TRAINER_METRICS_LOG_H_
