// TCP sockets with deadlines: the OS-facing layer shared by the bootstrap and the TCP
// transport. IPv4 only. Every function that can block takes a Deadline; sockets are
// non-blocking and waits use poll(2), so nothing here can hang past its deadline.
#ifndef TESSERA_BASE_SOCKET_H_
#define TESSERA_BASE_SOCKET_H_

#include <netinet/in.h>

#include <cstddef>
#include <string>

#include "base/deadline.h"
#include "base/status.h"

namespace tessera {

// An IPv4 address and port, stored in network byte order (fits in a unique id).
struct SocketAddress {
  uint32_t ip_be = 0;
  uint16_t port_be = 0;

  int port() const;
  std::string ToString() const;  // "a.b.c.d:port"
  sockaddr_in ToSockaddr() const;
  // Parses "host:port" (host by name or dotted quad, resolved to IPv4).
  static Status Parse(const std::string& host_port, SocketAddress* out);
  static Status FromHostPort(const std::string& host, int port, SocketAddress* out);
};

// Owns a file descriptor; closes it on destruction. Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.Release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { int fd = fd_; fd_ = -1; return fd; }
  void Close();

 private:
  int fd_ = -1;
};

// The IPv4 address ranks should listen on and advertise: that of `ifname` when given,
// else the first interface that is up and not loopback, else 127.0.0.1.
Status ChooseLocalAddress(const std::string& ifname, std::string* ip);

// Binds a non-blocking listening socket on ip:port (port 0 = any free port) and reports
// the address actually bound.
Status Listen(const std::string& ip, int port, Socket* out, SocketAddress* bound);

// Accepts one connection; InvalidUsage-free: Timeout when none arrives by the deadline.
Status Accept(const Socket& listener, const Deadline& deadline, Socket* out);

// Connects by the deadline. With retry_refused, a refused connection is retried (the
// peer may not listen yet, e.g. a rendezvous still starting); without it, a refusal
// is a RemoteError at once (the peer listened before and is gone).
Status Connect(const SocketAddress& to, const Deadline& deadline, Socket* out, bool retry_refused = true);

// Sends / receives exactly len bytes. A closed connection is a RemoteError.
Status SendAll(const Socket& s, const void* data, size_t len, const Deadline& deadline);
Status RecvAll(const Socket& s, void* data, size_t len, const Deadline& deadline);

// One non-blocking attempt: the number of bytes moved (0 when the call would block).
// Peer closure and errors are reported as Status.
Status SendSome(int fd, const void* data, size_t len, size_t* moved);
Status RecvSome(int fd, void* data, size_t len, size_t* moved);

Status SetNonBlocking(int fd);
void SetNoDelay(int fd);
// setsockopt(TCP_CONGESTION): the congestion control of the socket's sending side.
// SystemError naming the algorithm when the kernel lacks it or refuses it.
Status SetCongestionControl(int fd, const std::string& name);

}  // namespace tessera

#endif  // TESSERA_BASE_SOCKET_H_
