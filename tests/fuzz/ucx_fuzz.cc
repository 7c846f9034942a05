// What the UCX backend reads from other processes besides user data: a rank's card
// from the rendezvous (a framed worker address; only whole, unchanged addresses may
// reach UCX), a failure notice's payload, and the tag of a chunk or notice.
#include <cstdlib>

#include "tests/fuzz/fuzz_input.h"
#include "transport/ucx/ucx_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  const std::string card = in.TakeBytes(in.Take<uint16_t>());
  std::string address;
  if (DecodeUcxCard(card, &address).ok()) {
    if (address.size() > kMaxUcxWorkerAddress) std::abort();
    if (!card.empty() && EncodeUcxCard(address) != card) std::abort();
  }

  const uint64_t tag = in.Take<uint64_t>();
  const int sender = UcxTagSender(tag);
  if (sender < 0 || sender >= (1 << kUcxRankBits)) std::abort();
  if ((UcxNoticeTag(sender) & ~kUcxNoticeFlag) != (tag & (((uint64_t{1} << kUcxRankBits) - 1) << 45))) std::abort();
  const bool last = (tag & kUcxLastFlag) != 0;
  const uint64_t rebuilt =
      UcxDataTag(sender, tag >> 29, UcxTagDigest(tag), tag & (kUcxMaxChunks - 1), last) | (tag & kUcxNoticeFlag);
  if (rebuilt != tag) std::abort();

  const Status notice = DecodeUcxNotice(sender, in.Rest());
  if (notice.ok() || notice.message().size() > 64 + kMaxUcxNoticeText) std::abort();
  return 0;
}
