#include "bootstrap/rank_table.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace tessera {
namespace {

// Fields travel in host byte order (a cluster is assumed homogeneous).
template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

// Reads from bytes that come from the network: every Take checks that they hold it.
class RankTable::Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  bool Take(T* v) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Skip(size_t n) {
    if (bytes_.size() - at_ < n) return false;
    at_ += n;
    return true;
  }
  size_t at() const { return at_; }
  size_t left() const { return bytes_.size() - at_; }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

namespace {

// The agreed settings as lines.
std::vector<std::string> AgreedLines(const RankInfo& info) {
  const std::string& text = info.agreed;
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

Status AddAgreed(const std::string& lines, RankInfo* info) {
  if (info->agreed.size() + lines.size() > kMaxAgreedBytes) {
    return InvalidArgument("agreed settings exceed " + std::to_string(kMaxAgreedBytes) + " bytes");
  }
  info->agreed += lines;
  return Status::Ok();
}

Status AddCard(const std::string& name, const std::string& bytes, RankInfo* info) {
  const size_t record = 1 + name.size() + 2 + bytes.size();
  if (name.size() > 255 || bytes.size() > 65535 || info->cards.size() + record > kMaxCardsBytes) {
    return InvalidArgument("the " + name + " transport's card of " + std::to_string(bytes.size()) +
                           " bytes does not fit the rendezvous' " + std::to_string(kMaxCardsBytes) +
                           " bytes beside the others' " + std::to_string(info->cards.size()));
  }
  info->cards += static_cast<char>(name.size());
  info->cards += name;
  info->cards += static_cast<char>(bytes.size() & 0xff);
  info->cards += static_cast<char>(bytes.size() >> 8);
  info->cards += bytes;
  return Status::Ok();
}

Status FindCard(const char* cards, size_t end, const std::string& name, std::string* bytes) {
  bytes->clear();
  const unsigned char* c = reinterpret_cast<const unsigned char*>(cards);
  for (size_t at = 0; at < end;) {
    const size_t name_len = c[at];
    if (at + 1 + name_len + 2 > end) return InvalidArgument("malformed transport cards (a name overruns)");
    const size_t len_at = at + 1 + name_len;
    const size_t len = c[len_at] | (static_cast<size_t>(c[len_at + 1]) << 8);
    if (len_at + 2 + len > end) {
      return InvalidArgument("malformed transport cards (the " + std::string(cards + at + 1, name_len) +
                             " card overruns)");
    }
    if (name_len == name.size() && std::memcmp(cards + at + 1, name.data(), name_len) == 0) {
      bytes->assign(cards + len_at + 2, len);
      return Status::Ok();
    }
    at = len_at + 2 + len;
  }
  return Status::Ok();
}

std::string SettingMismatch(const RankInfo& a, const RankInfo& b) {
  const std::vector<std::string> x = AgreedLines(a), y = AgreedLines(b);
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    if (i < x.size() && i < y.size() && x[i] == y[i]) continue;
    const std::string& line = i < x.size() ? x[i] : y[i];
    return line.substr(0, line.find('='));
  }
  return "";
}

// {nranks, nhosts, nhosts x {length (1 byte), identity}, nranks x {pid, host index,
// cards length (2 bytes), cards}}.
std::string RankTable::Encode(const std::vector<RankInfo>& infos) {
  std::unordered_map<std::string, uint32_t> index;
  std::vector<const std::string*> hosts;
  std::vector<uint32_t> host_of(infos.size());
  for (size_t r = 0; r < infos.size(); ++r) {
    const std::string host = infos[r].host.substr(0, kMaxHostBytes);
    auto [it, added] = index.emplace(host, static_cast<uint32_t>(hosts.size()));
    if (added) hosts.push_back(&it->first);
    host_of[r] = it->second;
  }
  std::string out;
  Put(&out, static_cast<uint32_t>(infos.size()));
  Put(&out, static_cast<uint32_t>(hosts.size()));
  for (const std::string* h : hosts) {
    out += static_cast<char>(h->size());
    out += *h;
  }
  for (size_t r = 0; r < infos.size(); ++r) {
    const std::string cards = infos[r].cards.substr(0, kMaxCardsBytes);
    Put(&out, infos[r].pid);
    Put(&out, host_of[r]);
    Put(&out, static_cast<uint16_t>(cards.size()));
    out += cards;
  }
  return out;
}

uint64_t RankTable::MaxBytes(int nranks) {
  const uint64_t n = static_cast<uint64_t>(std::max(nranks, 0));
  return 8 + n * (1 + kMaxHostBytes) + n * (4 + 4 + 2 + kMaxCardsBytes);
}

Status RankTable::Decode(std::string bytes, int nranks, RankTable* out) {
  RankTable t;
  t.bytes_ = std::make_shared<const std::string>(std::move(bytes));
  const std::string& b = *t.bytes_;
  Reader in(b);
  uint32_t n = 0, nhosts = 0;
  if (!in.Take(&n) || !in.Take(&nhosts)) {
    return InvalidArgument("a rank table of " + std::to_string(b.size()) + " bytes");
  }
  if (nranks < 0 || n != static_cast<uint32_t>(nranks)) {
    return InvalidArgument("a rank table of " + std::to_string(n) + " ranks, expected " + std::to_string(nranks));
  }
  if (nhosts < (n > 0 ? 1u : 0u) || nhosts > n) {
    return InvalidArgument("a rank table of " + std::to_string(nhosts) + " hosts");
  }
  for (uint32_t h = 0; h < nhosts; ++h) {
    uint8_t len = 0;
    const size_t at = in.at() + 1;
    if (!in.Take(&len) || !in.Skip(len)) {
      return InvalidArgument("the rank table's host " + std::to_string(h) + " overruns");
    }
    t.hosts_.emplace_back(b.data() + at, len);
  }
  TESSERA_RETURN_IF_ERROR(t.ReadEntries(&in, n));
  if (!in.done()) {
    return InvalidArgument("the rank table has " + std::to_string(b.size() - in.at()) + " bytes too many");
  }
  *out = std::move(t);
  return Status::Ok();
}

// The entries, after the hosts: sized only once the bytes can hold n of them.
Status RankTable::ReadEntries(Reader* in, uint32_t n) {
  constexpr size_t kEntryBytes = 4 + 4 + 2;  // an entry without cards
  if (in->left() / kEntryBytes < n) {
    return InvalidArgument("a rank table whose " + std::to_string(in->left()) + " bytes of entries cannot hold " +
                           std::to_string(n) + " ranks");
  }
  pid_.resize(n);
  host_of_.resize(n);
  cards_at_.resize(n);
  cards_len_.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    if (!in->Take(&pid_[r]) || !in->Take(&host_of_[r]) || !in->Take(&cards_len_[r])) {
      return InvalidArgument("the rank table's entry of rank " + std::to_string(r) + " overruns");
    }
    cards_at_[r] = static_cast<uint32_t>(in->at());
    if (host_of_[r] >= hosts_.size() || !in->Skip(cards_len_[r])) {
      return InvalidArgument("the rank table's entry of rank " + std::to_string(r) + " is malformed");
    }
  }
  return Status::Ok();
}

Status RankTable::FindCard(int rank, const std::string& name, std::string* bytes) const {
  return tessera::FindCard(bytes_->data() + cards_at_[rank], cards_len_[rank], name, bytes);
}

}  // namespace tessera
