#include "topology/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace tessera {

std::string HostIdentity(const std::string& override_id) {
  if (!override_id.empty()) return override_id;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) id += "/net:" + std::to_string(st.st_ino);
  const std::string boot_id = KernelIdentity();
  if (!boot_id.empty()) id += "/boot:" + boot_id.substr(0, 8);
  return id;
}

std::string HostnameOf(const std::string& identity) {
  for (const char* part : {"/net:", "/boot:"}) {
    const size_t at = identity.find(part);
    if (at != std::string::npos) return identity.substr(0, at);
  }
  return identity;
}

std::string KernelIdentity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  boot >> boot_id;
  return boot_id;
}

int RanksOnMyKernel(const std::vector<std::string>& kernels, int my_rank) {
  const std::string& mine = kernels[my_rank];
  if (mine.empty()) return 1;
  return static_cast<int>(std::count(kernels.begin(), kernels.end(), mine));
}

std::vector<LocalRank> LocalRanks(const std::vector<std::string>& hosts, const std::vector<int>& pids, int my_rank) {
  std::vector<LocalRank> local;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] == hosts[my_rank]) local.push_back({static_cast<int>(r), pids[r]});
  }
  return local;
}

}  // namespace tessera
