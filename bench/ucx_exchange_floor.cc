// ucx_exchange_floor: what UCX alone takes for the exchange a 2-rank sendrecv (or one
// step of recursive doubling) makes: two processes on this host, each sending S bytes
// to the other and receiving S bytes, with nothing of tessera around it (one tagged
// send and one tagged receive, contiguous, full tag mask, polling the worker). The
// floor under any UCX link, to set beside sendrecv_perf over TESSERA_TRANSPORT=ucx and
// =shm (docs/performance.md#ucx).
//   bazel build //bench:ucx_exchange_floor && bazel-bin/bench/ucx_exchange_floor [-b 8] [-e 4M] [-f 8] [-n 10000]
// Across hosts (emulated: tools/cluster), one process per host, the first listening:
//   cluster.sh exec --host 1 -- ucx_exchange_floor --listen 5555 [flags] &
//   cluster.sh exec --host 2 -- ucx_exchange_floor --connect 10.99.0.1:5555 [flags]
// UCX reads its own variables (UCX_TLS, UCX_RNDV_THRESH, ...). `--as-link LIST` sets up
// UCX as tessera's UCX links do, one setting at a time (LIST: comma-separated, or all):
// wakeup (UCP_FEATURE_WAKEUP), serialized (UCS_THREAD_MODE_SERIALIZED), peer
// (UCP_ERR_HANDLING_MODE_PEER on the endpoint, with shared memory and cma allowed under
// it, as the link allows them), keepalive (a 1 s keepalive interval).
// Prints one row per size: bytes, microseconds per exchange (the slower process's
// average), from the first process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/perf_options.h"

namespace {

struct Flags {
  size_t begin = 8, end = 4 << 20, factor = 8;
  long iters = 10000;
  int listen_port = 0;   // --listen: this process is rank 0 of two on different hosts
  std::string connect;   // --connect host:port: this process is rank 1
  // --as-link: the UCX link's settings taken on.
  bool wakeup = false, serialized = false, peer_errors = false, keepalive = false;
};

bool ParseAsLink(const std::string& list, Flags* f) {
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    const bool all = item == "all";
    if (!all && item != "wakeup" && item != "serialized" && item != "peer" && item != "keepalive") return false;
    f->wakeup |= all || item == "wakeup";
    f->serialized |= all || item == "serialized";
    f->peer_errors |= all || item == "peer";
    f->keepalive |= all || item == "keepalive";
    at = comma + 1;
  }
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "-b") ok = tessera_bench::ParseByteSize(v, &f->begin);
    else if (k == "-e") ok = tessera_bench::ParseByteSize(v, &f->end);
    else if (k == "-f") f->factor = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "-n") f->iters = std::atol(v.c_str());
    else if (k == "--listen") f->listen_port = std::atoi(v.c_str());
    else if (k == "--connect") f->connect = v;
    else if (k == "--as-link") ok = ParseAsLink(v, f);
    else ok = false;
    if (!ok) return false;
  }
  return f->begin > 0 && f->factor > 1 && f->iters > 0;
}

bool WriteAll(int fd, const void* p, size_t n) {
  return write(fd, p, n) == static_cast<ssize_t>(n);  // a socketpair takes a few hundred bytes at once
}

bool ReadAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// Polls until the request (null: done at once) completes; false on an error.
bool Finish(ucp_worker_h worker, void* req) {
  if (req == nullptr) return true;
  if (UCS_PTR_IS_ERR(req)) return false;
  ucs_status_t s;
  while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(req);
  return s == UCS_OK;
}

void IgnoreEndpointError(void*, ucp_ep_h, ucs_status_t) {}

// One process: sets up UCX, swaps worker addresses over `fd`, runs every size. Writes
// each size's microseconds per exchange to `fd` (rank 1) or returns them (rank 0).
int RunRank(int rank, int fd, const Flags& flags, std::vector<double>* us) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return 2;
  if (flags.keepalive) ucp_config_modify(config, "KEEPALIVE_INTERVAL", "1s");
  if (flags.peer_errors) {  // as the link: else one host falls back to TCP loopback
    ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
    ucp_config_modify(config, "MEMORY_INVALIDATE", "y");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | (flags.wakeup ? UCP_FEATURE_WAKEUP : 0);
  ucp_context_h context;
  const ucs_status_t init = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (init != UCS_OK) return 2;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = flags.serialized ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker;
  if (ucp_worker_create(context, &wp, &worker) != UCS_OK) return 2;
  ucp_address_t* address;
  size_t address_len;
  if (ucp_worker_get_address(worker, &address, &address_len) != UCS_OK) return 2;
  uint64_t len = address_len, peer_len = 0;
  std::vector<char> peer_address;
  if (!WriteAll(fd, &len, sizeof(len)) || !WriteAll(fd, address, address_len) ||
      !ReadAll(fd, &peer_len, sizeof(peer_len))) return 2;
  peer_address.resize(peer_len);
  if (!ReadAll(fd, peer_address.data(), peer_len)) return 2;
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  if (flags.peer_errors) {
    ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = IgnoreEndpointError;
  }
  ucp_ep_h ep;
  if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) return 2;

  std::vector<char> send(flags.end, static_cast<char>(rank)), recv(flags.end);
  for (size_t size = flags.begin; size <= flags.end; size *= flags.factor) {
    auto exchange = [&] {
      ucp_request_param_t rp{};
      void* r = ucp_tag_recv_nbx(worker, recv.data(), size, 1, ~uint64_t{0}, &rp);
      ucp_request_param_t sp{};
      void* s = ucp_tag_send_nbx(ep, send.data(), size, 1, &sp);
      return Finish(worker, s) && Finish(worker, r);
    };
    char token = 0;
    for (long i = 0; i < flags.iters / 10 + 10; ++i) {
      if (!exchange()) return 3;
    }
    // Both start timing together.
    if (!WriteAll(fd, &token, 1) || !ReadAll(fd, &token, 1)) return 2;
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < flags.iters; ++i) {
      if (!exchange()) return 3;
    }
    const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    us->push_back(t / flags.iters);
  }
  ucp_worker_release_address(worker, address);
  void* close = ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH);
  if (UCS_PTR_IS_PTR(close)) {
    while (ucp_request_check_status(close) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(close);
  }
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
  return 0;
}

// The socket to the other process on another host: rank 0 accepts on the port, rank 1
// connects to host:port (retrying for 10 s while rank 0 starts); -1 on failure.
int HostSocket(const Flags& flags) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (flags.listen_port > 0) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    addr.sin_port = htons(static_cast<uint16_t>(flags.listen_port));
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool listening =
        bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 1) == 0;
    const int peer = listening ? accept(fd, nullptr, nullptr) : -1;
    close(fd);
    return peer;
  }
  const size_t colon = flags.connect.rfind(':');
  const bool parsed =
      colon != std::string::npos && inet_pton(AF_INET, flags.connect.substr(0, colon).c_str(), &addr.sin_addr) == 1;
  if (parsed) {
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(flags.connect.c_str() + colon + 1)));
    for (int tries = 0; tries < 100; ++tries) {
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
      usleep(100000);
    }
  }
  close(fd);
  return -1;
}

void PrintRows(const Flags& flags, const std::vector<double>& us, const std::vector<double>& theirs) {
  std::printf("# UCX alone: 2 processes, each sends and receives S bytes per exchange\n");
  std::printf("%12s %12s\n", "bytes", "us/exchange");
  size_t size = flags.begin;
  for (size_t i = 0; i < us.size(); ++i, size *= flags.factor) {
    std::printf("%12zu %12.3f\n", size, std::max(us[i], theirs[i]));
  }
}

// One process of two on different hosts.
int RunOnHost(const Flags& flags) {
  const int fd = HostSocket(flags);
  if (fd < 0) {
    std::fprintf(stderr, "ucx_exchange_floor: no connection to the other host\n");
    return 2;
  }
  const int rank = flags.listen_port > 0 ? 0 : 1;
  std::vector<double> us;
  int rc = RunRank(rank, fd, flags, &us);
  if (rc == 0 && rank == 1 && !WriteAll(fd, us.data(), us.size() * sizeof(double))) rc = 2;
  std::vector<double> theirs(us.size());
  if (rc == 0 && rank == 0 && !ReadAll(fd, theirs.data(), theirs.size() * sizeof(double))) rc = 2;
  close(fd);
  if (rc != 0) {
    std::fprintf(stderr, "ucx_exchange_floor: rank %d failed (%d)\n", rank, rc);
    return rc;
  }
  if (rank == 0) PrintRows(flags, us, theirs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: %s [-b bytes] [-e bytes] [-f factor] [-n iterations] [--listen port | --connect host:port]"
                 " [--as-link all|wakeup,serialized,peer,keepalive] (sizes take K, M and G)\n",
                 argv[0]);
    return 1;
  }
  if (flags.listen_port > 0 || !flags.connect.empty()) return RunOnHost(flags);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 2;
  const pid_t child = fork();
  if (child < 0) return 2;
  std::vector<double> us;
  if (child == 0) {
    close(fds[0]);
    const int rc = RunRank(1, fds[1], flags, &us);
    if (rc == 0 && !WriteAll(fds[1], us.data(), us.size() * sizeof(double))) return 2;
    _exit(rc);
  }
  close(fds[1]);
  const int rc = RunRank(0, fds[0], flags, &us);
  std::vector<double> theirs(us.size());
  const bool got = rc == 0 && ReadAll(fds[0], theirs.data(), theirs.size() * sizeof(double));
  int status = 0;
  waitpid(child, &status, 0);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ucx_exchange_floor: a process failed (rank 0: %d, rank 1 status %d)\n", rc, status);
    return 2;
  }
  PrintRows(flags, us, theirs);
  return 0;
}
