// The fabric above the hosts: layout-file fabric lines, Slurm's topology.conf, inference
// from sysfs, and what the cost model sees of it (fabric.h).
#include "topology/fabric.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "topology/host_identity.h"

namespace tessera {
namespace {

constexpr size_t kMaxHostlistNames = 1000000;
constexpr size_t kMaxFabricFileBytes = 16 << 20;

// The tokens of a line, '#' comments removed.
std::vector<std::string> Tokens(const std::string& line) {
  std::istringstream in(line.substr(0, line.find('#')));
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  return tokens;
}

bool ParseCount(const std::string& text, int most, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = std::atoi(text.c_str());
  return *out >= 1 && *out <= most;
}

Status ReadSmallFile(const std::string& path, const char* what, std::string* text) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return ErrnoError(std::string("opening ") + what + " '" + path + "'", errno);
  char buf[65536];
  size_t got = 0;
  text->clear();
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0 && text->size() <= kMaxFabricFileBytes) text->append(buf, got);
  const int error = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (error != 0) return ErrnoError(std::string("reading ") + what + " '" + path + "'", error);
  if (text->size() > kMaxFabricFileBytes) return InvalidArgument(std::string(what) + " '" + path + "' is too large");
  return Status::Ok();
}

std::string ShortName(const std::string& host) { return host.substr(0, host.find('.')); }

// One bracket range "01-04" or "7" into names prefix+number+rest, appended to out.
Status ExpandRange(const std::string& range, std::vector<std::string>* numbers) {
  const size_t dash = range.find('-');
  const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  if (!digits(lo) || !digits(hi)) return InvalidArgument("'" + range + "' is not a number or range of numbers");
  const long a = std::atol(lo.c_str()), b = std::atol(hi.c_str());
  if (b < a) return InvalidArgument("the range '" + range + "' runs backwards");
  if (static_cast<size_t>(b - a) >= kMaxHostlistNames) return InvalidArgument("the range '" + range + "' is too long");
  const int width = lo.size() > 1 && lo[0] == '0' ? static_cast<int>(lo.size()) : 0;
  for (long v = a; v <= b; ++v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%0*ld", width, v);
    numbers->push_back(buf);
  }
  return Status::Ok();
}

// One hostlist item (no top-level comma), its bracket groups expanded left to right.
Status ExpandItem(const std::string& item, std::vector<std::string>* out) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) return InvalidArgument("']' without '[' in '" + item + "'");
    out->push_back(item);
    return Status::Ok();
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos) return InvalidArgument("'[' without ']' in '" + item + "'");
  std::vector<std::string> numbers;
  std::istringstream ranges(item.substr(open + 1, close - open - 1));
  for (std::string r; std::getline(ranges, r, ',');) TESSERA_RETURN_IF_ERROR(ExpandRange(r, &numbers));
  std::vector<std::string> tails;
  TESSERA_RETURN_IF_ERROR(ExpandItem(item.substr(close + 1), &tails));
  for (const std::string& n : numbers) {
    for (const std::string& t : tails) {
      if (out->size() >= kMaxHostlistNames) return InvalidArgument("more than 1000000 host names");
      out->push_back(item.substr(0, open) + n + t);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ExpandHostlist(const std::string& list, std::vector<std::string>* out) {
  out->clear();
  int depth = 0;
  std::string item;
  auto flush = [&]() -> Status {
    if (item.empty()) return InvalidArgument("an empty name in the hostlist '" + list + "'");
    Status s = ExpandItem(item, out);
    item.clear();
    return s.ok() ? s : s.Annotate("hostlist '" + list + "'");
  };
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) return InvalidArgument("unbalanced brackets in the hostlist '" + list + "'");
    if (c == ',' && depth == 0) {
      TESSERA_RETURN_IF_ERROR(flush());
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) return InvalidArgument("a space in the hostlist '" + list + "'");
    item += c;
  }
  if (depth != 0) return InvalidArgument("unbalanced brackets in the hostlist '" + list + "'");
  return flush();
}

Status ParseFabricLines(const std::string& text, const std::string& source, Fabric* out) {
  Fabric f;
  std::set<std::string> rack_names;
  std::map<std::string, int> host_line;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    const std::vector<std::string> t = Tokens(line);
    if (t.empty() || t[0] != "fabric") continue;
    auto error = [&](const std::string& what) {
      return InvalidArgument(source + " line " + std::to_string(no) + ": " + what);
    };
    const std::string key = t.size() > 1 ? t[1] : "";
    if (key == "nics" && t.size() == 3) {
      if (!ParseCount(t[2], 1024, &f.nics)) return error("'" + t[2] + "' is not a NIC count (1..1024)");
    } else if (key == "uplink_percent" && t.size() == 3) {
      if (!ParseCount(t[2], 100, &f.uplink_percent)) return error("'" + t[2] + "' is not a percentage (1..100)");
    } else if (key == "rack" && t.size() >= 4) {
      if (!rack_names.insert(t[2]).second) return error("rack '" + t[2] + "' is already listed");
      Rack r{t[2], {}};
      for (size_t i = 3; i < t.size(); ++i) {
        auto [it, fresh] = host_line.emplace(t[i], no);
        if (!fresh) return error("host '" + t[i] + "' is already in a rack (line " + std::to_string(it->second) + ")");
        r.hosts.push_back(t[i]);
      }
      f.racks.push_back(std::move(r));
    } else {
      return error("expected 'fabric nics N', 'fabric uplink_percent P' or 'fabric rack NAME HOST...'");
    }
  }
  if (f.described()) f.sources.push_back("layout file " + source);
  *out = std::move(f);
  return Status::Ok();
}

Status ParseSlurmTopology(const std::string& raw, const std::string& source, Fabric* out) {
  // Lines ending in '\' continue on the next.
  std::string text;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\\' && i + 1 < raw.size() && raw[i + 1] == '\n') {
      text += ' ';
      ++i;
      continue;
    }
    text += raw[i];
  }
  Fabric f;
  std::set<std::string> switches;
  std::map<std::string, std::string> rack_of_node;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    const std::vector<std::string> t = Tokens(line);
    if (t.empty()) continue;
    auto error = [&](const std::string& what) {
      return InvalidArgument(source + " line " + std::to_string(no) + ": " + what);
    };
    std::string name, nodes;
    for (const std::string& kv : t) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) return error("expected KEY=VALUE, got '" + kv + "'");
      std::string key = kv.substr(0, eq);
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
      const std::string value = kv.substr(eq + 1);
      if (key == "switchname") name = value;
      else if (key == "nodes") nodes = value;
      else if (key != "switches" && key != "linkspeed") return error("unknown key '" + kv.substr(0, eq) + "'");
    }
    if (name.empty()) return error("a line without SwitchName=");
    if (!switches.insert(name).second) return error("switch '" + name + "' is already listed");
    if (nodes.empty()) continue;
    Rack r{name, {}};
    const Status s = ExpandHostlist(nodes, &r.hosts);
    if (!s.ok()) return error(s.message());
    for (const std::string& h : r.hosts) {
      auto [it, fresh] = rack_of_node.emplace(h, name);
      if (!fresh) return error("node '" + h + "' is already under switch '" + it->second + "'");
    }
    f.racks.push_back(std::move(r));
  }
  if (f.racks.empty()) return InvalidArgument(source + ": no switch lists Nodes=");
  f.sources.push_back("Slurm topology " + source);
  *out = std::move(f);
  return Status::Ok();
}

FabricShape Fabric::ShapeFor(const Layout& layout) const {
  FabricShape s;
  s.nics = std::max(1, nics);
  s.uplink_share = uplink_percent > 0 ? uplink_percent / 100.0 : 1.0;
  if (racks.empty() || layout.num_hosts() < 2) return s;
  std::map<std::string, int> rack_of;
  for (size_t r = 0; r < racks.size(); ++r) {
    for (const std::string& h : racks[r].hosts) {
      rack_of.emplace(h, static_cast<int>(r));
      rack_of.emplace(ShortName(h), static_cast<int>(r));
    }
  }
  std::set<int> used;
  int alone = 0;  // hosts in no rack: each a rack of its own
  for (int h = 0; h < layout.num_hosts(); ++h) {
    const std::string& id = layout.HostId(h);
    auto it = rack_of.find(id);
    if (it == rack_of.end()) it = rack_of.find(HostnameOf(id));
    if (it == rack_of.end()) it = rack_of.find(ShortName(HostnameOf(id)));
    if (it == rack_of.end()) {
      ++alone;
    } else {
      used.insert(it->second);
    }
  }
  const int occupied = static_cast<int>(used.size()) + alone;
  s.hosts_per_rack = occupied > 1 ? (layout.num_hosts() + occupied / 2) / occupied : 0;
  return s;
}

std::string Fabric::Describe() const {
  std::string out = "nics " + (nics > 0 ? std::to_string(nics) : std::string("unknown (1 assumed)")) + "\n";
  out += "uplink_percent " + (uplink_percent > 0 ? std::to_string(uplink_percent) : std::string("unknown (100 assumed)")) + "\n";
  if (racks.empty()) out += "racks unknown (every host under one switch assumed)\n";
  for (const Rack& r : racks) {
    out += "rack " + r.name + " hosts " + std::to_string(r.hosts.size()) + ":";
    for (const std::string& h : r.hosts) out += " " + h;
    out += "\n";
  }
  for (const std::string& s : sources) out += "from " + s + "\n";
  return out;
}

namespace {

// topology.conf where Slurm keeps it for this job: beside $SLURM_CONF, else in /etc/slurm.
std::string SlurmTopologyPath() {
  if (std::getenv("SLURM_JOB_ID") == nullptr) return "";
  const char* conf = std::getenv("SLURM_CONF");
  std::string dir = conf != nullptr && *conf != '\0' ? std::string(conf) : "/etc/slurm/slurm.conf";
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  const std::string path = (dir.empty() ? std::string(".") : dir) + "/topology.conf";
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? path : "";
}

// The host's RDMA NICs: the devices of /sys/class/infiniband (InfiniBand and RoCE, the
// list ibv_get_device_list gives) that are a PCI function; software devices (rxe, siw)
// have no `device` link and do not count. 0 if none. A directory read, cheap enough for
// every creation (a whole hwloc load with its PCI plugin is not).
int DetectedRdmaNics(const std::string& sysfs_class, std::string* how) {
  DIR* dir = opendir(sysfs_class.c_str());
  int n = 0;
  if (dir != nullptr) {
    for (const dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      struct stat st;
      n += stat((sysfs_class + "/" + e->d_name + "/device").c_str(), &st) == 0 ? 1 : 0;
    }
    closedir(dir);
  }
  *how = "inferred: " + std::to_string(n) + " RDMA NIC(s) in " + sysfs_class +
         "; racks and uplinks cannot be seen from a host";
  return n;
}

}  // namespace

FabricSources FabricSourcesOf(const Settings& s) {
  FabricSources f;
  f.topo_file = s.topo_file;
  f.topology_conf = s.topology_conf;
  f.nics = static_cast<int>(std::min<int64_t>(s.nics, 1024));
  f.uplink_percent = static_cast<int>(std::min<int64_t>(s.rack_uplink_percent, 100));
  return f;
}

Status ReadFabric(const FabricSources& sources, Fabric* out) {
  Fabric f;
  if (!sources.topo_file.empty()) {
    std::string text;
    TESSERA_RETURN_IF_ERROR(ReadSmallFile(sources.topo_file, "layout file", &text));
    TESSERA_RETURN_IF_ERROR(ParseFabricLines(text, sources.topo_file, &f));
  }
  const std::string conf = sources.topology_conf == "none" ? ""
                           : sources.topology_conf.empty()  ? SlurmTopologyPath()
                                                            : sources.topology_conf;
  if (f.racks.empty() && !conf.empty()) {
    std::string text;
    Fabric slurm;
    TESSERA_RETURN_IF_ERROR(ReadSmallFile(conf, "Slurm topology file", &text));
    TESSERA_RETURN_IF_ERROR(ParseSlurmTopology(text, conf, &slurm));
    f.racks = std::move(slurm.racks);
    f.sources.insert(f.sources.end(), slurm.sources.begin(), slurm.sources.end());
  }
  if (f.nics == 0 && sources.nics > 0) {
    f.nics = sources.nics;
    f.sources.push_back("TESSERA_NICS");
  }
  if (f.nics == 0 && sources.infer) {
    std::string how;
    f.nics = DetectedRdmaNics("/sys/class/infiniband", &how);
    if (!how.empty()) f.sources.push_back(how);
  }
  if (f.uplink_percent == 0 && sources.uplink_percent > 0) {
    f.uplink_percent = static_cast<int>(std::min<int64_t>(100, sources.uplink_percent));
    f.sources.push_back("TESSERA_RACK_UPLINK_PERCENT");
  }
  *out = std::move(f);
  return Status::Ok();
}

}  // namespace tessera
