#include "transport/ibverbs/device_selection.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tessera {
namespace ibverbs {
namespace {

bool IsIpv4Mapped(const Gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g[i] != 0) return false;
  }
  return g[10] == 0xff && g[11] == 0xff;
}

bool IsLinkLocal(const Gid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

// Higher is better; -1 is unusable for the link layer.
int GidScore(const GidEntry& e, LinkLayer layer) {
  if (layer == LinkLayer::kInfiniBand) return e.type == GidType::kInfiniBand ? 0 : -1;
  switch (e.type) {
    case GidType::kRoceV2:
      if (IsIpv4Mapped(e.gid)) return 3;
      return IsLinkLocal(e.gid) ? 1 : 2;
    case GidType::kRoceV1:
      return 0;
    case GidType::kInfiniBand:
      return -1;
  }
  return -1;
}

bool FilterAccepts(const std::vector<DeviceFilterEntry>& filter, const std::string& device, int port) {
  if (filter.empty()) return true;
  for (const DeviceFilterEntry& f : filter) {
    if (f.device == device && (f.port == 0 || f.port == port)) return true;
  }
  return false;
}

}  // namespace

int SelectGidIndex(const std::vector<GidEntry>& gids, LinkLayer layer) {
  int best = -1, best_score = -1;
  for (const GidEntry& e : gids) {
    const int score = GidScore(e, layer);
    if (score > best_score || (score == best_score && score >= 0 && e.index < best)) {
      best = e.index;
      best_score = score;
    }
  }
  return best_score < 0 ? -1 : best;
}

Status ParseDeviceFilter(const std::string& text, std::vector<DeviceFilterEntry>* out) {
  out->clear();
  if (text.empty()) return Status::Ok();
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    DeviceFilterEntry e;
    const size_t colon = item.find(':');
    e.device = item.substr(0, colon);
    if (e.device.empty()) return InvalidArgument("RDMA device filter \"" + text + "\": empty device name");
    if (colon != std::string::npos) {
      const std::string port = item.substr(colon + 1);
      char* end = nullptr;
      const long p = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || p < 1 || p > 255) {
        return InvalidArgument("RDMA device filter \"" + text + "\": bad port \"" + port + "\"");
      }
      e.port = static_cast<int>(p);
    }
    out->push_back(e);
  }
  return Status::Ok();
}

Status NoRdmaDevice(const std::string& detail) { return SystemError(std::string(kNoRdmaDevice) + ": " + detail); }

bool IsNoRdmaDevice(const Status& status) {
  return status.code() == Code::kSystemError && status.message().rfind(kNoRdmaDevice, 0) == 0;
}

Status SelectDevicePort(const std::vector<DeviceInfo>& devices, const SelectionRequest& request, DeviceChoice* out) {
  if (devices.empty()) return NoRdmaDevice("no RDMA devices on this host");
  std::vector<DeviceChoice> usable;
  std::string refused;  // why each port was not used
  for (size_t d = 0; d < devices.size(); ++d) {
    const DeviceInfo& dev = devices[d];
    for (size_t p = 0; p < dev.ports.size(); ++p) {
      const PortInfo& port = dev.ports[p];
      const std::string where = dev.name + ":" + std::to_string(port.port);
      std::string why;
      int gid_index = -1;
      if (!FilterAccepts(request.filter, dev.name, port.port)) {
        why = "excluded by the device filter";
      } else if (!port.active) {
        why = "not active";
      } else if (request.forced_gid_index >= 0) {
        gid_index = request.forced_gid_index;
        bool found = false;
        for (const GidEntry& e : port.gids) found |= e.index == gid_index;
        if (!found) why = "GID index " + std::to_string(gid_index) + " is not valid";
      } else {
        gid_index = SelectGidIndex(port.gids, port.link_layer);
        if (port.link_layer == LinkLayer::kEthernet && gid_index < 0) why = "RoCE port without a usable GID";
      }
      if (why.empty() && port.link_layer == LinkLayer::kInfiniBand && port.lid == 0) {
        why = "InfiniBand port without a LID (no subnet manager?)";
      }
      if (!why.empty()) {
        refused += (refused.empty() ? "" : "; ") + where + " " + why;
        continue;
      }
      DeviceChoice c;
      c.device = d;
      c.port = p;
      c.gid_index = gid_index;
      c.numa_local = request.numa_node >= 0 && dev.numa_node == request.numa_node;
      usable.push_back(c);
    }
  }
  if (usable.empty()) return NoRdmaDevice("no usable RDMA port (" + refused + ")");
  std::vector<DeviceChoice> local;
  for (const DeviceChoice& c : usable) {
    if (c.numa_local) local.push_back(c);
  }
  const std::vector<DeviceChoice>& pool = local.empty() ? usable : local;
  const size_t spread = request.spread_index < 0 ? 0 : static_cast<size_t>(request.spread_index);
  *out = pool[spread % pool.size()];
  return Status::Ok();
}

int CurrentNumaNode() {
  unsigned cpu = 0, node = 0;
  if (syscall(SYS_getcpu, &cpu, &node, nullptr) != 0) return -1;
  return static_cast<int>(node);
}

std::string FormatGid(const Gid& gid) {
  std::string out;
  char group[8];
  for (size_t i = 0; i < gid.size(); i += 2) {
    std::snprintf(group, sizeof(group), "%02x%02x", gid[i], gid[i + 1]);
    if (i > 0) out += ':';
    out += group;
  }
  return out;
}

}  // namespace ibverbs
}  // namespace tessera
