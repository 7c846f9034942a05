// SeqLock: one writer updates a few fields, other threads read them now and then, and
// the writer must not pay for a lock (it is on every call's path). The fields are
// atomics written and read with memory_order_relaxed; the writer brackets its stores
// with BeginWrite/EndWrite, and a reader copies the fields inside Read, which retries
// while a write is under way or one came between (Boehm's seqlock with fences).
//
// One writer at a time: the caller serialises writers (the communicator's run lock).
#ifndef TESSERA_BASE_SEQLOCK_H_
#define TESSERA_BASE_SEQLOCK_H_

#include <atomic>
#include <cstdint>
#include <thread>

namespace tessera {

class SeqLock {
 public:
  void BeginWrite() {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void EndWrite() { version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Calls copy() until it ran with no write under way or in between.
  template <typename Copy>
  void Read(Copy copy) const {
    for (;;) {
      const uint32_t before = version_.load(std::memory_order_acquire);
      if ((before & 1) == 0) {
        copy();
        std::atomic_thread_fence(std::memory_order_acquire);
        if (version_.load(std::memory_order_relaxed) == before) return;
      }
      std::this_thread::yield();
    }
  }

 private:
  std::atomic<uint32_t> version_{0};  // odd while a write is under way
};

// A field of a SeqLock's: relaxed loads and stores (the SeqLock orders them).
template <typename T>
class SeqField {
 public:
  SeqField() = default;
  explicit SeqField(T v) : v_(v) {}
  T get() const { return v_.load(std::memory_order_relaxed); }
  void set(T v) { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<T> v_{};
};

}  // namespace tessera

#endif  // TESSERA_BASE_SEQLOCK_H_
