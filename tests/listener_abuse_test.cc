// A running job's listeners under abuse: while three ranks create a communicator and run
// allreduces over TCP, connections to the rendezvous service, to every rank's TCP
// transport listener and to its diagnosis watch service send garbage, half messages,
// nothing at all, or one byte at a time. The job must not notice: creation and every
// allreduce finish in time with the right values.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"

namespace tessera_test {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 65537;
constexpr int kCalls = 100;

// Holds the abusive connections open until it is destroyed.
class Abuser {
 public:
  // Four connections to 127.0.0.1-or-`ip`:`port`: 200 random bytes then close; the first
  // 16 bytes of nothing valid then silence; silence; one byte every 50 ms for 2 s.
  void Attack(uint32_t ip_be, uint16_t port_be) {
    std::mt19937 gen(port_be);
    std::string garbage(200, '\0');
    for (char& c : garbage) c = static_cast<char>(gen());
    int fd = Connect(ip_be, port_be);
    if (fd >= 0) {
      send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
      close(fd);
    }
    fd = Connect(ip_be, port_be);
    if (fd >= 0) send(fd, garbage.data(), 16, MSG_NOSIGNAL);
    Keep(fd);
    Keep(Connect(ip_be, port_be));
    const int slow = Connect(ip_be, port_be);
    Keep(slow);
    if (slow >= 0) {
      threads_.emplace_back([slow, garbage] {
        for (int i = 0; i < 40; ++i) {
          if (send(slow, &garbage[i], 1, MSG_NOSIGNAL) != 1) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
    }
  }

  ~Abuser() {
    for (std::thread& t : threads_) t.join();
    for (int fd : open_) close(fd);
  }

 private:
  static int Connect(uint32_t ip_be, uint16_t port_be) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ip_be;
    a.sin_port = port_be;
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
  }
  void Keep(int fd) {
    if (fd >= 0) open_.push_back(fd);
  }

  std::vector<int> open_;
  std::vector<std::thread> threads_;
};

// This process's listening TCP sockets, as (ip, port) in network order: its socket
// inodes (/proc/self/fd) matched with the LISTEN rows of /proc/self/net/tcp.
std::vector<std::pair<uint32_t, uint16_t>> OwnListeners() {
  std::set<std::string> inodes;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[64] = {0};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 && std::string(target).rfind("socket:[", 0) == 0) {
        inodes.insert(std::string(target + 8, strlen(target) - 9));
      }
    }
    closedir(d);
  }
  std::vector<std::pair<uint32_t, uint16_t>> out;
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || inodes.count(inode) == 0) continue;  // 0A: LISTEN
    const uint32_t ip = static_cast<uint32_t>(std::stoul(local.substr(0, 8), nullptr, 16));  // as the kernel stores it
    const uint16_t port = htons(static_cast<uint16_t>(std::stoul(local.substr(9), nullptr, 16)));
    out.push_back({ip == 0 ? htonl(INADDR_LOOPBACK) : ip, port});
  }
  return out;
}

TEST(ListenerAbuse, JobFinishesCorrectly) {
  RankOptions opts;
  opts.env["TESSERA_TRANSPORT"] = "tcp";
  opts.env["TESSERA_TIMEOUT_MS"] = "10000";
  auto results = RunRanksRaw(kRanks, [](const RankContext& ctx) {
    RankChecks c;
    Abuser abuser;
    if (ctx.rank == 1) {  // at the rendezvous service, before anyone joins
      tessera::UniqueIdData id;
      if (!tessera::DecodeUniqueId(ctx.ids[0].internal, &id).ok()) return std::string("undecodable id");
      abuser.Attack(id.root.ip_be, id.root.port_be);
    }
    const auto start = std::chrono::steady_clock::now();
    tesseraComm_t comm = nullptr;
    const std::string init = InitComm(ctx, &comm);
    if (!init.empty()) return init;
    c.Expect(SecondsSince(start) < 3.0, "creation took " + std::to_string(SecondsSince(start)) + " s");
    const std::vector<std::pair<uint32_t, uint16_t>> listeners = OwnListeners();
    c.Expect(listeners.size() >= 2, "found " + std::to_string(listeners.size()) + " listeners of this rank");
    for (const auto& [ip, port] : listeners) abuser.Attack(ip, port);
    double slowest = 0;
    for (int i = 0; i < kCalls && c.str().empty(); ++i) {
      std::vector<float> buf(kCount, static_cast<float>(ctx.rank + i));
      const auto t = std::chrono::steady_clock::now();
      const tesseraResult_t r = tesseraAllReduce(buf.data(), buf.data(), kCount, tesseraFloat32, tesseraSum, comm,
                                                 nullptr);
      slowest = std::max(slowest, SecondsSince(t));
      c.ExpectCode(r, tesseraSuccess, "allreduce " + std::to_string(i) + ": " + LastError(comm));
      const float want = static_cast<float>(kRanks * i + (kRanks * (kRanks - 1)) / 2);
      c.Expect(buf[0] == want && buf[kCount - 1] == want, "allreduce " + std::to_string(i) + " gave " +
                                                              std::to_string(buf[0]) + ", want " + std::to_string(want));
    }
    c.Expect(slowest < 1.0, "the slowest allreduce took " + std::to_string(slowest) + " s");
    printf("[ info ] rank %d: %zu listeners abused; creation %.3f s; slowest allreduce %.4f s\n", ctx.rank,
           listeners.size(), SecondsSince(start), slowest);
    c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "tesseraCommDestroy");
    return c.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
