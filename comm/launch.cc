#include "comm/launch.h"

#include <unistd.h>

#include "base/hash.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/pmix_share.h"
#include "bootstrap/rendezvous.h"
#include "topology/host_identity.h"

namespace tessera {
namespace {

// Every rank derives the same secret from what they all know, when no unique id can be
// handed around (a fixed rendezvous address).
uint64_t SharedSecret(const LaunchInfo& li) {
  const std::string text = li.job_key + "|" + li.root_host + ":" + std::to_string(li.root_port) + "|" +
                           std::to_string(li.size);
  const uint64_t h = Fnv1a(text);
  return h == 0 ? 1 : h;
}

}  // namespace

Status CreateFromLauncher(const Settings& settings, std::unique_ptr<Communicator>* out) {
  LaunchInfo li;
  TESSERA_RETURN_IF_ERROR(DetectLaunch(nullptr, settings.bootstrap_addr, &li));
  const std::string who = std::string(LauncherName(li.launcher)) + " rank " + std::to_string(li.rank) + " of " +
                          std::to_string(li.size);
  UniqueIdData id;
  if (!li.root_host.empty()) {
    // A known address: rank 0 serves the rendezvous there, everyone connects to it.
    id.secret = SharedSecret(li);
    TESSERA_RETURN_IF_ERROR(SocketAddress::FromHostPort(li.root_host, li.root_port, &id.root).Annotate(who));
    id.root_rank = 0;
    id.root_host = li.root_host;
    if (li.rank == 0) {
      SocketAddress bound;
      TESSERA_RETURN_IF_ERROR(StartRendezvous("0.0.0.0", li.root_port, id.secret, settings.timeout_ms, settings.bootstrap_fanout, &bound)
                                  .Annotate(who + ": serving the rendezvous on port " + std::to_string(li.root_port)));
    }
  } else if (li.use_pmix || li.size == 1) {
    // Rank 0 creates a unique id; the launcher's PMIx server hands it to everyone.
    std::string blob;
    if (li.rank == 0) {
      TESSERA_RETURN_IF_ERROR(NewUniqueId(settings, 0, HostIdentity(settings.host_id), &id).Annotate(who));
      blob.assign(kUniqueIdBytes, '\0');
      EncodeUniqueId(id, &blob[0]);
    }
    if (li.size > 1) {
      TESSERA_RETURN_IF_ERROR(PmixShareFromRankZero(li.rank, &blob, settings.timeout_ms).Annotate(who));
      if (blob.size() != kUniqueIdBytes) return InternalError(who + ": PMIx delivered a unique id of the wrong size");
      TESSERA_RETURN_IF_ERROR(DecodeUniqueId(blob.data(), &id).Annotate(who));
    }
  } else {
    return InvalidUsage(who + ": no rendezvous found: the launcher offers no PMIx server; set "
                        "TESSERA_BOOTSTRAP_ADDR=host:port (or MASTER_ADDR and MASTER_PORT) to an address of rank 0's host");
  }
  return Communicator::Create(settings, id, li.size, li.rank, out).Annotate(who);
}

}  // namespace tessera
