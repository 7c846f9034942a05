// The offer through which the survivors of a shrink agree (comm/shrink.cc): the lowest
// survivor publishes it on its watch service, every other survivor fetches it. It says
// which shrink it is (the communicator's count of shrinks), the new communicator's unique
// id, and the ranks it leaves out. It arrives from another process, so decoding checks
// every byte (tests/fuzz/shrink_offer_fuzz.cc feeds it arbitrary bytes).
#ifndef TESSERA_COMM_SHRINK_OFFER_H_
#define TESSERA_COMM_SHRINK_OFFER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/rendezvous.h"

namespace tessera {

// "shrink <generation>\n", the unique id's kUniqueIdBytes, then the excluded ranks as
// decimal numbers, each followed by a space, in increasing order.
std::string EncodeShrinkOffer(uint32_t generation, const UniqueIdData& id, const std::vector<int>& exclude);

// *current is false when `offer` is not the offer of shrink `generation` (none yet, or an
// older one), and the rest is left alone. Otherwise the offer must be whole and its
// excluded ranks increasing, in [0, nranks) and fewer than nranks: InvalidArgument
// saying what is wrong if not.
Status DecodeShrinkOffer(const std::string& offer, uint32_t generation, int nranks, bool* current, UniqueIdData* id,
                         std::vector<int>* exclude);

}  // namespace tessera

#endif  // TESSERA_COMM_SHRINK_OFFER_H_
