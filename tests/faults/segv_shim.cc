// A crash where no test hook reaches: LD_PRELOADed into one rank of the fault suite's
// segv_setup case (fault_rank.cc), it makes that process die of a real SIGSEGV (a store
// through a null pointer) inside tessera's shared-memory set-up, without touching the
// library.
//
// FAULT_SEGV_AT=FUNCTION:N picks the moment: the Nth call of FUNCTION (ftruncate, mmap
// or shm_unlink) on a tessera shared-memory segment, that is on a file descriptor that
// is /dev/shm/tessera* (ftruncate, mmap) or a name /tessera* (shm_unlink). ftruncate and
// mmap run first and crash after the call; shm_unlink crashes before it. So
//   ftruncate:1  the own segment exists and has its size, but is not mapped yet;
//   mmap:1       the own segment is mapped but not yet marked ready for the peers;
//   mmap:2       the first peer's segment is being mapped;
//   shm_unlink:1 every local peer has mapped the own segment, whose name is about to be
//                removed: nothing the peers wait for is missing any more.
// UCX, which libtessera.so links, patches mmap when it starts (UCX_MEM_MMAP_HOOK_MODE,
// bistro by default) and so bypasses a preloaded mmap: for mmap:N, run the process with
// UCX_MEM_MMAP_HOOK_MODE=none (fault_rank does).
// Before crashing it writes the wall time (seconds since the epoch) to FAULT_MARK, if
// set, so the suite knows when the survivors could first have known.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace {

enum class Hook { kNone, kFtruncate, kMmap, kShmUnlink };

struct Plan {
  Hook hook = Hook::kNone;
  long nth = 0;
};

Plan ReadPlan() {
  Plan p;
  const char* spec = getenv("FAULT_SEGV_AT");
  if (spec == nullptr) return p;
  const char* colon = strchr(spec, ':');
  if (colon == nullptr) return p;
  const size_t len = static_cast<size_t>(colon - spec);
  if (len == 9 && strncmp(spec, "ftruncate", len) == 0) p.hook = Hook::kFtruncate;
  if (len == 4 && strncmp(spec, "mmap", len) == 0) p.hook = Hook::kMmap;
  if (len == 10 && strncmp(spec, "shm_unlink", len) == 0) p.hook = Hook::kShmUnlink;
  p.nth = strtol(colon + 1, nullptr, 10);
  return p;
}

const Plan& ThePlan() {
  static const Plan plan = ReadPlan();
  return plan;
}

bool IsTesseraSegment(int fd) {
  if (fd < 0) return false;
  char link[64], target[256];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return strncmp(target, "/dev/shm/tessera", 16) == 0;
}

void WriteMark() {
  const char* path = getenv("FAULT_MARK");
  if (path == nullptr) return;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char text[64];
  const int len = snprintf(text, sizeof(text), "%ld.%06ld", static_cast<long>(now.tv_sec), now.tv_nsec / 1000);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, text, static_cast<size_t>(len)) < 0) {
    // Nothing to do: the suite then reports the fault time as unknown.
  }
  close(fd);
}

// Counts a call on a tessera segment; crashes on the planned one.
void Count(Hook hook) {
  static std::atomic<long> calls{0};
  const Plan& plan = ThePlan();
  if (plan.hook != hook || calls.fetch_add(1) + 1 != plan.nth) return;
  WriteMark();
  volatile int* volatile nowhere = nullptr;
  *nowhere = 1;  // SIGSEGV, for real
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int ftruncate(int fd, off_t length) {
  static const auto real = Next<int (*)(int, off_t)>("ftruncate");
  const int rc = real(fd, length);
  if (IsTesseraSegment(fd)) Count(Hook::kFtruncate);
  return rc;
}

void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
  static const auto real = Next<void* (*)(void*, size_t, int, int, int, off_t)>("mmap");
  void* p = real(addr, length, prot, flags, fd, offset);
  if (fd >= 0 && IsTesseraSegment(fd)) Count(Hook::kMmap);
  return p;
}

int shm_unlink(const char* name) {
  static const auto real = Next<int (*)(const char*)>("shm_unlink");
  if (name != nullptr && strncmp(name, "/tessera", 8) == 0) Count(Hook::kShmUnlink);
  return real(name);
}

}  // extern "C"
