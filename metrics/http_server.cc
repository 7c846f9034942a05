#include "metrics/http_server.h"

#include <dlfcn.h>
#include <microhttpd.h>

#include <cstring>

namespace tessera {

// The functions of libmicrohttpd that the server calls, from dlsym.
struct HttpServer::Library {
  void* handle = nullptr;
  decltype(&MHD_start_daemon) start_daemon = nullptr;
  decltype(&MHD_stop_daemon) stop_daemon = nullptr;
  decltype(&MHD_get_daemon_info) get_daemon_info = nullptr;
  decltype(&MHD_create_response_from_buffer) create_response = nullptr;
  decltype(&MHD_add_response_header) add_header = nullptr;
  decltype(&MHD_queue_response) queue_response = nullptr;
  decltype(&MHD_destroy_response) destroy_response = nullptr;

  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
  Status Open() {
    handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return SystemError(std::string("metrics server: cannot load ") + kLibrary + " (" + (why ? why : "unknown") +
                         "); install Debian's libmicrohttpd12");
    }
    const char* missing = nullptr;
    if (!Resolve("MHD_start_daemon", &start_daemon)) missing = "MHD_start_daemon";
    if (!Resolve("MHD_stop_daemon", &stop_daemon)) missing = "MHD_stop_daemon";
    if (!Resolve("MHD_get_daemon_info", &get_daemon_info)) missing = "MHD_get_daemon_info";
    if (!Resolve("MHD_create_response_from_buffer", &create_response)) missing = "MHD_create_response_from_buffer";
    if (!Resolve("MHD_add_response_header", &add_header)) missing = "MHD_add_response_header";
    if (!Resolve("MHD_queue_response", &queue_response)) missing = "MHD_queue_response";
    if (!Resolve("MHD_destroy_response", &destroy_response)) missing = "MHD_destroy_response";
    if (missing != nullptr) return SystemError(std::string("metrics server: ") + kLibrary + " has no " + missing);
    return Status::Ok();
  }
  template <typename F>
  bool Resolve(const char* name, F* out) {
    *out = reinterpret_cast<F>(dlsym(handle, name));
    return *out != nullptr;
  }
};

Status HttpServer::Start(int port, HttpHandler handler, std::unique_ptr<HttpServer>* out) {
  if (port < 0 || port > 65535) return InvalidArgument("metrics server: port " + std::to_string(port));
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->library_ = std::make_unique<Library>();
  TESSERA_RETURN_IF_ERROR(s->library_->Open());
  s->handler_ = std::move(handler);
  auto on_request = [](void* self, MHD_Connection* connection, const char* url, const char* method, const char*,
                       const char*, size_t*, void**) -> MHD_Result {
    return static_cast<MHD_Result>(Answer(self, connection, url, method));
  };
  s->daemon_ = s->library_->start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, static_cast<uint16_t>(port), nullptr, nullptr,
                                         on_request, s.get(), MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
                                         MHD_OPTION_CONNECTION_TIMEOUT, kIdleSeconds, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return SystemError("metrics server: cannot listen on port " + std::to_string(port) + " (taken?)");
  }
  const MHD_DaemonInfo* info = s->library_->get_daemon_info(static_cast<MHD_Daemon*>(s->daemon_), MHD_DAEMON_INFO_BIND_PORT);
  s->port_ = info != nullptr ? info->port : port;
  *out = std::move(s);
  return Status::Ok();
}

HttpServer::~HttpServer() {
  if (daemon_ != nullptr) library_->stop_daemon(static_cast<MHD_Daemon*>(daemon_));
}

int HttpServer::Answer(void* self, void* connection, const char* url, const char* method) {
  HttpServer* server = static_cast<HttpServer*>(self);
  const Library& lib = *server->library_;
  HttpReply reply;
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
    reply.status = 405;
    reply.body = "only GET\n";
  } else {
    server->handler_(url != nullptr ? url : "", &reply);
  }
  MHD_Response* response =
      lib.create_response(reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  lib.add_header(response, "Content-Type", reply.content_type.c_str());
  const MHD_Result queued = lib.queue_response(static_cast<MHD_Connection*>(connection), reply.status, response);
  lib.destroy_response(response);
  return queued;
}

}  // namespace tessera
