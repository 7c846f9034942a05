// CSV metrics, the gnuplot plot and the progress display (see metrics_log.h).
#include "trainer/metrics_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace trainer {
namespace {

const char kStepHeader[] =
    "global_step,epoch,step,epoch_progress,global_batch,images,lr,loss,loss_scale,applied,step_s,data_s,"
    "compute_s,exposed_comm_s,comm_busy_s,update_s,images_per_s,skipped_total,world,image_id_sum,image_id_sq_sum";
const char kEpochHeader[] = "epoch,train_loss,val_loss,top1,top5,val_images,images_per_s,seconds,skipped_total";
const char kEventHeader[] = "time,global_step,epoch,event,world,detail";

// Rewrites `path` keeping the header and the rows whose first column is <= limit;
// a missing file or a different header starts empty. Returns the file open for append;
// *last is the largest first column kept (-1: none).
FILE* ReopenKeeping(const std::string& path, const char* header, double limit, double* last = nullptr) {
  std::vector<std::string> kept;
  std::ifstream in(path);
  std::string line;
  if (last != nullptr) *last = -1;
  if (in && std::getline(in, line) && line == header) {
    while (std::getline(in, line)) {
      const double first = std::strtod(line.c_str(), nullptr);
      if (line.empty() || first > limit) continue;
      kept.push_back(line);
      if (last != nullptr) *last = std::max(*last, first);
    }
  }
  in.close();
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return nullptr;
  std::fprintf(file, "%s\n", header);
  for (const std::string& row : kept) std::fprintf(file, "%s\n", row.c_str());
  std::fflush(file);
  return file;
}

double MonotonicSeconds() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec + now.tv_nsec * 1e-9;
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  long total = std::lround(seconds);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  }
  return text;
}

tessera::Status MetricsLog::Open(const std::string& dir, int64_t keep_through_step, int keep_epoch) {
  dir_ = dir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return tessera::SystemError("cannot create the output directory " + dir + ": " + error.message());
  Close();
  double last = -1;
  steps_ = ReopenKeeping(dir + "/steps.csv", kStepHeader, static_cast<double>(keep_through_step), &last);
  last_step_ = static_cast<int64_t>(last);
  epochs_ = ReopenKeeping(dir + "/epochs.csv", kEpochHeader, keep_epoch - 1);
  const std::string events = dir + "/events.csv";
  const bool fresh = keep_through_step < 0 || !std::filesystem::exists(events);
  events_ = std::fopen(events.c_str(), fresh ? "w" : "a");
  if (steps_ == nullptr || epochs_ == nullptr || events_ == nullptr) {
    return tessera::ErrnoError("cannot write the metrics CSV files in " + dir, errno);
  }
  if (fresh) std::fprintf(events_, "%s\n", kEventHeader);
  std::fflush(events_);
  return tessera::Status::Ok();
}

void MetricsLog::Close() {
  for (FILE** file : {&steps_, &epochs_, &events_}) {
    if (*file != nullptr) std::fclose(*file);
    *file = nullptr;
  }
}

MetricsLog::~MetricsLog() { Close(); }

void MetricsLog::AddStep(const StepMetrics& m) {
  if (steps_ == nullptr) return;
  double progress = m.epoch + static_cast<double>(m.step) / std::max<int64_t>(m.steps_in_epoch, 1);
  double rate = m.step_s > 0 ? m.images / m.step_s : 0;
  // %.9g keeps float32 losses exact, so that two runs can be compared bit for bit.
  std::fprintf(steps_, "%lld,%d,%lld,%.6f,%lld,%lld,%.9g,%.9g,%g,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.2f,%lld,%d,%.17g,%.17g\n",
               static_cast<long long>(m.global_step), m.epoch, static_cast<long long>(m.step), progress,
               static_cast<long long>(m.global_batch), static_cast<long long>(m.images), m.lr, m.loss,
               m.loss_scale, m.applied ? 1 : 0, m.step_s, m.data_s, m.compute_s, m.exposed_comm_s,
               m.comm_busy_s, m.update_s, rate, static_cast<long long>(m.skipped_total), m.world, m.image_id_sum,
               m.image_id_sq_sum);
  std::fflush(steps_);
  last_step_ = std::max<int64_t>(last_step_, m.global_step);
}

void MetricsLog::AddEvent(double time, const std::string& event, int64_t global_step, int epoch, int world,
                          const std::string& detail) {
  if (events_ == nullptr) return;
  std::string text = detail;
  std::replace(text.begin(), text.end(), ',', ';');
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::fprintf(events_, "%.3f,%lld,%d,%s,%d,%s\n", time, static_cast<long long>(global_step),
               epoch, event.c_str(), world, text.c_str());
  std::fflush(events_);
}

void MetricsLog::AddEpoch(const EpochMetrics& m) {
  if (epochs_ == nullptr) return;
  std::fprintf(epochs_, "%d,%.9g,%.9g,%.6f,%.6f,%lld,%.2f,%.3f,%lld\n", m.epoch, m.train_loss, m.val_loss, m.top1,
               m.top5, static_cast<long long>(m.val_images), m.images_per_s, m.seconds,
               static_cast<long long>(m.skipped_total));
  std::fflush(epochs_);
}

tessera::Status MetricsLog::Plot() const {
  FILE* gnuplot = popen("gnuplot 2>&1", "w");
  if (gnuplot == nullptr) return tessera::ErrnoError("cannot start gnuplot", errno);
  std::ostringstream script;
  script << "set terminal pngcairo size 1200,500 font ',10'\n"
         << "set output '" << dir_ << "/metrics.png'\n"
         << "set datafile separator ','\n"
         << "set datafile missing '-1'\n"
         << "set multiplot layout 1,2 title 'tessera ResNet trainer'\n"
         << "set grid\nset xlabel 'epoch'\nset xrange [0:*]\n"
         << "set title 'training loss (label-smoothed cross-entropy)'\nset ylabel 'loss'\n"
         << "plot '" << dir_ << "/steps.csv' using 4:8 skip 1 with lines lw 1 title 'per step', "
         << "'" << dir_ << "/epochs.csv' using ($1+1):2 skip 1 with linespoints lw 2 pt 7 title 'epoch mean'\n"
         << "set title 'validation accuracy'\nset ylabel 'accuracy (%)'\nset yrange [0:100]\nset key bottom right\n"
         << "plot '" << dir_ << "/epochs.csv' using ($1+1):($4 < 0 ? NaN : 100*$4) skip 1 with linespoints lw 2 pt 7 "
         << "title 'top-1', '' using ($1+1):($5 < 0 ? NaN : 100*$5) skip 1 with linespoints lw 2 pt 5 title 'top-5'\n"
         << "unset multiplot\n";
  std::string text = script.str();
  std::fwrite(text.data(), 1, text.size(), gnuplot);
  int status = pclose(gnuplot);
  if (status != 0) return tessera::SystemError("gnuplot failed (exit status " + std::to_string(status) + ")");
  return tessera::Status::Ok();
}

ProgressDisplay::ProgressDisplay(ProgressStyle style, int epochs, FILE* out)
    : bar_(style == ProgressStyle::kBar || (style == ProgressStyle::kAuto && isatty(fileno(out)))),
      off_(style == ProgressStyle::kOff),
      epochs_(epochs),
      out_(out),
      clock_s_(MonotonicSeconds()) {}

void ProgressDisplay::Step(const StepMetrics& m, int64_t remaining_steps) {
  // The first step of an epoch carries set-up costs: it does not enter the mean.
  if (m.step > 1 || m.steps_in_epoch == 1) {
    ++mean_count_;
    mean_step_s_ += (m.step_s - mean_step_s_) / mean_count_;
  }
  if (off_) return;
  double step_s = mean_count_ > 0 ? mean_step_s_ : m.step_s;
  double rate = step_s > 0 ? m.images / step_s : 0;
  double eta_epoch = step_s * static_cast<double>(m.steps_in_epoch - m.step);
  double eta_run = step_s * static_cast<double>(remaining_steps);
  char line[256];
  std::snprintf(line, sizeof line, "%lld/%lld loss %.4f lr %.4g %.1f img/s ETA %s (run %s)",
                static_cast<long long>(m.step), static_cast<long long>(m.steps_in_epoch), m.loss, m.lr, rate,
                FormatDuration(eta_epoch).c_str(), FormatDuration(eta_run).c_str());
  if (bar_) {
    const int width = 30;
    int filled = static_cast<int>(width * m.step / std::max<int64_t>(m.steps_in_epoch, 1));
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(out_, "\repoch %d/%d [%s] %s\033[K", m.epoch + 1, epochs_, bar.c_str(), line);
  } else {
    // Plain lines: the first and last step of an epoch and at most one line per 10 s.
    double now = MonotonicSeconds() - clock_s_;
    if (m.step == 1 || m.step == m.steps_in_epoch || now - last_line_s_ >= 10.0) {
      std::fprintf(out_, "epoch %d/%d step %s\n", m.epoch + 1, epochs_, line);
      last_line_s_ = now;
    }
  }
  std::fflush(out_);
}

void ProgressDisplay::EndEpoch(const EpochMetrics& m) {
  mean_step_s_ = 0;
  mean_count_ = 0;
  if (off_) return;
  if (bar_) std::fprintf(out_, "\n");
  std::fprintf(out_, "epoch %d/%d done in %s: train loss %.4f, %.1f img/s", m.epoch + 1, epochs_,
               FormatDuration(m.seconds).c_str(), m.train_loss, m.images_per_s);
  if (m.top1 >= 0) {
    std::fprintf(out_, ", val loss %.4f top-1 %.2f%% top-5 %.2f%% (%lld images)", m.val_loss, 100 * m.top1,
                 100 * m.top5, static_cast<long long>(m.val_images));
  }
  if (m.skipped_total > 0) std::fprintf(out_, ", %lld corrupt files skipped so far", static_cast<long long>(m.skipped_total));
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace trainer
