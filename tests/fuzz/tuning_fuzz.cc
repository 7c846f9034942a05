// Tuning files (TESSERA_TUNING_FILE): any text gives OK with positive, finite-or-not
// parameters, or an InvalidArgument naming the line; the model still describes itself.
// The same text read as measured choices (TESSERA_ALGO_TABLE): OK with rows on
// positive layouts, or an InvalidArgument.
#include <cstdlib>

#include "collectives/cost_model.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  CostModel model;
  const Status s = CostModel::FromTuningText(FuzzInput(data, size).Rest(), "fuzz.tuning", &model);
  if (!s.ok() && s.code() != Code::kInvalidArgument) std::abort();
  if (!(model.intra.alpha > 0 && model.inter.alpha > 0 && model.gamma >= 0)) std::abort();
  model.ToString();
  std::vector<MeasuredChoice> rows;
  const Status c = CostModel::ChoicesFromText(FuzzInput(data, size).Rest(), "fuzz.choices", &rows);
  if (!c.ok() && c.code() != Code::kInvalidArgument) std::abort();
  for (const MeasuredChoice& row : rows) {
    if (row.hosts < 1 || row.per_host < 1 || row.collective.empty() || row.algorithm.empty()) std::abort();
  }
  return 0;
}
