// topo_dump: prints what tessera sees of this host (hwloc topology, host identity), and
// writes or checks layout files for TESSERA_TOPO_FILE (docs/topology.md).
//
//   topo_dump                              this host's topology and host identity
//   topo_dump --xml FILE | --synthetic D   a described machine instead (hwloc XML / synthetic)
//   topo_dump --layout 4x2 [--out FILE]    a generated layout file (to FILE, else stdout)
//   topo_dump --check FILE                 reads a layout file and prints its layout
//   topo_dump --fabric FILE                the fabric a rank of layout file FILE reads
//                                          (its fabric lines and the settings of
//                                          docs/topology.md#the-fabric) and what the cost
//                                          model sees of it on that layout
#include <cstdio>
#include <cstring>
#include <string>

#include "base/settings.h"
#include "topology/fabric.h"
#include "topology/host_identity.h"
#include "topology/host_topology.h"
#include "topology/layout.h"

namespace tessera {
namespace {

const char kUsage[] =
    "usage: topo_dump [--xml FILE | --synthetic DESCRIPTION]\n"
    "       topo_dump --layout HOSTSxRANKS[:block|:round-robin] [--out FILE]\n"
    "       topo_dump --check LAYOUT_FILE\n"
    "       topo_dump --fabric LAYOUT_FILE\n";

int Fail(const Status& status) {
  std::fprintf(stderr, "topo_dump: %s\n", status.ToString().c_str());
  return 1;
}

int PrintTopology(const TopologySource& source) {
  HostTopology topology;
  Status status = DetectHostTopology(source, &topology);
  if (!status.ok()) return Fail(status);
  if (source.kind == TopologySource::Kind::kThisHost) {
    std::printf("host_id %s\n", HostIdentity("").c_str());
  }
  std::fputs(FormatHostTopology(topology).c_str(), stdout);
  return 0;
}

int WriteLayout(const std::string& spec, const std::string& out) {
  Layout layout;
  Status status = LayoutFromSpec(spec, &layout);
  if (!status.ok()) return Fail(status);
  if (out.empty()) {
    std::string text;
    status = FormatLayoutFile(layout, &text);
    if (!status.ok()) return Fail(status);
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  status = WriteLayoutFile(out, layout);
  if (!status.ok()) return Fail(status);
  std::printf("wrote %s: %s (%d ranks)\n", out.c_str(), layout.Describe().c_str(), layout.nranks());
  return 0;
}

int CheckLayout(const std::string& path) {
  Layout layout;
  Status status = ReadLayoutFile(path, &layout);
  if (!status.ok()) return Fail(status);
  std::printf("%s: %s, %d ranks\n", path.c_str(), layout.Describe().c_str(), layout.nranks());
  for (int host = 0; host < layout.num_hosts(); ++host) {
    std::printf("host %d %s ranks", host, layout.HostId(host).c_str());
    for (int rank : layout.RanksOnHost(host)) std::printf(" %d", rank);
    std::printf("\n");
  }
  return 0;
}

int PrintFabric(const std::string& path) {
  Settings settings;
  Status status = Settings::FromEnvironment(&settings);
  if (!status.ok()) return Fail(status);
  Layout layout;
  status = ReadLayoutFile(path, &layout);
  if (!status.ok()) return Fail(status);
  FabricSources sources = FabricSourcesOf(settings);
  sources.topo_file = path;
  Fabric fabric;
  status = ReadFabric(sources, &fabric);
  if (!status.ok()) return Fail(status);
  std::fputs(fabric.Describe().c_str(), stdout);
  const FabricShape shape = fabric.ShapeFor(layout);
  std::printf("cost model on %s: %d NIC(s) a host, racks of %d hosts%s, uplinks %.0f%%\n", layout.Describe().c_str(),
              shape.nics, shape.hosts_per_rack, shape.hosts_per_rack == 0 ? " (none)" : "", shape.uplink_share * 100);
  return 0;
}

int Main(int argc, char** argv) {
  TopologySource source;
  std::string layout_spec, out, check, fabric;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "topo_dump: %s needs a value\n%s", flag.c_str(), kUsage);
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--xml") {
      source.kind = TopologySource::Kind::kXmlFile;
      source.text = value;
    } else if (flag == "--synthetic") {
      source.kind = TopologySource::Kind::kSynthetic;
      source.text = value;
    } else if (flag == "--layout") {
      layout_spec = value;
    } else if (flag == "--out") {
      out = value;
    } else if (flag == "--check") {
      check = value;
    } else if (flag == "--fabric") {
      fabric = value;
    } else {
      std::fprintf(stderr, "topo_dump: unknown flag %s\n%s", flag.c_str(), kUsage);
      return 2;
    }
  }
  const bool describes_machine = source.kind != TopologySource::Kind::kThisHost;
  if ((!layout_spec.empty() + !check.empty() + !fabric.empty() + describes_machine) > 1 || (!out.empty() && layout_spec.empty())) {
    std::fprintf(stderr, "topo_dump: conflicting flags\n%s", kUsage);
    return 2;
  }
  if (!layout_spec.empty()) return WriteLayout(layout_spec, out);
  if (!check.empty()) return CheckLayout(check);
  if (!fabric.empty()) return PrintFabric(fabric);
  return PrintTopology(source);
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::Main(argc, argv); }
