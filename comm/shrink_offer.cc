#include "comm/shrink_offer.h"

namespace tessera {
namespace {

// The excluded ranks: "<rank> " repeated (decimal, no leading zeros), nothing else.
Status DecodeRanks(const std::string& text, int nranks, std::vector<int>* ranks) {
  ranks->clear();
  size_t at = 0;
  while (at < text.size()) {
    int64_t r = 0;
    size_t digits = 0;
    const size_t first = at;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 10; ++at, ++digits) {
      r = r * 10 + (text[at] - '0');
    }
    if (digits == 0 || (digits > 1 && text[first] == '0') || at == text.size() || text[at] != ' ') {
      return InvalidArgument("a shrink offer's excluded ranks are not decimal numbers each followed by a space");
    }
    ++at;
    if (r >= nranks || (!ranks->empty() && r <= ranks->back())) {
      return InvalidArgument("a shrink offer excludes rank " + std::to_string(r) + " (of " + std::to_string(nranks) +
                             " ranks, in increasing order)");
    }
    ranks->push_back(static_cast<int>(r));
  }
  if (static_cast<int>(ranks->size()) >= nranks) return InvalidArgument("a shrink offer excludes every rank");
  return Status::Ok();
}

}  // namespace

std::string EncodeShrinkOffer(uint32_t generation, const UniqueIdData& id, const std::vector<int>& exclude) {
  std::string out = "shrink " + std::to_string(generation) + "\n";
  char bytes[kUniqueIdBytes];
  EncodeUniqueId(id, bytes);
  out.append(bytes, kUniqueIdBytes);
  for (int r : exclude) out += std::to_string(r) + " ";
  return out;
}

Status DecodeShrinkOffer(const std::string& offer, uint32_t generation, int nranks, bool* current, UniqueIdData* id,
                         std::vector<int>* exclude) {
  const std::string head = "shrink " + std::to_string(generation) + "\n";
  *current = offer.compare(0, head.size(), head) == 0;
  if (!*current) return Status::Ok();
  if (offer.size() < head.size() + kUniqueIdBytes) return InvalidArgument("a shrink offer cut short");
  TESSERA_RETURN_IF_ERROR(DecodeUniqueId(offer.data() + head.size(), id));
  return DecodeRanks(offer.substr(head.size() + kUniqueIdBytes), nranks, exclude);
}

}  // namespace tessera
