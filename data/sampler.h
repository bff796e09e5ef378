// Sampling: which samples an epoch visits in which order, and how that order
// is cut into data tasks (leased by the coordinator) or into per-rank shards.
//
// Semantics follow PyTorch's DistributedSampler: a permutation per epoch that
// every process derives from (seed, epoch) alone, and shards that pad by
// wrapping around unless drop_last. The numbers differ from torch's (the
// algorithm below is ours, fixed so that every worker on every platform and
// compiler gets the same order): Fisher-Yates over std::mt19937_64 seeded with
// seed + epoch (the same mix torch uses, so (seed, epoch + 1) and
// (seed + 1, epoch) give the same order), integer draws by rejection sampling,
// no std:: distributions.
//
// Tasks and shards hold positions in [0, num_samples) of the epoch's
// permutation, not sample indices: sample = permutation[position].
//
// All functions are pure and thread-safe.
#ifndef FERRY_DATA_SAMPLER_H_
#define FERRY_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

// A contiguous range [begin, end) of positions in one epoch's permutation.
struct DataTask {
  int64_t epoch = 0;
  int64_t task_id = 0;  // 0-based within the epoch, in order of begin
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool operator==(const DataTask&) const = default;
};

// Returns the order in which epoch `epoch` visits samples [0, num_samples): a
// permutation that depends only on (num_samples, seed + epoch) when `shuffle`,
// the identity otherwise. Negative num_samples gives an empty vector.
std::vector<int64_t> EpochPermutation(int64_t num_samples, uint64_t seed,
                                      int64_t epoch, bool shuffle);

// Cuts positions [0, num_samples) into tasks of samples_per_task positions
// (the last one shorter when it does not divide), task_id 0, 1, ... in order;
// every position is in exactly one task. num_samples == 0 gives no tasks.
//
// Errors: INVALID_ARGUMENT when num_samples < 0, samples_per_task <= 0 or
// epoch < 0.
absl::StatusOr<std::vector<DataTask>> SplitIntoTasks(int64_t num_samples,
                                                     int64_t samples_per_task,
                                                     int64_t epoch);

// Returns the positions that rank `rank` of `world_size` visits, as
// DistributedSampler: positions rank, rank + world_size, rank + 2 * world_size,
// ... Every rank gets the same count: floor(num_samples / world_size) when
// drop_last (the tail is dropped), else ceil(num_samples / world_size), padding
// by wrapping around to position 0 (position p >= num_samples means
// p % num_samples).
//
// Errors: INVALID_ARGUMENT when num_samples < 0, world_size <= 0 or rank is
// outside [0, world_size).
absl::StatusOr<std::vector<int64_t>> ShardForRank(int64_t num_samples,
                                                  int world_size, int rank,
                                                  bool drop_last);

}  // namespace ferry

#endif  // FERRY_DATA_SAMPLER_H_
