// Byte accounting: what every role counts per peer and per call, the ground
// truth of the PS vs ring comparison.
#ifndef FERRY_COMMON_BYTE_COUNTER_H_
#define FERRY_COMMON_BYTE_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace ferry {

// Payload bytes (ByteSizeLong() of the messages) exchanged with one peer role.
struct TransferBytes {
  int64_t sent = 0;
  int64_t received = 0;
  int64_t calls = 0;  // RPCs started (counted where the caller tracks them)
};

// Thread-safe cumulative byte counter.
class ByteCounter {
 public:
  void AddSent(int64_t n) { sent_.fetch_add(n, std::memory_order_relaxed); }
  void AddReceived(int64_t n) {
    received_.fetch_add(n, std::memory_order_relaxed);
  }
  void AddCall() { calls_.fetch_add(1, std::memory_order_relaxed); }
  void Add(const TransferBytes& t) {
    sent_.fetch_add(t.sent, std::memory_order_relaxed);
    received_.fetch_add(t.received, std::memory_order_relaxed);
    calls_.fetch_add(t.calls, std::memory_order_relaxed);
  }
  TransferBytes Get() const {
    return {sent_.load(std::memory_order_relaxed),
            received_.load(std::memory_order_relaxed),
            calls_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> received_{0};
  std::atomic<int64_t> calls_{0};
};

}  // namespace ferry

#endif  // FERRY_COMMON_BYTE_COUNTER_H_
