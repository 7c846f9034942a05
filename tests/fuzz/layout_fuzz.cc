// Layout files (TESSERA_TOPO_FILE, written by users and tools) and layout specs: any
// text parses or gives an InvalidArgument naming the problem. A layout that parses
// answers every query, formats, and reads back equal.
#include <cstdlib>

#include "tests/fuzz/fuzz_input.h"
#include "topology/layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  const bool as_spec = in.Take<uint8_t>() & 1;
  const std::string text = in.Rest();
  Layout layout;
  const Status s = as_spec ? LayoutFromSpec(text, &layout) : ParseLayoutFile(text, "fuzz.layout", &layout);
  if (!s.ok()) {
    if (s.code() != Code::kInvalidArgument) std::abort();
    return 0;
  }
  // A spec may place up to kMaxLayoutRanks ranks: the checks below are for small layouts
  // (a million-rank round trip per input would leave no time for fuzzing).
  if (layout.nranks() > 4096) return 0;
  for (int rank = -1; rank <= layout.nranks(); ++rank) {
    layout.HostId(layout.HostOf(rank));
    layout.LocalRank(rank);
    layout.LocalSize(rank);
  }
  layout.Describe();
  std::string formatted;
  if (FormatLayoutFile(layout, &formatted).ok()) {
    Layout again;
    if (!ParseLayoutFile(formatted, "formatted", &again).ok() || again != layout) std::abort();
  }
  return 0;
}
