// Waiting on a 32-bit word that another process may change (a word in
// shared memory, common/shared_memory.h): Linux futexes without the
// process-private flag, which std::atomic::wait uses.
#ifndef FERRY_COMMON_FUTEX_H_
#define FERRY_COMMON_FUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace ferry {

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Sleeps while *word == expected, at most `timeout` (may return earlier,
// spuriously: callers re-check their condition).
void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout);
// Wakes every thread of any process sleeping on `word`.
void FutexWakeAll(const std::atomic<uint32_t>* word);

}  // namespace ferry

#endif  // FERRY_COMMON_FUTEX_H_
