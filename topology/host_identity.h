// Which host a rank runs on. Two ranks with the same host identity can share memory;
// ranks on different hosts talk over the network. The identity is the hostname, the
// network namespace and the boot id, so each emulated host of tools/ (a network
// namespace with its own hostname) counts as a host of its own. TESSERA_HOST_ID overrides.
#ifndef TESSERA_TOPOLOGY_HOST_IDENTITY_H_
#define TESSERA_TOPOLOGY_HOST_IDENTITY_H_

#include <string>
#include <vector>

namespace tessera {

// `override_id` is the TESSERA_HOST_ID setting ("" = detect): else
// "<hostname>/net:<namespace inode>/boot:<boot id, 8 hex digits>".
std::string HostIdentity(const std::string& override_id);

// What errors and warnings call a host: the hostname of an identity that HostIdentity
// detected (the rest tells hosts apart, and belongs in debug lines only); an identity
// given by TESSERA_HOST_ID or a layout file, as it is.
std::string HostnameOf(const std::string& identity);

// A rank on the same host as this one (this one included).
struct LocalRank {
  int rank;
  int pid;
};
// The ranks whose host identity equals my_rank's, in rank order. `hosts` and `pids`
// are indexed by rank.
std::vector<LocalRank> LocalRanks(const std::vector<std::string>& hosts, const std::vector<int>& pids, int my_rank);

// The kernel this process runs on (its boot id), "" when it cannot be read. Ranks on
// one kernel share its cores even where the network sees different hosts: the emulated
// hosts of tools/cluster, or containers of one machine. TESSERA_HOST_ID does not change it.
std::string KernelIdentity();
// How many ranks run on my_rank's kernel (`kernels` indexed by rank, KernelIdentity's);
// 1 when my_rank's is "" (unknown: no rank is counted with it).
int RanksOnMyKernel(const std::vector<std::string>& kernels, int my_rank);

}  // namespace tessera

#endif  // TESSERA_TOPOLOGY_HOST_IDENTITY_H_
