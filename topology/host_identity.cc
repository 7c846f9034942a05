#include "topology/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace tessera {

std::string HostIdentity(const std::string& override_id) {
  if (!override_id.empty()) return override_id;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) id += "/net:" + std::to_string(st.st_ino);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot >> boot_id) id += "/boot:" + boot_id.substr(0, 8);
  return id;
}

std::vector<LocalRank> LocalRanks(const std::vector<std::string>& hosts, const std::vector<int>& pids, int my_rank) {
  std::vector<LocalRank> local;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] == hosts[my_rank]) local.push_back({static_cast<int>(r), pids[r]});
  }
  return local;
}

}  // namespace tessera
