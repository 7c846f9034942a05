#include "comm/choice_tuner.h"

#include <algorithm>
#include <cstdio>

#include "collectives/reduce_kernels.h"

namespace tessera {

ChoiceTuner::Pick ChoiceTuner::Next(Collective c, size_t bytes, const CostModel& m, const Shape& s) {
  for (size_t i = 0; i < sizes_.size(); ++i) {
    Size& size = sizes_[i];
    if (size.collective != c || size.bytes != bytes) continue;
    if (size.winner != nullptr) return Pick{size.winner, -1};
    return Pick{size.contenders[size.seconds.size() % size.contenders.size()], static_cast<int>(i)};
  }
  if (sizes_.size() >= kMaxSizes) return Pick{};
  Size size{c, bytes, Contenders(c, m, s, bytes), {}, nullptr};
  if (size.contenders.empty()) return Pick{};
  if (size.contenders.size() == 1) size.winner = size.contenders[0];  // nothing to measure
  sizes_.push_back(size);
  return Next(c, bytes, m, s);
}

const AlgorithmInfo* ChoiceTuner::Winner(Collective c, size_t bytes) const {
  for (const Size& size : sizes_) {
    if (size.collective == c && size.bytes == bytes) return size.winner;
  }
  return nullptr;
}

Status ChoiceTuner::Record(const Pick& pick, double seconds, const CollectiveContext& ctx, std::string* decided) {
  if (pick.size < 0) return Status::Ok();
  Size& size = sizes_[static_cast<size_t>(pick.size)];
  size.seconds.push_back(seconds);
  if (size.seconds.size() < size.contenders.size() * kRounds) return Status::Ok();
  return Decide(&size, ctx, decided).Annotate("agreeing on the algorithm measured for " +
                                              std::string(CollectiveName(size.collective)) + " of " +
                                              std::to_string(size.bytes) + " B (TESSERA_AUTOTUNE)");
}

// Every call's time is the slowest rank's (a max-allreduce of the table by recursive
// doubling, which runs on every shape); each contender's figure is the median of its
// calls. Every rank holds the same table, so every rank picks the same contender (the
// first in table order on a tie).
Status ChoiceTuner::Decide(Size* size, const CollectiveContext& ctx, std::string* decided) {
  CollectiveArgs args;
  args.send = size->seconds.data();
  args.recv = size->seconds.data();
  args.count = size->seconds.size();
  args.elem_size = sizeof(double);
  TESSERA_RETURN_IF_ERROR(GetReducer(DataType::kFloat64, RedOp::kMax, &args.reducer));
  if (ctx.nranks > 1) {
    TESSERA_RETURN_IF_ERROR(FindAlgorithm(Collective::kAllReduce, "recursive_doubling")->run(ctx, args));
  }
  const size_t n = size->contenders.size();
  std::string text;
  double best = -1;
  for (size_t a = 0; a < n; ++a) {
    std::vector<double> calls;
    for (size_t i = a; i < size->seconds.size(); i += n) calls.push_back(size->seconds[i]);
    std::nth_element(calls.begin(), calls.begin() + kRounds / 2, calls.end());
    const double median = calls[kRounds / 2];
    if (best < 0 || median < best) {
      best = median;
      size->winner = size->contenders[a];
    }
    char figure[32];
    std::snprintf(figure, sizeof(figure), " %.1f us", median * 1e6);
    text += std::string(a == 0 ? "" : ", ") + size->contenders[a]->Label() + figure;
  }
  if (decided != nullptr) *decided = std::string(size->winner->Label()) + " (medians of " + std::to_string(kRounds) +
                                     " calls, slowest rank: " + text + ")";
  size->seconds.clear();
  size->seconds.shrink_to_fit();
  return Status::Ok();
}

}  // namespace tessera
