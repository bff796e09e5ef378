#include "data/sampler.h"

#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// Uniform integer in [0, bound), bound > 0, by rejection: draws below
// 2^64 mod bound are redrawn so that the accepted range is a multiple of bound.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (uint64_t{0} - bound) % bound;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

std::vector<int64_t> EpochPermutation(int64_t num_samples, uint64_t seed,
                                      int64_t epoch, bool shuffle) {
  if (num_samples <= 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(num_samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
  for (int64_t i = num_samples - 1; i > 0; --i) {
    const auto j =
        static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

absl::StatusOr<std::vector<DataTask>> SplitIntoTasks(int64_t num_samples,
                                                     int64_t samples_per_task,
                                                     int64_t epoch) {
  if (num_samples < 0 || samples_per_task <= 0 || epoch < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SplitIntoTasks needs num_samples >= 0, samples_per_task > 0 and "
        "epoch >= 0; got %d, %d, %d",
        num_samples, samples_per_task, epoch));
  }
  std::vector<DataTask> tasks;
  tasks.reserve(static_cast<size_t>(num_samples / samples_per_task + 1));
  int64_t task_id = 0;
  for (int64_t begin = 0; begin < num_samples; begin += samples_per_task) {
    const int64_t end = num_samples - begin > samples_per_task
                            ? begin + samples_per_task
                            : num_samples;
    tasks.push_back(DataTask{
        .epoch = epoch, .task_id = task_id++, .begin = begin, .end = end});
  }
  return tasks;
}

absl::StatusOr<std::vector<int64_t>> ShardForRank(int64_t num_samples,
                                                  int world_size, int rank,
                                                  bool drop_last) {
  if (num_samples < 0 || world_size <= 0 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ShardForRank needs num_samples >= 0, world_size > 0 and rank in "
        "[0, world_size); got %d, %d, %d",
        num_samples, world_size, rank));
  }
  const int64_t per_rank = drop_last
                               ? num_samples / world_size
                               : (num_samples + world_size - 1) / world_size;
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = 0; i < per_rank; ++i) {
    positions.push_back((rank + i * world_size) % num_samples);
  }
  return positions;
}

}  // namespace ferry
