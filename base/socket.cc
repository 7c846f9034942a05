#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tessera {

int SocketAddress::port() const { return ntohs(port_be); }

std::string SocketAddress::ToString() const {
  char buf[INET_ADDRSTRLEN] = {0};
  in_addr a;
  a.s_addr = ip_be;
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(port());
}

sockaddr_in SocketAddress::ToSockaddr() const {
  sockaddr_in sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = ip_be;
  sa.sin_port = port_be;
  return sa;
}

Status SocketAddress::FromHostPort(const std::string& host, int port, SocketAddress* out) {
  if (port < 0 || port > 65535) return InvalidArgument("port " + std::to_string(port) + " out of range");
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  out->ip_be = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  out->port_be = htons(static_cast<uint16_t>(port));
  freeaddrinfo(res);
  return Status::Ok();
}

Status SocketAddress::Parse(const std::string& host_port, SocketAddress* out) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return InvalidArgument("'" + host_port + "' is not host:port");
  }
  const std::string port_text = host_port.substr(colon + 1);
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) {
    return InvalidArgument("'" + host_port + "' has no valid port");
  }
  return FromHostPort(host_port.substr(0, colon), static_cast<int>(port), out);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.Release();
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

Status ChooseLocalAddress(const std::string& ifname, std::string* ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoError("getifaddrs", errno);
  std::string found;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!(it->ifa_flags & IFF_UP)) continue;
    bool loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    if (!ifname.empty() ? ifname != it->ifa_name : loopback) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
    found = buf;
    break;
  }
  freeifaddrs(list);
  if (found.empty() && !ifname.empty()) {
    return InvalidArgument("TESSERA_SOCKET_IFNAME=" + ifname + ": no such interface with an IPv4 address that is up");
  }
  *ip = found.empty() ? "127.0.0.1" : found;
  return Status::Ok();
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return ErrnoError("fcntl(O_NONBLOCK)", errno);
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status SetCongestionControl(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) != 0) {
    return ErrnoError("setsockopt(TCP_CONGESTION, " + name + ")", errno);
  }
  return Status::Ok();
}

Status Listen(const std::string& ip, int port, Socket* out, SocketAddress* bound) {
  SocketAddress want;
  TESSERA_RETURN_IF_ERROR(SocketAddress::FromHostPort(ip, port, &want));
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return ErrnoError("socket", errno);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = want.ToSockaddr();
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoError("bind " + want.ToString(), errno);
  }
  if (::listen(s.fd(), 1024) != 0) return ErrnoError("listen " + want.ToString(), errno);
  TESSERA_RETURN_IF_ERROR(SetNonBlocking(s.fd()));
  socklen_t len = sizeof(sa);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return ErrnoError("getsockname", errno);
  bound->ip_be = sa.sin_addr.s_addr;
  bound->port_be = sa.sin_port;
  *out = std::move(s);
  return Status::Ok();
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
Status WaitFd(int fd, short events, const Deadline& deadline, const char* what) {
  for (;;) {
    int ms = deadline.RemainingMs();
    if (ms == 0) return TimeoutError(std::string(what) + " timed out");
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return ErrnoError(std::string("poll for ") + what, errno);
  }
}

}  // namespace

Status Accept(const Socket& listener, const Deadline& deadline, Socket* out) {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      SetNoDelay(fd);
      *out = Socket(fd);
      return Status::Ok();
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return ErrnoError("accept", errno);
    }
    TESSERA_RETURN_IF_ERROR(WaitFd(listener.fd(), POLLIN, deadline, "accept"));
  }
}

Status Connect(const SocketAddress& to, const Deadline& deadline, Socket* out, bool retry_refused) {
  int backoff_ms = 1;
  for (;;) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) return ErrnoError("socket", errno);
    sockaddr_in sa = to.ToSockaddr();
    int rc = ::connect(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      TESSERA_RETURN_IF_ERROR(WaitFd(s.fd(), POLLOUT, deadline, ("connect to " + to.ToString()).c_str()));
      socklen_t len = sizeof(err);
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      SetNoDelay(s.fd());
      *out = std::move(s);
      return Status::Ok();
    }
    if (err == ECONNRESET || (err == ECONNREFUSED && !retry_refused)) {
      return RemoteError("connect to " + to.ToString() + ": " + std::strerror(err));
    }
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != ENETUNREACH && err != EHOSTUNREACH && err != EAGAIN) {
      return ErrnoError("connect to " + to.ToString(), err);
    }
    if (deadline.Expired()) {
      return TimeoutError("connect to " + to.ToString() + " timed out (last error: " + std::strerror(err) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, deadline.RemainingMs())));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

Status SendSome(int fd, const void* data, size_t len, size_t* moved) {
  *moved = 0;
  for (;;) {
    ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
    if (n >= 0) {
      *moved = static_cast<size_t>(n);
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    if (errno == EPIPE || errno == ECONNRESET) return RemoteError(std::string("connection lost (") + std::strerror(errno) + ")");
    return ErrnoError("send", errno);
  }
}

Status RecvSome(int fd, void* data, size_t len, size_t* moved) {
  *moved = 0;
  for (;;) {
    ssize_t n = ::recv(fd, data, len, 0);
    if (n > 0) {
      *moved = static_cast<size_t>(n);
      return Status::Ok();
    }
    if (n == 0) return RemoteError("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    if (errno == ECONNRESET) return RemoteError("connection reset by peer");
    return ErrnoError("recv", errno);
  }
}

Status SendAll(const Socket& s, const void* data, size_t len, const Deadline& deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    size_t n = 0;
    TESSERA_RETURN_IF_ERROR(SendSome(s.fd(), p, len, &n));
    p += n;
    len -= n;
    if (len > 0 && n == 0) TESSERA_RETURN_IF_ERROR(WaitFd(s.fd(), POLLOUT, deadline, "send"));
  }
  return Status::Ok();
}

Status RecvAll(const Socket& s, void* data, size_t len, const Deadline& deadline) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    size_t n = 0;
    TESSERA_RETURN_IF_ERROR(RecvSome(s.fd(), p, len, &n));
    p += n;
    len -= n;
    if (len > 0 && n == 0) TESSERA_RETURN_IF_ERROR(WaitFd(s.fd(), POLLIN, deadline, "recv"));
  }
  return Status::Ok();
}

}  // namespace tessera
