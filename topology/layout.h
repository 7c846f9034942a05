// The layout of a communicator: which of its ranks share a host. Built from each rank's
// host identity (the strings the rendezvous hands out, indexed by rank), so it is a pure
// value: the same vector gives the same layout on every rank.
//
// Hosts are numbered in order of first appearance by rank (rank 0's host is host 0).
// A rank's local rank is its position among the ranks of its host, in rank order.
//
// A layout can also be written to a layout file and read back, or generated ("4x2": 4
// hosts of 2 ranks). A rank that takes its host identity from a layout file
// (HostIdFromLayoutFile) pretends to be on the host the file says, so a layout of many
// hosts is emulated on one machine. The file format is in docs/topology.md:
//
//   tessera-layout 1
//   # one line per host: its name, then its ranks
//   host0 0 1
//   host1 2 3
//
// Lines that begin with `fabric` describe what lies above the hosts (fabric.h); the
// layout skips them, so no host is named `fabric`.
#ifndef TESSERA_TOPOLOGY_LAYOUT_H_
#define TESSERA_TOPOLOGY_LAYOUT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

// Host names in layout files are at most this long, so that they fit the host field of
// the rendezvous (128 bytes with its terminating zero).
constexpr size_t kMaxLayoutHostNameBytes = 127;
// A layout file or generated layout holds at most this many ranks.
constexpr int kMaxLayoutRanks = 1 << 20;

// An immutable value once built: its const queries are safe from any thread.
class Layout {
 public:
  // An empty layout (no ranks, no hosts). Queries on it return -1 or empty lists.
  Layout() = default;

  // Builds the layout of host_id_by_rank.size() ranks. InvalidArgument when the vector
  // is empty or an id is empty.
  static Status FromHostIds(const std::vector<std::string>& host_id_by_rank, Layout* out);

  int nranks() const { return static_cast<int>(host_of_rank_.size()); }
  int num_hosts() const { return static_cast<int>(ranks_of_host_.size()); }

  // Queries on a rank return -1 when the rank is out of [0, nranks()); queries on a
  // host return -1 / "" / an empty list when the host is out of [0, num_hosts()).
  int HostOf(int rank) const;
  int LocalRank(int rank) const;  // 0 .. LocalSize(rank) - 1
  int LocalSize(int rank) const;  // number of ranks on rank's host, itself included
  const std::vector<int>& RanksOnHost(int host) const;  // ascending
  const std::string& HostId(int host) const;            // the identity it was built from
  const std::vector<std::string>& host_id_by_rank() const { return host_id_by_rank_; }
  const std::vector<int>& host_of_rank() const { return host_of_rank_; }  // HostOf, by rank

  // The rank with local rank `local_rank` on `host`, or -1 if there is none.
  int RankAt(int host, int local_rank) const;
  // The ranks with local rank `local_rank`, one per host that has one, in host order:
  // in a regular layout, the group a rank talks to across hosts in a hierarchical
  // schedule. Empty if no host has that many ranks.
  std::vector<int> RanksWithLocalRank(int local_rank) const;

  // True when every host has the same number of ranks (a layout of one host is regular;
  // an empty layout is not).
  bool IsRegular() const;
  // Ranks per host of a regular layout; 0 when the layout is not regular.
  int RanksPerHost() const;

  // "2 hosts x 2 ranks" or "3 hosts, irregular (3+1+2 ranks)".
  std::string Describe() const;

  bool operator==(const Layout& other) const { return host_id_by_rank_ == other.host_id_by_rank_; }
  bool operator!=(const Layout& other) const { return !(*this == other); }

 private:
  std::vector<std::string> host_id_by_rank_;
  std::vector<int> host_of_rank_;
  std::vector<int> local_rank_of_rank_;
  std::vector<std::vector<int>> ranks_of_host_;
  std::vector<std::string> host_ids_;  // indexed by host
};

// How ranks are placed on the hosts of a generated layout.
enum class Placement {
  kBlock,       // ranks 0..R-1 on host 0, R..2R-1 on host 1, ... (mpirun's --map-by slot)
  kRoundRobin,  // rank r on host r % hosts (mpirun's --map-by node)
};

// Generates `hosts` hosts named "host0", "host1", ... with `ranks_per_host` ranks each.
// InvalidArgument unless both are >= 1 and the product is at most kMaxLayoutRanks.
Status MakeGridLayout(int hosts, int ranks_per_host, Placement placement, Layout* out);

// Parses a spec "HxR" (H hosts x R ranks, block placement), optionally followed by
// ":block" or ":round-robin": "4x2", "4x2:round-robin". InvalidArgument otherwise.
Status LayoutFromSpec(const std::string& spec, Layout* out);

// Pure: the layout file text of `layout` (hosts in host order, each line its host id and
// its ranks). InvalidArgument if the layout is empty or a host id cannot be written
// (longer than kMaxLayoutHostNameBytes, or containing whitespace or '#').
Status FormatLayoutFile(const Layout& layout, std::string* text);

// Pure: parses layout file text. `source` names the file in error messages. Malformed
// text gives InvalidArgument naming the source and the line ("layouts/4x2.txt line 3:
// rank 2 is already on host 'host0' (line 2)").
Status ParseLayoutFile(const std::string& text, const std::string& source, Layout* out);

// Write or read a layout file. SystemError when the file cannot be written or read.
Status WriteLayoutFile(const std::string& path, const Layout& layout);
Status ReadLayoutFile(const std::string& path, Layout* out);

// What a rank needs when the TESSERA_TOPO_FILE setting is set: reads the file at `path`
// and returns the host name it gives `rank`, to be used as the rank's host identity
// instead of the detected one. InvalidArgument if the file is malformed, if it places a
// number of ranks different from `nranks`, or if `rank` is out of [0, nranks).
Status HostIdFromLayoutFile(const std::string& path, int rank, int nranks, std::string* host_id);

}  // namespace tessera

#endif  // TESSERA_TOPOLOGY_LAYOUT_H_
