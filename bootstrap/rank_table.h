// What the ranks of a new communicator tell each other through the rendezvous
// (rendezvous.h): each rank's RankInfo going up to the service, and the RankTable of all
// ranks coming back down.
//
// The table is compact, so that creation costs every rank O(nranks) bytes and the
// service O(nranks) too (docs/scale.md#creation-at-scale): a rank's entry holds its pid,
// the index of its host in a list of distinct host identities, and its cards; the
// agreed settings go up only (the service compares them) and never come back.
#ifndef TESSERA_BOOTSTRAP_RANK_TABLE_H_
#define TESSERA_BOOTSTRAP_RANK_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

// What a rank tells all others: who it is, the settings every rank must agree on, and
// one card per transport backend (the bytes peers need to reach this rank through it: an
// address, a segment name). The bootstrap carries cards as opaque bytes under the
// backend's name and knows no backend (transport/plugin.h).
constexpr size_t kMaxHostBytes = 127;
constexpr size_t kMaxAgreedBytes = 1024;  // every agreed setting at its longest fits
constexpr size_t kMaxCardsBytes = 2048;
struct RankInfo {
  int32_t pid = 0;
  std::string host;  // host identity (topology/host_identity.h), at most kMaxHostBytes
  // "NAME=value" lines, one per setting that must be equal on every rank; the
  // rendezvous names the first that differs. At most kMaxAgreedBytes.
  std::string agreed;
  // Records {name length (1 byte), name, bytes length (2 bytes), bytes}, one per card.
  // At most kMaxCardsBytes.
  std::string cards;
};

// Appends `lines` ("NAME=value" lines, each ended by a newline) to info's agreed
// settings. InvalidArgument when they do not fit.
Status AddAgreed(const std::string& lines, RankInfo* info);
// Appends a card. InvalidArgument when it does not fit (the message says how big it is).
Status AddCard(const std::string& name, const std::string& bytes, RankInfo* info);
// The card of backend `name` in card records, "" when there is none. InvalidArgument
// when the records are malformed (they come from the network).
Status FindCard(const char* cards, size_t len, const std::string& name, std::string* bytes);
inline Status FindCard(const RankInfo& info, const std::string& name, std::string* bytes) {
  return FindCard(info.cards.data(), info.cards.size(), name, bytes);
}

// The name of the first agreed setting (AddAgreed's "NAME=value" lines) in which b
// differs from a, or "" when they agree.
std::string SettingMismatch(const RankInfo& a, const RankInfo& b);

// Every rank's pid, host and cards, indexed by rank: what the service sends down.
class RankTable {
 public:
  // The table of `infos` (by rank) as bytes; their agreed lines are left out.
  static std::string Encode(const std::vector<RankInfo>& infos);
  // The most bytes a table of nranks ranks can take (what a receiver accepts).
  static uint64_t MaxBytes(int nranks);
  // Checks and indexes `bytes` (they come from the network): InvalidArgument naming
  // what is wrong unless they are a whole table of exactly nranks ranks.
  static Status Decode(std::string bytes, int nranks, RankTable* out);

  int size() const { return static_cast<int>(pid_.size()); }
  int pid(int rank) const { return pid_[rank]; }
  const std::string& host(int rank) const { return hosts_[host_of_[rank]]; }
  // The card of backend `name` that `rank` published, "" for none.
  Status FindCard(int rank, const std::string& name, std::string* bytes) const;
  // The encoded table, shared with whoever forwards it.
  const std::shared_ptr<const std::string>& bytes() const { return bytes_; }

 private:
  class Reader;
  Status ReadEntries(Reader* in, uint32_t n);

  std::shared_ptr<const std::string> bytes_;
  std::vector<std::string> hosts_;  // distinct host identities
  std::vector<int32_t> pid_;
  std::vector<uint32_t> host_of_;   // index into hosts_
  std::vector<uint32_t> cards_at_;  // offset of the rank's card records in *bytes_
  std::vector<uint16_t> cards_len_;
};

}  // namespace tessera

#endif  // TESSERA_BOOTSTRAP_RANK_TABLE_H_
