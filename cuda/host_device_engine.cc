// HostDeviceEngine (host_device_engine.h): host memory and host reducers behind the
// DeviceEngine interface, with the same refusals a GPU would make.
#include "cuda/host_device_engine.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "elementwise/elementwise.h"

namespace tessera {

// Address ranges the engine may touch: its allocations, exports and mappings.
struct HostDeviceEngine::Ranges {
  mutable std::mutex mu;
  std::map<uintptr_t, size_t> by_start;

  void Add(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    by_start[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  void Remove(const void* p) {
    std::lock_guard<std::mutex> lock(mu);
    by_start.erase(reinterpret_cast<uintptr_t>(p));
  }
  bool Contains(const void* p, size_t bytes) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu);
    auto it = by_start.upper_bound(a);
    if (it == by_start.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && bytes <= it->second - (a - it->first);
  }
};

namespace {

using Ranges = HostDeviceEngine::Ranges;

std::string Hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

Status MapObject(int fd, size_t bytes, const std::string& name, void** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return ErrnoError("mmap " + name, errno);
  *out = p;
  return Status::Ok();
}

class HostExported : public ExportedMemory {
 public:
  HostExported(std::shared_ptr<Ranges> ranges, std::string name, void* base, size_t bytes)
      : ranges_(std::move(ranges)), name_(std::move(name)), base_(base), bytes_(bytes),
        record_(name_ + " " + std::to_string(bytes)) {
    ranges_->Add(base_, bytes_);
  }
  ~HostExported() override {
    PeerMapped();
    ranges_->Remove(base_);
    munmap(base_, bytes_);
  }
  void* data() const override { return base_; }
  size_t bytes() const override { return bytes_; }
  const std::string& record() const override { return record_; }
  void PeerMapped() override {
    if (!unlinked_) shm_unlink(name_.c_str());
    unlinked_ = true;
  }

 private:
  std::shared_ptr<Ranges> ranges_;
  const std::string name_;
  void* const base_;
  const size_t bytes_;
  const std::string record_;
  bool unlinked_ = false;
};

class HostMapped : public MappedMemory {
 public:
  HostMapped(std::shared_ptr<Ranges> ranges, void* base, size_t bytes)
      : ranges_(std::move(ranges)), base_(base), bytes_(bytes) {
    ranges_->Add(base_, bytes_);
  }
  ~HostMapped() override {
    ranges_->Remove(base_);
    munmap(base_, bytes_);
  }
  void* data() const override { return base_; }
  size_t bytes() const override { return bytes_; }

 private:
  std::shared_ptr<Ranges> ranges_;
  void* const base_;
  const size_t bytes_;
};

// A stream: work waits in order until a Done call that completes its ticket.
class HostStream : public DeviceStream {
 public:
  HostStream(std::shared_ptr<Ranges> ranges, int polls_before_done)
      : ranges_(std::move(ranges)), polls_before_done_(polls_before_done) {}

  Status Copy(void* dst, const void* src, size_t bytes) override {
    TESSERA_RETURN_IF_ERROR(Check(dst, bytes, "copy destination"));
    TESSERA_RETURN_IF_ERROR(Check(src, bytes, "copy source"));
    Enqueue([=] { std::memcpy(dst, src, bytes); });
    return Status::Ok();
  }

  Status Reduce(const Reducer& r, void* dst, const void* a, const void* b, size_t count) override {
    if (!r.typed || r.fn == nullptr) {
      return InvalidArgument("host device engine: a reducer without its type and operator (Reducer::typed)");
    }
    if (r.elem_size != SizeOf(r.type)) {
      return InvalidArgument(std::string("host device engine: reducer for ") + DataTypeName(r.type) + " has " +
                             std::to_string(r.elem_size) + "-byte elements");
    }
    const size_t bytes = count * r.elem_size;
    TESSERA_RETURN_IF_ERROR(Check(dst, bytes, "reduce destination"));
    TESSERA_RETURN_IF_ERROR(Check(a, bytes, "reduce operand a"));
    TESSERA_RETURN_IF_ERROR(Check(b, bytes, "reduce operand b"));
    auto fn = r.fn;
    Enqueue([=] { fn(dst, a, b, count); });
    return Status::Ok();
  }

  Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) override {
    const size_t bytes = count * SizeOf(type);
    TESSERA_RETURN_IF_ERROR(Check(src, bytes, "scale source"));
    TESSERA_RETURN_IF_ERROR(Check(dst, bytes, "scale destination"));
    double value = 0;  // the scalar is read now, as the CUDA engine reads a host scalar
    std::memcpy(&value, scalar, SizeOf(type));
    Enqueue([=] { ScaleArray(type, &value, src, dst, count); });
    return Status::Ok();
  }

  Status Divide(DataType type, void* data, size_t count, int divisor) override {
    TESSERA_RETURN_IF_ERROR(Check(data, count * SizeOf(type), "divide buffer"));
    Enqueue([=] { DivideArray(type, data, count, divisor); });
    return Status::Ok();
  }

  Status Record(uint64_t* ticket) override {
    *ticket = ++recorded_;
    return Status::Ok();
  }

  Status Done(uint64_t ticket, bool* done) override {
    *done = ticket <= completed_;
    if (*done) return Status::Ok();
    if (ticket > recorded_) return InternalError("host device engine: ticket " + std::to_string(ticket) + " was never recorded");
    if (polls_ < polls_before_done_) {
      ++polls_;
      return Status::Ok();
    }
    while (!queue_.empty() && queue_.front().first <= ticket) {
      queue_.front().second();
      queue_.pop_front();
    }
    completed_ = ticket;
    polls_ = 0;
    *done = true;
    return Status::Ok();
  }

 private:
  Status Check(const void* p, size_t bytes, const char* what) const {
    if (bytes == 0 || ranges_->Contains(p, bytes)) return Status::Ok();
    return InvalidArgument(std::string("host device engine: ") + what + " at " + Hex(p) + " (" + std::to_string(bytes) +
                           " bytes) is not device memory (a host buffer in a device-resident call?)");
  }
  // Work belongs to the next ticket to be recorded.
  void Enqueue(std::function<void()> work) { queue_.emplace_back(recorded_ + 1, std::move(work)); }

  std::shared_ptr<Ranges> ranges_;
  const int polls_before_done_;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_;
  uint64_t recorded_ = 0, completed_ = 0;
  int polls_ = 0;
};

}  // namespace

HostDeviceEngine::HostDeviceEngine(const Options& options) : options_(options), ranges_(std::make_shared<Ranges>()) {}
HostDeviceEngine::~HostDeviceEngine() = default;

Status HostDeviceEngine::Export(size_t bytes, std::unique_ptr<ExportedMemory>* out) {
  static std::atomic<uint64_t> counter{0};
  const std::string name = "/tessera-devslots-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("shm_open " + name, errno);
  void* base = nullptr;
  Status s = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? MapObject(fd, bytes, name, &base)
                                                           : ErrnoError("ftruncate " + name, errno);
  close(fd);
  if (!s.ok()) {
    shm_unlink(name.c_str());
    return s;
  }
  out->reset(new HostExported(ranges_, name, base, bytes));
  return Status::Ok();
}

Status HostDeviceEngine::Map(const std::string& record, int peer_pid, std::unique_ptr<MappedMemory>* out) {
  const size_t space = record.find(' ');
  if (space == std::string::npos || record.compare(0, 1, "/") != 0) {
    return InvalidArgument("host device engine: bad record \"" + record + "\" from pid " + std::to_string(peer_pid));
  }
  const std::string name = record.substr(0, space);
  const size_t bytes = std::strtoull(record.c_str() + space + 1, nullptr, 10);
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("shm_open " + name + " of pid " + std::to_string(peer_pid), errno);
  struct stat st;
  Status s;
  void* base = nullptr;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    s = InvalidArgument("host device engine: " + name + " is not " + std::to_string(bytes) + " bytes");
  } else {
    s = MapObject(fd, bytes, name, &base);
  }
  close(fd);
  TESSERA_RETURN_IF_ERROR(s);
  out->reset(new HostMapped(ranges_, base, bytes));
  return Status::Ok();
}

Status HostDeviceEngine::Allocate(size_t bytes, std::shared_ptr<void>* out) {
  const size_t len = bytes == 0 ? 1 : bytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ErrnoError("host device engine: mmap of " + std::to_string(len) + " bytes", errno);
  ranges_->Add(p, len);
  std::shared_ptr<Ranges> ranges = ranges_;
  *out = std::shared_ptr<void>(p, [ranges, len](void* q) {
    ranges->Remove(q);
    munmap(q, len);
  });
  return Status::Ok();
}

Status HostDeviceEngine::CreateStream(std::unique_ptr<DeviceStream>* out) {
  out->reset(new HostStream(ranges_, options_.polls_before_done));
  return Status::Ok();
}

bool HostDeviceEngine::IsDeviceMemory(const void* p, size_t bytes) const { return ranges_->Contains(p, bytes); }

}  // namespace tessera
