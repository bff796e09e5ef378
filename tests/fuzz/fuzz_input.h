// FuzzInput: draws typed values from a fuzzer's byte string, front to back.
// The structured modes of the fuzz targets use it to build valid-looking
// requests from arbitrary bytes (libprotobuf-mutator is not packaged in
// Debian 12; FuzzedDataProvider is clang-only and the targets also build
// with gcc as replay programs).
//
// Contract: every method is total. Once the bytes run out, numbers read as
// 0, bools as false and byte strings as empty, so any input decodes to some
// sequence of values and a shorter input to a prefix-compatible one.
//
// Thread safety: not thread-safe; one FuzzInput per input.
#ifndef FERRY_TESTS_FUZZ_FUZZ_INPUT_H_
#define FERRY_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

namespace ferry::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return size_ - pos_; }

  uint8_t Byte() { return empty() ? 0 : data_[pos_++]; }
  bool Bool() { return (Byte() & 1) != 0; }

  // An integer of sizeof(T) bytes, little-endian (missing bytes are 0).
  template <typename T>
  T Int() {
    static_assert(std::is_integral_v<T>);
    std::make_unsigned_t<T> v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<std::make_unsigned_t<T>>(Byte()) << (8 * i);
    }
    return static_cast<T>(v);
  }

  // A value in [lo, hi] (REQUIRES lo <= hi), from one byte when the range
  // fits in 256 values, else from 8.
  int64_t Range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t raw = span < 256 ? Byte() : Int<uint64_t>();
    if (span == UINT64_MAX) return static_cast<int64_t>(raw);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + raw % (span + 1));
  }

  float Float() {
    const uint32_t bits = Int<uint32_t>();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }

  // Exactly `n` bytes, or fewer when the input ends first.
  std::string Bytes(size_t n) {
    n = n < remaining() ? n : remaining();
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

  // A length-prefixed byte string: one length byte; 255 means a 2-byte
  // little-endian length follows (up to 64 KiB).
  std::string Frame() {
    size_t n = Byte();
    if (n == 255) n = Int<uint16_t>();
    return Bytes(n);
  }

  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Aborts the process (a fuzzer finding) with `what` when `condition` is
// false: the targets' oracles, for contract violations that do not crash.
inline void FuzzCheck(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what);
  std::abort();
}

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_FUZZ_INPUT_H_
