// The offer a shrink's survivors fetch from the lowest survivor's watch service: any
// bytes, for a communicator of 1 to 256 ranks. An offer that decodes lists increasing
// ranks below nranks, leaves a survivor, and encodes back to the same bytes.
#include <cstdlib>

#include "comm/shrink_offer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  const uint32_t generation = in.Take<uint8_t>();
  const int nranks = 1 + in.Take<uint8_t>();
  const std::string offer = in.Rest();
  bool current = false;
  UniqueIdData id;
  std::vector<int> exclude;
  if (!DecodeShrinkOffer(offer, generation, nranks, &current, &id, &exclude).ok() || !current) return 0;
  if (static_cast<int>(exclude.size()) >= nranks) std::abort();
  for (size_t i = 0; i < exclude.size(); ++i) {
    if (exclude[i] < 0 || exclude[i] >= nranks || (i > 0 && exclude[i] <= exclude[i - 1])) std::abort();
  }
  // The id's bytes need not round-trip (DecodeUniqueId accepts what it can use); the
  // head and the list must.
  const std::string again = EncodeShrinkOffer(generation, id, exclude);
  const size_t head = offer.find('\n') + 1;
  if (again.compare(0, head, offer, 0, head) != 0 || again.substr(head + kUniqueIdBytes) != offer.substr(head + kUniqueIdBytes)) {
    std::abort();
  }
  return 0;
}
