// PsShard test helpers shared by ps_shard_test.cc and
// ps_shard_checkpoint_test.cc.
#ifndef FERRY_TESTS_PS_PS_SHARD_TESTING_H_
#define FERRY_TESTS_PS_PS_SHARD_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/ps_shard.h"

namespace ferry {

// Tensors {5, 3}, 2 shards, chunks of <= 2 elements. Shard 1 owns flat
// [4, 8): chunk 2 (tensor 0, [4,5)), chunk 3 ([5,7)), chunk 4 ([7,8)).
// Chunks 0 and 1 belong to shard 0.
inline constexpr int kShard = 1;

inline PsShardConfig TestConfig(
    PsConsistency consistency = PsConsistency::kSync) {
  PsShardConfig config;
  config.job_id = "job";
  config.shard_id = kShard;
  config.num_shards = 2;
  config.tensor_sizes = {5, 3};
  config.max_chunk_elements = 2;
  config.optimizer.kind = OptimizerKind::kSgd;
  config.optimizer.lr = 0.5;
  config.consistency = consistency;
  config.initial_slice = {1.0f, 2.0f, 3.0f, 4.0f};
  return config;
}

inline std::unique_ptr<PsShard> MakeShard(const PsShardConfig& config) {
  auto shard = PsShard::Create(config);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return std::move(shard).value();
}

inline PsPushHeader Header(const std::string& worker, int64_t step,
                           int64_t num_samples, int64_t generation = 0,
                           int64_t base_version = 0) {
  return PsPushHeader{"job",       worker,       generation, step,
                      num_samples, base_version, {}};
}

// Pushes a full slice gradient (4 values) split into the owned chunks, with
// embedding `rows` (a shard with a sparse store) added first.
inline absl::StatusOr<int64_t> PushSlice(PsShard& shard,
                                         const PsPushHeader& header,
                                         const std::vector<float>& g,
                                         std::vector<SparseRows> rows = {}) {
  auto staging = shard.BeginPush(header);
  if (!staging.ok()) return staging.status();
  PsPushStaging& s = **staging;
  for (SparseRows& part : rows) {
    if (absl::Status added = shard.AddRows(s, std::move(part)); !added.ok()) {
      return added;
    }
  }
  absl::Status status = shard.AddChunk(s, 2, absl::MakeSpan(&g[0], 1));
  if (status.ok()) status = shard.AddChunk(s, 3, absl::MakeSpan(&g[1], 2));
  if (status.ok()) status = shard.AddChunk(s, 4, absl::MakeSpan(&g[3], 1));
  if (!status.ok()) return status;
  return shard.CommitPush(std::move(staging).value());
}

inline std::vector<float> Params(PsShard& shard) {
  return shard.CurrentSnapshot()->values;
}

}  // namespace ferry

#endif  // FERRY_TESTS_PS_PS_SHARD_TESTING_H_
