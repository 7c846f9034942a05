// The communicator layout: grouping ranks by host identity, generated layouts, and the
// layout file format (written, parsed, and read for TESSERA_TOPO_FILE).
#include "topology/layout.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

namespace tessera {
namespace {

const char kLayoutHeader[] = "tessera-layout 1";

const std::vector<int>& EmptyRanks() {
  static const std::vector<int>* empty = new std::vector<int>();
  return *empty;
}

const std::string& EmptyString() {
  static const std::string* empty = new std::string();
  return *empty;
}

// Parses a decimal number of at most 9 digits (no sign, no spaces). False otherwise.
bool ParseSmallNumber(const std::string& text, int* value) {
  if (text.empty() || text.size() > 9) return false;
  int result = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    result = result * 10 + (c - '0');
  }
  *value = result;
  return true;
}

bool HasWhitespace(const std::string& text) {
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

std::string Plural(int n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// One host line of a layout file, split into its tokens, with '#' comments removed.
std::vector<std::string> Tokens(const std::string& line) {
  const std::string content = line.substr(0, line.find('#'));
  std::istringstream in(content);
  std::vector<std::string> tokens;
  std::string token;
  while (in >> token) tokens.push_back(token);
  return tokens;
}

}  // namespace

Status Layout::FromHostIds(const std::vector<std::string>& host_id_by_rank, Layout* out) {
  if (host_id_by_rank.empty()) return InvalidArgument("layout: no ranks");
  Layout layout;
  std::unordered_map<std::string, int> host_index;
  for (size_t rank = 0; rank < host_id_by_rank.size(); ++rank) {
    const std::string& id = host_id_by_rank[rank];
    if (id.empty()) return InvalidArgument("layout: rank " + std::to_string(rank) + " has an empty host identity");
    auto found = host_index.find(id);
    int host;
    if (found == host_index.end()) {
      host = static_cast<int>(layout.host_ids_.size());
      host_index.emplace(id, host);
      layout.host_ids_.push_back(id);
      layout.ranks_of_host_.emplace_back();
    } else {
      host = found->second;
    }
    layout.host_of_rank_.push_back(host);
    layout.local_rank_of_rank_.push_back(static_cast<int>(layout.ranks_of_host_[host].size()));
    layout.ranks_of_host_[host].push_back(static_cast<int>(rank));
  }
  layout.host_id_by_rank_ = host_id_by_rank;
  *out = std::move(layout);
  return Status::Ok();
}

int Layout::HostOf(int rank) const {
  if (rank < 0 || rank >= nranks()) return -1;
  return host_of_rank_[rank];
}

int Layout::LocalRank(int rank) const {
  if (rank < 0 || rank >= nranks()) return -1;
  return local_rank_of_rank_[rank];
}

int Layout::LocalSize(int rank) const {
  if (rank < 0 || rank >= nranks()) return -1;
  return static_cast<int>(ranks_of_host_[host_of_rank_[rank]].size());
}

const std::vector<int>& Layout::RanksOnHost(int host) const {
  if (host < 0 || host >= num_hosts()) return EmptyRanks();
  return ranks_of_host_[host];
}

const std::string& Layout::HostId(int host) const {
  if (host < 0 || host >= num_hosts()) return EmptyString();
  return host_ids_[host];
}

int Layout::RankAt(int host, int local_rank) const {
  const std::vector<int>& ranks = RanksOnHost(host);
  if (local_rank < 0 || local_rank >= static_cast<int>(ranks.size())) return -1;
  return ranks[local_rank];
}

std::vector<int> Layout::RanksWithLocalRank(int local_rank) const {
  std::vector<int> ranks;
  for (int host = 0; host < num_hosts(); ++host) {
    const int rank = RankAt(host, local_rank);
    if (rank >= 0) ranks.push_back(rank);
  }
  return ranks;
}

bool Layout::IsRegular() const {
  if (ranks_of_host_.empty()) return false;
  for (const std::vector<int>& ranks : ranks_of_host_) {
    if (ranks.size() != ranks_of_host_[0].size()) return false;
  }
  return true;
}

int Layout::RanksPerHost() const { return IsRegular() ? static_cast<int>(ranks_of_host_[0].size()) : 0; }

std::string Layout::Describe() const {
  if (IsRegular()) return Plural(num_hosts(), "host") + " x " + Plural(RanksPerHost(), "rank");
  if (num_hosts() == 0) return "empty layout";
  std::string sizes;
  for (const std::vector<int>& ranks : ranks_of_host_) {
    sizes += (sizes.empty() ? "" : "+") + std::to_string(ranks.size());
  }
  return Plural(num_hosts(), "host") + ", irregular (" + sizes + " ranks)";
}

Status MakeGridLayout(int hosts, int ranks_per_host, Placement placement, Layout* out) {
  if (hosts < 1 || ranks_per_host < 1 ||
      static_cast<int64_t>(hosts) * ranks_per_host > static_cast<int64_t>(kMaxLayoutRanks)) {
    return InvalidArgument("layout: cannot make " + std::to_string(hosts) + " hosts x " +
                           std::to_string(ranks_per_host) + " ranks (each must be >= 1, at most " +
                           std::to_string(kMaxLayoutRanks) + " ranks in all)");
  }
  const int nranks = hosts * ranks_per_host;
  std::vector<std::string> host_ids(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    const int host = placement == Placement::kBlock ? rank / ranks_per_host : rank % hosts;
    host_ids[rank] = "host" + std::to_string(host);
  }
  return Layout::FromHostIds(host_ids, out);
}

Status LayoutFromSpec(const std::string& spec, Layout* out) {
  const std::string usage = "layout spec '" + spec + "': expected HOSTSxRANKS[:block|:round-robin], e.g. 4x2";
  const size_t colon = spec.find(':');
  const std::string grid = spec.substr(0, colon);
  Placement placement = Placement::kBlock;
  if (colon != std::string::npos) {
    const std::string name = spec.substr(colon + 1);
    if (name == "round-robin") {
      placement = Placement::kRoundRobin;
    } else if (name != "block") {
      return InvalidArgument(usage);
    }
  }
  const size_t x = grid.find('x');
  int hosts = 0, ranks_per_host = 0;
  if (x == std::string::npos || !ParseSmallNumber(grid.substr(0, x), &hosts) ||
      !ParseSmallNumber(grid.substr(x + 1), &ranks_per_host)) {
    return InvalidArgument(usage);
  }
  return MakeGridLayout(hosts, ranks_per_host, placement, out);
}

Status FormatLayoutFile(const Layout& layout, std::string* text) {
  if (layout.nranks() == 0) return InvalidArgument("layout file: cannot write an empty layout");
  std::string result = std::string(kLayoutHeader) + "\n# " + layout.Describe() + "\n";
  for (int host = 0; host < layout.num_hosts(); ++host) {
    const std::string& id = layout.HostId(host);
    if (id.size() > kMaxLayoutHostNameBytes || HasWhitespace(id) || id.find('#') != std::string::npos) {
      return InvalidArgument("layout file: host identity '" + id + "' cannot be written (at most " +
                             std::to_string(kMaxLayoutHostNameBytes) + " bytes, no whitespace, no '#')");
    }
    result += id;
    for (int rank : layout.RanksOnHost(host)) result += " " + std::to_string(rank);
    result += "\n";
  }
  *text = std::move(result);
  return Status::Ok();
}

Status ParseLayoutFile(const std::string& text, const std::string& source, Layout* out) {
  auto error_at = [&source](int line, const std::string& what) {
    return InvalidArgument(source + " line " + std::to_string(line) + ": " + what);
  };
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  struct Placed {
    int host;
    int line;
  };
  std::map<int, Placed> placed;        // rank -> where it was listed
  std::vector<std::string> host_names;  // in file order
  std::map<std::string, int> host_line;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> tokens = Tokens(line);
    if (line_number == 1) {
      if (tokens.size() == 2 && tokens[0] == "tessera-layout" && tokens[1] != "1") {
        return error_at(1, "layout format version '" + tokens[1] + "' is not supported (this build reads version 1)");
      }
      if (tokens.size() != 2 || tokens[0] != "tessera-layout") {
        return error_at(1, std::string("expected the header '") + kLayoutHeader + "'");
      }
      continue;
    }
    if (tokens.empty() || tokens[0] == "fabric") continue;  // blank, comment, or the fabric's (fabric.h)
    const std::string& host = tokens[0];
    if (host.size() > kMaxLayoutHostNameBytes) {
      return error_at(line_number, "host name is longer than " + std::to_string(kMaxLayoutHostNameBytes) + " bytes");
    }
    if (host_line.count(host) != 0) {
      return error_at(line_number, "host '" + host + "' is already listed on line " + std::to_string(host_line[host]));
    }
    if (tokens.size() == 1) return error_at(line_number, "host '" + host + "' lists no ranks");
    const int host_index = static_cast<int>(host_names.size());
    host_names.push_back(host);
    host_line[host] = line_number;
    for (size_t i = 1; i < tokens.size(); ++i) {
      int rank = 0;
      if (!ParseSmallNumber(tokens[i], &rank)) {
        return error_at(line_number, "'" + tokens[i] + "' is not a rank number");
      }
      if (rank >= kMaxLayoutRanks) {
        return error_at(line_number, "rank " + tokens[i] + " is too large (at most " +
                                         std::to_string(kMaxLayoutRanks) + " ranks)");
      }
      auto found = placed.find(rank);
      if (found != placed.end()) {
        return error_at(line_number, "rank " + std::to_string(rank) + " is already on host '" +
                                         host_names[found->second.host] + "' (line " +
                                         std::to_string(found->second.line) + ")");
      }
      placed[rank] = Placed{host_index, line_number};
    }
  }
  if (line_number == 0) return error_at(1, std::string("expected the header '") + kLayoutHeader + "', the file is empty");
  if (placed.empty()) return error_at(line_number, "the file lists no hosts");
  // Ranks must be exactly 0 .. n-1: the highest is n-1 exactly when none is missing.
  const int nranks = static_cast<int>(placed.size());
  const auto highest = placed.rbegin();
  if (highest->first != nranks - 1) {
    int missing = 0;
    while (placed.count(missing) != 0) ++missing;
    return error_at(highest->second.line, "rank " + std::to_string(highest->first) + " is listed but rank " +
                                              std::to_string(missing) + " is on no host (the " +
                                              Plural(nranks, "rank") + " listed must be 0.." +
                                              std::to_string(nranks - 1) + ")");
  }
  std::vector<std::string> host_id_by_rank(nranks);
  for (const auto& entry : placed) host_id_by_rank[entry.first] = host_names[entry.second.host];
  return Layout::FromHostIds(host_id_by_rank, out);
}

Status WriteLayoutFile(const std::string& path, const Layout& layout) {
  std::string text;
  TESSERA_RETURN_IF_ERROR(FormatLayoutFile(layout, &text));
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return ErrnoError("opening layout file '" + path + "' for writing", errno);
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int write_error = written ? 0 : errno;
  if (std::fclose(file) != 0 && written) return ErrnoError("writing layout file '" + path + "'", errno);
  if (!written) return ErrnoError("writing layout file '" + path + "'", write_error);
  return Status::Ok();
}

Status ReadLayoutFile(const std::string& path, Layout* out) {
  // A layout file is small; the cap keeps a wrong path (/dev/zero) from running forever.
  constexpr size_t kMaxLayoutFileBytes = 16 << 20;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return ErrnoError("opening layout file '" + path + "'", errno);
  std::string text;
  char buffer[65536];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0 && text.size() <= kMaxLayoutFileBytes) {
    text.append(buffer, got);
  }
  const int read_error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_error != 0) return ErrnoError("reading layout file '" + path + "'", read_error);
  if (text.size() > kMaxLayoutFileBytes) {
    return InvalidArgument("layout file '" + path + "' is larger than " + std::to_string(kMaxLayoutFileBytes >> 20) +
                           " MiB");
  }
  return ParseLayoutFile(text, path, out);
}

Status HostIdFromLayoutFile(const std::string& path, int rank, int nranks, std::string* host_id) {
  Layout layout;
  TESSERA_RETURN_IF_ERROR(ReadLayoutFile(path, &layout));
  if (layout.nranks() != nranks) {
    return InvalidArgument("layout file '" + path + "' places " + Plural(layout.nranks(), "rank") +
                           " but the communicator has " + std::to_string(nranks));
  }
  if (rank < 0 || rank >= nranks) {
    return InvalidArgument("layout file '" + path + "': rank " + std::to_string(rank) + " is out of range 0.." +
                           std::to_string(nranks - 1));
  }
  *host_id = layout.HostId(layout.HostOf(rank));
  return Status::Ok();
}

}  // namespace tessera
