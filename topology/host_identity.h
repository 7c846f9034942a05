// Which host a rank runs on. Two ranks with the same host identity can share memory;
// ranks on different hosts talk over the network. The identity is the hostname, the
// network namespace and the boot id, so each emulated host of tools/ (a network
// namespace with its own hostname) counts as a host of its own. TESSERA_HOST_ID overrides.
#ifndef TESSERA_TOPOLOGY_HOST_IDENTITY_H_
#define TESSERA_TOPOLOGY_HOST_IDENTITY_H_

#include <string>

namespace tessera {

// `override_id` is the TESSERA_HOST_ID setting ("" = detect).
std::string HostIdentity(const std::string& override_id);

}  // namespace tessera

#endif  // TESSERA_TOPOLOGY_HOST_IDENTITY_H_
