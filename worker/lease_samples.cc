#include "worker/lease_samples.h"

#include "absl/strings/str_cat.h"
#include "data/sampler.h"

namespace ferry {

const std::vector<int64_t>& LeaseSamples::Permutation(int64_t epoch,
                                                      int64_t epoch_size) {
  auto it = permutations_.find(epoch);
  if (it == permutations_.end() ||
      static_cast<int64_t>(it->second.size()) != epoch_size) {
    it = permutations_
             .insert_or_assign(epoch, EpochPermutation(epoch_size, seed_, epoch,
                                                       /*shuffle=*/true))
             .first;
  }
  while (permutations_.begin()->first < epoch - 1)
    permutations_.erase(permutations_.begin());
  return it->second;
}

absl::StatusOr<std::vector<int64_t>> LeaseSamples::Indices(
    const v1::NextTaskResponse& lease, bool allow_empty) {
  const int64_t epoch_size = lease.epoch_size();
  if (epoch_size <= 0 || epoch_size > train_samples_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease for step ", lease.step(), ": epoch size ", epoch_size,
        " does not fit the ", train_samples_, " train samples"));
  }
  std::vector<int64_t> indices;
  for (const v1::DataTask& task : lease.tasks()) {
    if (task.epoch() < 0 || task.begin() < 0 || task.begin() >= task.end() ||
        task.end() > epoch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease for step ", lease.step(), ": task ",
                       task.task_id(), " covers [", task.begin(), ", ",
                       task.end(), ") of an epoch of ", epoch_size));
    }
    const std::vector<int64_t>& order = Permutation(task.epoch(), epoch_size);
    indices.insert(indices.end(), order.begin() + task.begin(),
                   order.begin() + task.end());
  }
  if (indices.empty() && !allow_empty) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease for step ", lease.step(), " has no samples"));
  }
  return indices;
}

}  // namespace ferry
