// Defaults shared by a ring member (worker/ring_exchange.h) and the models
// that predict it (client/memory_model.h).
#ifndef FERRY_COMMON_RING_DEFAULTS_H_
#define FERRY_COMMON_RING_DEFAULTS_H_

#include <cstdint>

namespace ferry {

// A ring member whose rollback copy is at least this large learns of each
// commit at once (a model whose step takes far longer than a coordinator
// round trip), and with sharded optimizer state keeps that copy in its
// gradient buffer outside its slice when it fits there
// (RingExchangeOptions.prompt_commit_min_bytes).
inline constexpr int64_t kRingPromptCommitMinBytes = int64_t{16} << 20;

}  // namespace ferry

#endif  // FERRY_COMMON_RING_DEFAULTS_H_
