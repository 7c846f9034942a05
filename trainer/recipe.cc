// Batch-size schedule, learning-rate schedule and loss scaling (see recipe.h).
#include "trainer/recipe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace trainer {
namespace {

bool ParseInt64(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0') return false;
  *value = parsed;
  return true;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) parts.push_back(part);
  return parts;
}

}  // namespace

tessera::Status BatchSchedule::Parse(const std::string& text, BatchSchedule* schedule) {
  const std::string usage = "batch schedule '" + text + "': expected a batch size or 'epoch:batch,...' from epoch 0";
  schedule->entries_.clear();
  int64_t single = 0;
  if (ParseInt64(text, &single)) {
    if (single <= 0) return tessera::InvalidArgument(usage + " (batch sizes are positive)");
    schedule->entries_.emplace_back(0, single);
    return tessera::Status::Ok();
  }
  for (const std::string& part : SplitCommas(text)) {
    size_t colon = part.find(':');
    int64_t epoch = 0, batch = 0;
    if (colon == std::string::npos || !ParseInt64(part.substr(0, colon), &epoch) ||
        !ParseInt64(part.substr(colon + 1), &batch)) {
      return tessera::InvalidArgument(usage + " ('" + part + "' is not epoch:batch)");
    }
    if (batch <= 0) return tessera::InvalidArgument(usage + " (batch sizes are positive)");
    if (schedule->entries_.empty() ? epoch != 0 : epoch <= schedule->entries_.back().first) {
      return tessera::InvalidArgument(usage + " (epochs must start at 0 and increase)");
    }
    schedule->entries_.emplace_back(static_cast<int>(epoch), batch);
  }
  if (schedule->entries_.empty()) return tessera::InvalidArgument(usage);
  return tessera::Status::Ok();
}

int64_t BatchSchedule::GlobalBatch(int epoch) const {
  int64_t batch = entries_.empty() ? 0 : entries_.front().second;
  for (const auto& entry : entries_) {
    if (entry.first <= epoch) batch = entry.second;
  }
  return batch;
}

tessera::Status BatchSchedule::CheckDivisible(int world) const {
  for (const auto& entry : entries_) {
    if (entry.second % world != 0) {
      return tessera::InvalidArgument("global batch " + std::to_string(entry.second) + " (from epoch " +
                                      std::to_string(entry.first) + ") is not a multiple of the " +
                                      std::to_string(world) + " ranks");
    }
  }
  return tessera::Status::Ok();
}

std::string BatchSchedule::ToString() const {
  std::string text;
  for (const auto& entry : entries_) {
    if (!text.empty()) text += ",";
    text += std::to_string(entry.first) + ":" + std::to_string(entry.second);
  }
  return text;
}

double LrSchedule::At(double t, int64_t global_batch) const {
  const double target = base_lr * static_cast<double>(global_batch) / static_cast<double>(reference_batch);
  if (t < warmup_epochs) {
    // Never warm "down": a batch below the reference one starts at its own target.
    double start = std::min(warmup_start_lr < 0 ? base_lr : warmup_start_lr, target);
    return start + (target - start) * (t / warmup_epochs);
  }
  switch (decay) {
    case LrDecay::kStep: {
      double rate = target;
      for (double milestone : milestones) {
        if (t >= milestone) rate *= step_factor;
      }
      return rate;
    }
    case LrDecay::kCosine:
    case LrDecay::kPoly: {
      double span = total_epochs - warmup_epochs;
      double progress = span > 0 ? std::min(std::max((t - warmup_epochs) / span, 0.0), 1.0) : 1.0;
      if (decay == LrDecay::kCosine) return target * 0.5 * (1.0 + std::cos(M_PI * progress));
      return target * std::pow(1.0 - progress, poly_power);
    }
  }
  return target;
}

tessera::Status ParseLrDecay(const std::string& text, LrDecay* decay) {
  if (text == "step") {
    *decay = LrDecay::kStep;
  } else if (text == "cosine") {
    *decay = LrDecay::kCosine;
  } else if (text == "poly") {
    *decay = LrDecay::kPoly;
  } else {
    return tessera::InvalidArgument("learning-rate decay '" + text + "': expected step, cosine or poly");
  }
  return tessera::Status::Ok();
}

const char* LrDecayName(LrDecay decay) {
  switch (decay) {
    case LrDecay::kStep: return "step";
    case LrDecay::kCosine: return "cosine";
    case LrDecay::kPoly: return "poly";
  }
  return "?";
}

tessera::Status ParseMilestones(const std::string& text, std::vector<double>* milestones) {
  milestones->clear();
  for (const std::string& part : SplitCommas(text)) {
    char* end = nullptr;
    double value = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || value < 0 ||
        (!milestones->empty() && value <= milestones->back())) {
      return tessera::InvalidArgument("milestones '" + text + "': expected increasing epochs like 30,60,80");
    }
    milestones->push_back(value);
  }
  return tessera::Status::Ok();
}

bool DynamicLossScale::Update(bool found_nonfinite) {
  if (found_nonfinite) {
    scale_ *= 0.5;
    clean_steps_ = 0;
    return false;
  }
  if (++clean_steps_ >= growth_interval_) {
    scale_ *= 2.0;
    clean_steps_ = 0;
  }
  return true;
}

}  // namespace trainer
