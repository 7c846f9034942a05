#include "transport/peer_process.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace tessera {

int OpenPeerPidfd(int pid) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno == ESRCH) return kPeerGone;
  return fd;
}

bool PeerExited(int pidfd) {
  if (pidfd == kPeerGone) return true;
  if (pidfd < 0) return false;
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace tessera
