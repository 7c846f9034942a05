// HttpServer: a small HTTP/1.1 server for the metrics pages, on GNU libmicrohttpd
// (Debian's libmicrohttpd12), which parses the requests and runs one thread of its own
// that polls every connection. The library is opened with dlopen when a server starts,
// so a process that serves no metrics neither loads nor needs it.
//
// Every GET (and HEAD) is answered by the handler, on the server's thread; other
// methods get 405. At most kMaxConnections at once, each closed after kIdleSeconds
// without a request.
#ifndef TESSERA_METRICS_HTTP_SERVER_H_
#define TESSERA_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"

namespace tessera {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
// Called with the request's path ("/metrics"; the query string is not part of it).
using HttpHandler = std::function<void(const std::string& path, HttpReply* reply)>;

class HttpServer {
 public:
  static constexpr unsigned kMaxConnections = 16;
  static constexpr unsigned kIdleSeconds = 10;
  // The library's file name, opened by Start.
  static constexpr const char* kLibrary = "libmicrohttpd.so.12";

  // Listens on every address at `port` (0: the kernel chooses; port() says which).
  // SystemError naming the port when it cannot (taken, no permission), or naming the
  // library when it is not installed.
  static Status Start(int port, HttpHandler handler, std::unique_ptr<HttpServer>* out);
  ~HttpServer();  // stops the thread and closes every connection
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct Library;
  HttpServer() = default;
  static int Answer(void* self, void* connection, const char* url, const char* method);

  std::unique_ptr<Library> library_;
  void* daemon_ = nullptr;
  HttpHandler handler_;
  int port_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_METRICS_HTTP_SERVER_H_
