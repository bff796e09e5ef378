// The sample indices of a lease: DataTask ranges of the epoch's permutation
// (EpochPermutation(epoch_size, seed, epoch, shuffle = true)), so that every
// worker and the standalone trainer agree on them.
//
// Thread safety: not thread-safe.
#ifndef FERRY_WORKER_LEASE_SAMPLES_H_
#define FERRY_WORKER_LEASE_SAMPLES_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

class LeaseSamples {
 public:
  LeaseSamples(int64_t train_samples, uint64_t seed)
      : train_samples_(train_samples), seed_(seed) {}

  // The lease's sample indices in task order. INVALID_ARGUMENT for an epoch
  // size that does not fit the training set, a task outside the epoch, or
  // (unless `allow_empty`, a ring rank contributing zeros) no samples.
  absl::StatusOr<std::vector<int64_t>> Indices(
      const v1::NextTaskResponse& lease, bool allow_empty);

 private:
  // Cached for the current and the previous epoch.
  const std::vector<int64_t>& Permutation(int64_t epoch, int64_t epoch_size);

  const int64_t train_samples_;
  const uint64_t seed_;
  std::map<int64_t, std::vector<int64_t>> permutations_;  // epoch -> order
};

}  // namespace ferry

#endif  // FERRY_WORKER_LEASE_SAMPLES_H_
