// The PS client's and ring exchange's options taken from a job spec.
#include "worker/job_options.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

ParameterLayout Layout() {
  auto layout = ParameterLayout::Create({{"w", {3, 4}}, {"b", {4}}});
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

v1::JobSpec Job() {
  v1::JobSpec job;
  job.set_job_id("j");
  job.add_shard_addresses("a:1");
  job.add_shard_addresses("b:2");
  job.mutable_optimizer()->set_lr(0.25);
  job.mutable_compression()->set_encoding(v1::ENCODING_TOPK);
  job.mutable_compression()->set_topk_ratio(0.5);
  return job;
}

TEST(JobOptionsTest, ParameterClientPlacesTheLayoutOnTheJobsShards) {
  v1::JobSpec job = Job();
  job.set_max_chunk_elements(5);
  auto options = ParameterClientOptionsForJob(job, "w7", Layout());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->job_id, "j");
  EXPECT_EQ(options->worker_id, "w7");
  EXPECT_EQ(options->shard_addresses, (std::vector<std::string>{"a:1", "b:2"}));
  int64_t elements = 0;
  for (const Chunk& c : options->chunks) {
    EXPECT_LE(c.length, 5);
    EXPECT_LT(c.shard, 2);
    elements += c.length;
  }
  EXPECT_EQ(elements, 16);
  EXPECT_EQ(options->compression.encoding, GradientEncoding::kTopK);
  EXPECT_DOUBLE_EQ(options->compression.topk_ratio, 0.5);
}

TEST(JobOptionsTest, ParameterClientDefaultChunkSizeAndPlacementErrors) {
  auto options = ParameterClientOptionsForJob(Job(), "w", Layout());
  ASSERT_TRUE(options.ok()) << options.status();
  // The default chunk size is far above these tensors: they are only split
  // to balance the two shards, so no chunk spans more than a tensor.
  int64_t elements = 0;
  for (const Chunk& c : options->chunks) elements += c.length;
  EXPECT_EQ(elements, 16);
  EXPECT_LE(options->chunks.size(), 4u);
  v1::JobSpec no_shards = Job();
  no_shards.clear_shard_addresses();
  EXPECT_FALSE(ParameterClientOptionsForJob(no_shards, "w", Layout()).ok());
}

TEST(JobOptionsTest, RingBucketsDefaultToTheWholeModel) {
  v1::JobSpec job = Job();
  auto ring = RingExchangeOptionsForJob(job, "w1", Layout());
  ASSERT_TRUE(ring.ok()) << ring.status();
  RingExchangeOptions& options = *ring;
  EXPECT_EQ(options.job_id, "j");
  EXPECT_EQ(options.worker_id, "w1");
  EXPECT_EQ(options.tensor_sizes, (std::vector<int64_t>{12, 4}));
  EXPECT_EQ(options.bucket_elements, 16);
  EXPECT_DOUBLE_EQ(options.optimizer.lr, 0.25);
  EXPECT_EQ(options.compression.encoding, GradientEncoding::kTopK);
  job.set_bucket_elements(6);
  EXPECT_EQ(RingExchangeOptionsForJob(job, "w1", Layout())->bucket_elements, 6);
}

}  // namespace
}  // namespace ferry
