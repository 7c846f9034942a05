// The metrics server over real sockets: pages by path, 404 and 405, many clients, and
// a port that is taken.
#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "metrics/metrics_endpoint.h"

namespace tessera {
namespace {

// Sends `request` to 127.0.0.1:port and returns everything the server sent back within
// `limit_s` seconds.
std::string Ask(int port, const std::string& request, int limit_s = 5) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{limit_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    shutdown(fd, SHUT_WR);  // nothing more is coming
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return reply;
}

std::string Get(int port, const std::string& path) {
  return Ask(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

TEST(HttpServer, AnswersByPathAndRefusesOtherMethods) {
  std::unique_ptr<HttpServer> server;
  auto handler = [](const std::string& path, HttpReply* reply) {
    if (path == "/hello") {
      reply->body = "hello\n";
    } else {
      reply->status = 404;
    }
  };
  ASSERT_TRUE(HttpServer::Start(0, handler, &server).ok());
  ASSERT_GT(server->port(), 0);
  const std::string ok = Get(server->port(), "/hello?x=1");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\nhello\n"), std::string::npos) << ok;
  EXPECT_EQ(Get(server->port(), "/nothing").rfind("HTTP/1.1 404", 0), 0u);
  const std::string post =
      Ask(server->port(), "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  // Garbage is answered with an error, or with nothing until the connection's idle
  // timeout (kIdleSeconds) closes it, and the server goes on.
  Ask(server->port(), std::string("\x00\xff GET\r\n\r\n", 10), 1);
  Ask(server->port(), "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\n\r\n");
  std::vector<std::thread> clients;
  std::vector<std::string> replies(8);
  for (int i = 0; i < 8; ++i) clients.emplace_back([&, i] { replies[i] = Get(server->port(), "/hello"); });
  for (std::thread& t : clients) t.join();
  for (const std::string& r : replies) EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST(HttpServer, APortInUseIsAnErrorNamingIt) {
  std::unique_ptr<HttpServer> first, second;
  ASSERT_TRUE(HttpServer::Start(0, [](const std::string&, HttpReply*) {}, &first).ok());
  const Status s = HttpServer::Start(first->port(), [](const std::string&, HttpReply*) {}, &second);
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_NE(s.message().find(std::to_string(first->port())), std::string::npos) << s.message();
}

// The endpoint serves every joined source; the last to leave stops the server.
TEST(MetricsEndpoint, ServesEveryJoinedSource) {
  std::unique_ptr<MetricsEndpoint> a, b;
  auto source = [](int rank) {
    return [rank] {
      HealthSnapshot h;
      h.rank = rank;
      h.comm_id = static_cast<uint64_t>(rank) + 1;
      return h;
    };
  };
  ASSERT_TRUE(MetricsEndpoint::Join(0, source(3), &a).ok());
  ASSERT_TRUE(MetricsEndpoint::Join(12345, source(5), &b).ok());  // joins the running server
  EXPECT_EQ(a->port(), b->port());
  const std::string page = Get(a->port(), "/metrics");
  EXPECT_NE(page.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << page;
  EXPECT_NE(page.find("tessera_info{comm=\"0000000000000004\",rank=\"3\""), std::string::npos) << page;
  EXPECT_NE(page.find("tessera_info{comm=\"0000000000000006\",rank=\"5\""), std::string::npos) << page;
  EXPECT_NE(Get(a->port(), "/health").find("\"rank\": 5"), std::string::npos);
  const int port = a->port();
  a.reset();
  EXPECT_EQ(Get(port, "/metrics").find("rank=\"3\""), std::string::npos);
  b.reset();
  EXPECT_EQ(Get(port, "/metrics"), "");  // stopped: refused
}

}  // namespace
}  // namespace tessera
