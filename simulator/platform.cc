#include "simulator/platform.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <vector>

#include "base/settings.h"

namespace tessera {
namespace {

// A TCP segment's payload at MTU 1500: the first of a message wakes the receiver's poll.
constexpr size_t kTcpSegmentBytes = 1448;

// The pipelining unit of a transport (its setting's default, base/settings.h), and what
// of a message wakes the receiver.
Status ChunkOf(const std::string& transport, MessageClass* c) {
  if (transport == "shm") c->chunk_bytes = SettingDefaults::shm_slot_bytes;
  else if (transport == "tcp") c->chunk_bytes = SettingDefaults::tcp_chunk_bytes;
  else if (transport == "ucx") c->chunk_bytes = SettingDefaults::ucx_chunk_bytes;
  else if (transport == "ibverbs") c->chunk_bytes = SettingDefaults::ib_slot_bytes;
  else if (transport == "cuda_ipc") c->chunk_bytes = SettingDefaults::cuda_ipc_slot_bytes;
  else return InvalidArgument("unknown transport '" + transport + "' (shm, tcp, ucx, ibverbs, cuda_ipc)");
  c->transport = transport;
  c->wake_bytes = transport == "tcp" ? kTcpSegmentBytes : c->chunk_bytes;
  return Status::Ok();
}

struct Key {
  const char* name;
  std::function<Status(const std::string& value, Platform* p)> set;
};

Status Number(const std::string& v, double* out) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d >= 0)) return InvalidArgument("'" + v + "' is not a number >= 0");
  *out = d;
  return Status::Ok();
}

Key Rate(const char* name, double Platform::*field) {
  return {name, [field](const std::string& v, Platform* p) {
            double d = 0;
            TESSERA_RETURN_IF_ERROR(Number(v, &d));
            p->*field = d * 1e9;
            return Status::Ok();
          }};
}
Key Micros(const char* name, double Platform::*field) {
  return {name, [field](const std::string& v, Platform* p) {
            double d = 0;
            TESSERA_RETURN_IF_ERROR(Number(v, &d));
            p->*field = d * 1e-6;
            return Status::Ok();
          }};
}
Key Count(const char* name, int Platform::*field) {
  return {name, [field](const std::string& v, Platform* p) {
            double d = 0;
            TESSERA_RETURN_IF_ERROR(Number(v, &d));
            p->*field = static_cast<int>(d);
            return Status::Ok();
          }};
}
Key Class(const char* name, MessageClass Platform::*cls, const std::string& what) {
  return {name, [cls, what](const std::string& v, Platform* p) {
            MessageClass& c = p->*cls;
            double d = 0;
            if (what == "transport") return ChunkOf(v, &c);
            TESSERA_RETURN_IF_ERROR(Number(v, &d));
            if (what == "chunk") c.chunk_bytes = static_cast<size_t>(d);
            if (what == "wake") c.wake_bytes = static_cast<size_t>(d);
            if (what == "overhead") c.overhead_s = d * 1e-6;
            return Status::Ok();
          }};
}

const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = {
      {"name", [](const std::string& v, Platform* p) { p->name = v; return Status::Ok(); }},
      Count("node.max_ranks", &Platform::max_ranks_per_node),
      Rate("intra.GBps", &Platform::intra_Bps),
      Micros("intra.latency_us", &Platform::intra_latency_s),
      Class("intra.transport", &Platform::intra, "transport"),
      Class("intra.chunk_bytes", &Platform::intra, "chunk"),
      Class("intra.wake_bytes", &Platform::intra, "wake"),
      Class("intra.overhead_us", &Platform::intra, "overhead"),
      Class("inter.transport", &Platform::inter, "transport"),
      Class("inter.chunk_bytes", &Platform::inter, "chunk"),
      Class("inter.wake_bytes", &Platform::inter, "wake"),
      Class("inter.overhead_us", &Platform::inter, "overhead"),
      Count("nic.count", &Platform::nics),
      Rate("nic.GBps", &Platform::nic_Bps),
      Micros("nic.latency_us", &Platform::nic_latency_s),
      Rate("pcie.GBps", &Platform::pcie_Bps),
      Count("fabric.nodes_per_leaf", &Platform::nodes_per_leaf),
      Count("fabric.spines", &Platform::spines),
      Count("fabric.links_per_spine", &Platform::links_per_spine),
      Rate("fabric.link_GBps", &Platform::fabric_Bps),
      Micros("fabric.latency_us", &Platform::fabric_latency_s),
      Rate("reduce.GBps", &Platform::reduce_Bps),
      Rate("copy.GBps", &Platform::copy_Bps),
      Count("cpu.shared_cores", &Platform::shared_cores),
  };
  return keys;
}

Status Validate(const Platform& p, const std::string& source) {
  auto need = [&](bool ok, const char* what) {
    return ok ? Status::Ok() : InvalidArgument(source + ": " + what);
  };
  TESSERA_RETURN_IF_ERROR(need(p.intra_Bps > 0 && p.nic_Bps > 0 && p.fabric_Bps > 0, "intra.GBps, nic.GBps and fabric.link_GBps must be > 0"));
  TESSERA_RETURN_IF_ERROR(need(p.reduce_Bps > 0 && p.copy_Bps > 0, "reduce.GBps and copy.GBps must be > 0"));
  TESSERA_RETURN_IF_ERROR(need(p.nics >= 1 && p.links_per_spine >= 1, "nic.count and fabric.links_per_spine must be >= 1"));
  return need(p.intra.chunk_bytes > 0 && p.inter.chunk_bytes > 0 && p.intra.wake_bytes > 0 && p.inter.wake_bytes > 0,
              "chunk and wake sizes must be > 0");
}

}  // namespace

Status ParsePlatform(const std::string& text, const std::string& source, Platform* out) {
  Platform p;
  TESSERA_RETURN_IF_ERROR(ChunkOf("shm", &p.intra));
  TESSERA_RETURN_IF_ERROR(ChunkOf("tcp", &p.inter));
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    std::string key, eq, value, extra;
    if (!(ls >> key)) continue;
    const std::string where = source + ":" + std::to_string(no) + ": ";
    if (!(ls >> eq >> value) || eq != "=" || (ls >> extra)) return InvalidArgument(where + "expected 'key = value'");
    const Key* k = nullptr;
    for (const Key& candidate : Keys()) {
      if (key == candidate.name) k = &candidate;
    }
    if (k == nullptr) return InvalidArgument(where + "unknown key '" + key + "'");
    const Status s = k->set(value, &p);
    if (!s.ok()) return InvalidArgument(where + key + ": " + s.message());
  }
  TESSERA_RETURN_IF_ERROR(Validate(p, source));
  *out = p;
  return Status::Ok();
}

Status ReadPlatformFile(const std::string& path, Platform* out) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("platform file " + path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParsePlatform(text, path, out);
}

CostModel Platform::Model() const {
  CostModel m;
  m.intra = LinkCost{intra_latency_s + intra.overhead_s, 1.0 / intra_Bps};
  const double hops = spines > 0 ? 4 : 2;  // leaf links (and spine links) on the way
  m.inter = LinkCost{2 * nic_latency_s + hops * fabric_latency_s + inter.overhead_s, 1.0 / (nics * nic_Bps)};
  m.gamma = 1.0 / reduce_Bps;
  return m;
}

FabricShape Platform::Fabric() const {
  FabricShape f;
  f.nics = nics;
  if (spines > 0 && nodes_per_leaf > 0) {
    const double node = std::min(nics * nic_Bps, fabric_Bps);
    f.hosts_per_rack = nodes_per_leaf;
    f.uplink_share = std::min(1.0, spines * links_per_spine * fabric_Bps / (nodes_per_leaf * node));
  }
  return f;
}

std::string Platform::Describe() const {
  char buf[512];
  const std::string fabric = spines > 0 ? "a fat tree of " + std::to_string(nodes_per_leaf) + " nodes per leaf, " +
                                              std::to_string(spines) + " spines"
                                        : std::string("one switch");
  std::snprintf(buf, sizeof(buf),
                "%s: intra %.1f GB/s (%s, %zu B chunks), %d NIC(s) of %.3f GB/s (%s, %zu B chunks), %s, "
                "reduce %.1f GB/s%s",
                name.c_str(), intra_Bps / 1e9, intra.transport.c_str(), intra.chunk_bytes, nics, nic_Bps / 1e9,
                inter.transport.c_str(), inter.chunk_bytes, fabric.c_str(), reduce_Bps / 1e9,
                shared_cores > 0 ? (", one CPU of " + std::to_string(shared_cores) + " cores").c_str() : "");
  return buf;
}

}  // namespace tessera
