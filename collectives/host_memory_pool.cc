#include "collectives/host_memory_pool.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace tessera {

struct HostMemoryPool::Shared {
  struct Buffer {
    char* data;
    size_t size;
  };
  mutable std::mutex mu;
  std::vector<Buffer> free;
  size_t free_bytes = 0;

  // Called by a buffer's deleter: keep it for the next call and free the smallest kept
  // buffers beyond the limits (a larger buffer serves every request a smaller one can;
  // keeping the small ones instead would make every larger call allocate and fault in a
  // new buffer).
  void Release(char* data, size_t size) {
    std::vector<char*> dropped;
    {
      std::lock_guard<std::mutex> lock(mu);
      free.push_back({data, size});
      free_bytes += size;
      while (free.size() > kMaxKeptBuffers || free_bytes > kMaxKeptBytes) {
        auto smallest = std::min_element(free.begin(), free.end(),
                                         [](const Buffer& a, const Buffer& b) { return a.size < b.size; });
        dropped.push_back(smallest->data);
        free_bytes -= smallest->size;
        free.erase(smallest);
      }
    }
    for (char* d : dropped) delete[] d;
  }

  ~Shared() {
    for (const Buffer& b : free) delete[] b.data;
  }
};

HostMemoryPool::HostMemoryPool() : shared_(std::make_shared<Shared>()) {}
HostMemoryPool::~HostMemoryPool() = default;  // buffers still owned keep Shared alive

Status HostMemoryPool::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  return Status::Ok();
}

Status HostMemoryPool::Allocate(size_t bytes, std::shared_ptr<void>* out) {
  const size_t size = bytes > 0 ? bytes : 1;
  char* data = nullptr;
  size_t capacity = size;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    size_t best = shared_->free.size();
    for (size_t i = 0; i < shared_->free.size(); ++i) {
      const size_t s = shared_->free[i].size;
      if (s >= size && (best == shared_->free.size() || s < shared_->free[best].size)) best = i;
    }
    if (best < shared_->free.size()) {
      data = shared_->free[best].data;
      capacity = shared_->free[best].size;
      shared_->free_bytes -= capacity;
      shared_->free.erase(shared_->free.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (data == nullptr) {
    data = new (std::nothrow) char[size];
    if (data == nullptr) return InternalError("out of memory for a " + std::to_string(size) + "-byte scratch buffer");
  }
  std::shared_ptr<Shared> shared = shared_;
  *out = std::shared_ptr<void>(data, [shared, capacity](void* p) { shared->Release(static_cast<char*>(p), capacity); });
  return Status::Ok();
}

size_t HostMemoryPool::kept_buffers() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->free.size();
}

size_t HostMemoryPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->free_bytes;
}

}  // namespace tessera
