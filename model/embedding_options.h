// The options of a job's embedding tables (the --embedding-* flags): the
// row-wise optimizer, feature admission, TTL and the memory limit. One value
// travels in the JobSpec (proto/job_convert.h) to every shard and member, so
// that every store a job builds is configured alike.
//
// Plain values: copyable, thread-compatible.
#ifndef FERRY_MODEL_EMBEDDING_OPTIONS_H_
#define FERRY_MODEL_EMBEDDING_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_flags.h"
#include "compute/row_optimizer_math.h"

namespace ferry {

// Row-wise Adagrad's default learning rate (docs/sparse.md, "Training").
inline constexpr float kDefaultEmbeddingLr = 0.05f;

// "sgd", "adagrad", "ftrl"; INVALID_ARGUMENT otherwise.
absl::StatusOr<RowOptimizerKind> ParseRowOptimizerKind(const std::string& text);
std::string RowOptimizerKindName(RowOptimizerKind kind);
// INVALID_ARGUMENT naming the field: lr <= 0 or not finite, epsilon,
// beta, l1, l2 or initial_accumulator negative or not finite.
absl::Status ValidateRowOptimizer(const RowOptimizerParams& params);

struct EmbeddingOptions {
  RowOptimizerParams optimizer{.lr = kDefaultEmbeddingLr};  // adagrad
  int32_t admit_count = 1;  // sightings before an id gets a row
  int64_t ttl_steps = 0;    // 0: rows never expire
  int64_t max_mb = 0;       // 0: no memory limit (MiB over all tables)
};

// INVALID_ARGUMENT naming the flag (--embedding-lr, --embedding-admit-count,
// ...) for a value that cannot train.
absl::Status ValidateEmbeddingOptions(const EmbeddingOptions& options);

// The flags as typed (common/cli_flags.h), validated as above; an unknown
// optimizer is INVALID_ARGUMENT naming --embedding-optimizer.
absl::StatusOr<EmbeddingOptions> ToEmbeddingOptions(
    const EmbeddingFlags& flags);

}  // namespace ferry

#endif  // FERRY_MODEL_EMBEDDING_OPTIONS_H_
