#include "simulator/simgrid_platform.h"

#include <string>

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

namespace tessera {
namespace {

namespace sg4 = simgrid::s4u;
using Dir = sg4::LinkInRoute::Direction;

sg4::Link* DuplexLink(sg4::NetZone* zone, const std::string& name, double Bps, double latency_s) {
  return zone->create_split_duplex_link(name, Bps)->set_latency(latency_s)->seal();
}

// One node: its ranks' hosts, a link per pair of them, each rank's PCIe link to its
// NIC, the NICs, and a router (the gateway to the fabric).
std::pair<simgrid::kernel::routing::NetPoint*, simgrid::kernel::routing::NetPoint*> MakeNode(
    sg4::NetZone* parent, unsigned long id, const Platform& p, const Layout& layout, SimGridPlatform* out) {
  const std::string name = "node" + std::to_string(id);
  sg4::NetZone* zone = sg4::create_full_zone(name);
  zone->set_parent(parent);
  auto* gateway = zone->create_router(name + "-switch");
  if (id >= static_cast<unsigned long>(layout.num_hosts())) {  // a leaf of the tree left empty
    zone->seal();
    return {zone->get_netpoint(), gateway};
  }
  const std::vector<int>& ranks = layout.RanksOnHost(static_cast<int>(id));
  std::vector<sg4::Host*> hosts;
  for (int r : ranks) {
    sg4::Host* h = zone->create_host("rank" + std::to_string(r), p.reduce_Bps)->seal();
    out->rank_hosts[r] = h;
    hosts.push_back(h);
  }
  if (id == 0 && p.shared_cores > 0) {
    out->shared_cpu = zone->create_host("machine", p.reduce_Bps)->set_core_count(p.shared_cores)->seal();
  }
  const int R = static_cast<int>(hosts.size());
  for (int i = 0; i < R; ++i) {
    for (int j = i + 1; j < R; ++j) {
      sg4::Link* l = DuplexLink(zone, name + "-l" + std::to_string(i) + "-" + std::to_string(j), p.intra_Bps, p.intra_latency_s);
      zone->add_route(hosts[i]->get_netpoint(), hosts[j]->get_netpoint(), nullptr, nullptr, {{l, Dir::UP}}, true);
    }
  }
  std::vector<sg4::Link*> nics;
  for (int n = 0; n < p.nics; ++n) nics.push_back(DuplexLink(zone, name + "-nic" + std::to_string(n), p.nic_Bps, p.nic_latency_s));
  for (int i = 0; i < R; ++i) {
    std::vector<sg4::LinkInRoute> route;
    if (p.pcie_Bps > 0) route.emplace_back(DuplexLink(zone, name + "-pcie" + std::to_string(i), p.pcie_Bps, 0), Dir::UP);
    route.emplace_back(nics[static_cast<size_t>(i) * p.nics / R], Dir::UP);
    zone->add_route(hosts[i]->get_netpoint(), gateway, nullptr, nullptr, route, true);
  }
  zone->seal();
  return {zone->get_netpoint(), gateway};
}

}  // namespace

Status BuildSimGridPlatform(const Platform& p, const Layout& layout, SimGridPlatform* out) {
  const int nodes = layout.num_hosts();
  for (int h = 0; h < nodes; ++h) {
    const int r = static_cast<int>(layout.RanksOnHost(h).size());
    if (p.max_ranks_per_node > 0 && r > p.max_ranks_per_node) {
      return InvalidArgument("platform " + p.name + ": node " + std::to_string(h) + " would hold " + std::to_string(r) +
                             " ranks; node.max_ranks is " + std::to_string(p.max_ranks_per_node));
    }
  }
  out->rank_hosts.assign(layout.nranks(), nullptr);
  const unsigned per_leaf = p.nodes_per_leaf > 0 && p.spines > 0 ? static_cast<unsigned>(p.nodes_per_leaf) : nodes;
  const unsigned leaves = (nodes + per_leaf - 1) / per_leaf;
  const sg4::FatTreeParams tree = p.spines > 0 ? sg4::FatTreeParams(2, {per_leaf, leaves}, {1, static_cast<unsigned>(p.spines)},
                                                                    {1, static_cast<unsigned>(p.links_per_spine)})
                                               : sg4::FatTreeParams(1, {per_leaf}, {1}, {1});
  auto leaf = [&](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    return MakeNode(zone, id, p, layout, out);
  };
  sg4::create_fatTree_zone("fabric", nullptr, tree, sg4::ClusterCallbacks(leaf), p.fabric_Bps, p.fabric_latency_s,
                           sg4::Link::SharingPolicy::SPLITDUPLEX)
      ->seal();
  return Status::Ok();
}

}  // namespace tessera
