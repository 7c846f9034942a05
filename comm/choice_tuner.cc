#include "comm/choice_tuner.h"

#include <algorithm>
#include <cstdio>

#include "elementwise/reduce_kernels.h"

namespace tessera {

ChoiceTuner::Pick ChoiceTuner::Next(OpKind c, size_t bytes, const CostModel& m, const Shape& s) {
  for (size_t i = 0; i < sizes_.size(); ++i) {
    Size& size = sizes_[i];
    if (size.collective != c || size.bytes != bytes) continue;
    if (size.winner != nullptr) return Pick{size.winner, -1};
    const size_t contender = static_cast<size_t>(size.calls / turn_calls_) % size.contenders.size();
    return Pick{size.contenders[contender], static_cast<int>(i), static_cast<int>(contender)};
  }
  if (sizes_.size() >= kMaxSizes) return Pick{};
  Size size{c, bytes, Contenders(c, m, s, bytes), 0, {}, {}, nullptr};
  if (size.contenders.empty()) return Pick{};
  if (size.contenders.size() == 1) size.winner = size.contenders[0];  // nothing to measure
  size.turns.assign(size.contenders.size() * kRounds, 0.0);
  size.policy.resize(size.contenders.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_.push_back(size);
  }
  if (size.winner != nullptr) return Pick{size.winner, -1};
  return Pick{size.contenders[0], static_cast<int>(sizes_.size() - 1), 0};
}

ProgressPolicy::State* ChoiceTuner::PolicyOf(const Pick& pick) {
  return &sizes_[static_cast<size_t>(pick.size)].policy[static_cast<size_t>(pick.contender)];
}

const AlgorithmInfo* ChoiceTuner::Winner(OpKind c, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Size& size : sizes_) {
    if (size.collective == c && size.bytes == bytes) return size.winner;
  }
  return nullptr;
}

Status ChoiceTuner::Record(const Pick& pick, double seconds, const CollectiveContext& ctx, std::string* decided) {
  if (pick.size < 0) return Status::Ok();
  Size& size = sizes_[static_cast<size_t>(pick.size)];
  if (size.calls % turn_calls_ >= uncounted()) size.turns[static_cast<size_t>(size.calls / turn_calls_)] += seconds;
  if (++size.calls < static_cast<int>(size.turns.size()) * turn_calls_) return Status::Ok();
  return Decide(&size, ctx, decided).Annotate("agreeing on the algorithm measured for " +
                                              std::string(OpName(size.collective)) + " of " +
                                              std::to_string(size.bytes) + " B (TESSERA_AUTOTUNE)");
}

std::vector<MeasuredChoice> ChoiceTuner::Decided(const Shape& s) const {
  std::vector<MeasuredChoice> rows;
  if (s.per_host <= 0) return rows;
  for (const Size& size : sizes_) {
    if (size.winner == nullptr) continue;
    MeasuredChoice row;
    row.collective = OpName(size.collective);
    row.hosts = s.hosts;
    row.per_host = s.per_host;
    row.from_bytes = size.bytes;
    row.algorithm = size.winner->name;
    rows.push_back(row);
  }
  return rows;
}

// Every turn's time is the slowest rank's (a max-allreduce of the table by recursive
// doubling, which runs on every shape); each contender's figure is the median of its
// turns, per counted call. Every rank holds the same table, so every rank picks the
// same contender (the first in table order on a tie).
Status ChoiceTuner::Decide(Size* size, const CollectiveContext& ctx, std::string* decided) {
  CollectiveArgs args;
  args.send = size->turns.data();
  args.recv = size->turns.data();
  args.count = size->turns.size();
  args.elem_size = sizeof(double);
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat64, RedOp::kMax, &args.reducer));
  if (ctx.nranks > 1) {
    TESSERA_RETURN_IF_ERROR(FindAlgorithm(OpKind::kAllReduce, "recursive_doubling")->run(ctx, args));
  }
  const size_t n = size->contenders.size();
  std::string text;
  double best = -1;
  const AlgorithmInfo* winner = nullptr;
  for (size_t a = 0; a < n; ++a) {
    std::vector<double> turns;
    for (size_t t = a; t < size->turns.size(); t += n) turns.push_back(size->turns[t] / (turn_calls_ - uncounted()));
    std::nth_element(turns.begin(), turns.begin() + kRounds / 2, turns.end());
    const double median = turns[kRounds / 2];
    if (best < 0 || median < best) {
      best = median;
      winner = size->contenders[a];
    }
    char figure[32];
    std::snprintf(figure, sizeof(figure), " %.1f us", median * 1e6);
    text += std::string(a == 0 ? "" : ", ") + size->contenders[a]->Label() + figure;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    size->winner = winner;
  }
  if (decided != nullptr) {
    *decided = std::string(winner->Label()) + " (per call, the median of " + std::to_string(kRounds) +
               " turns of " + std::to_string(turn_calls_ - uncounted()) + " calls at the slowest rank: " + text + ")";
  }
  size->turns.clear();
  size->turns.shrink_to_fit();
  size->policy.clear();
  size->policy.shrink_to_fit();
  return Status::Ok();
}

}  // namespace tessera
