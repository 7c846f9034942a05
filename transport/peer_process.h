// The process of a peer on this host, watched through a pidfd (Linux 5.3+): how the
// backends whose own signals can miss a peer's death (a shared-memory ring that only
// fills up, UCX's shared-memory transports whose keepalive cannot get through a full
// FIFO) notice it within one peer check of the exchange engine.
#ifndef TESSERA_TRANSPORT_PEER_PROCESS_H_
#define TESSERA_TRANSPORT_PEER_PROCESS_H_

namespace tessera {

// What OpenPeerPidfd returns for a process that no longer exists.
constexpr int kPeerGone = -2;

// A pidfd for `pid` (the caller closes it); kPeerGone when the process no longer
// exists, -1 when pidfds are not available (then death is noticed by timeouts only).
int OpenPeerPidfd(int pid);

// Whether the process behind `pidfd` (as OpenPeerPidfd returned it) has exited. Never
// blocks.
bool PeerExited(int pidfd);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_PEER_PROCESS_H_
