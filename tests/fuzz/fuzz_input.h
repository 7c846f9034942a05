// FuzzInput: reads typed values off the front of a fuzzer's bytes. Past the end it
// yields zeros and empty strings, so a target never has to check the length itself and
// every input, however short, reaches the code under test.
#ifndef TESSERA_TESTS_FUZZ_FUZZ_INPUT_H_
#define TESSERA_TESTS_FUZZ_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace tessera {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The next sizeof(T) bytes as a T (a plain struct or number), zero-padded.
  template <typename T>
  T Take() {
    static_assert(std::is_trivially_copyable<T>::value, "Take<T> needs a plain type");
    T value;
    std::memset(&value, 0, sizeof(value));
    const size_t n = std::min(sizeof(T), size_ - at_);
    std::memcpy(&value, data_ + at_, n);
    at_ += n;
    return value;
  }

  // The next `n` bytes (fewer at the end).
  std::string TakeBytes(size_t n) {
    n = std::min(n, size_ - at_);
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

  std::string Rest() { return TakeBytes(size_ - at_); }
  size_t remaining() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TESTS_FUZZ_FUZZ_INPUT_H_
