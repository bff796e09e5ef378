// --init-from of a ring job's checkpoint directory (proto/job_convert.h
// JobInitialValues): a new job, in any mode, starts from the newest complete
// ring checkpoint's values, read from real files as shards and workers read
// them.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "common/ring_checkpoint.h"
#include "common/sharding.h"
#include "ferry/v1/common.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "ps/dlrm_init.h"
#include "ps/job_tables.h"
#include "ps/sparse_store.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

class RingCheckpointInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ferry_ring_init_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes a ring of `parts` members' checkpoint at `version` of a state of
  // `n` elements: element i of the parameters is i / 8 + version.
  void WriteRing(int parts, int64_t version, int64_t n,
                 const std::string& job = "earlier-job") {
    for (int rank = 0; rank < parts; ++rank) {
      ShardCheckpoint part;
      part.identity = RingCheckpointPartIdentity(job, rank, parts, n);
      part.version = version;
      part.steps_applied = version;
      std::vector<float>& momentum = part.state.emplace_back();
      for (int64_t i = part.identity.range_begin; i < part.identity.range_end;
           ++i) {
        part.params.push_back(Value(i, version));
        momentum.push_back(-1.0f);
      }
      ASSERT_TRUE(WriteRingCheckpointPart(PosixFileSystem(), dir_, part).ok());
    }
  }
  static float Value(int64_t i, int64_t version) {
    return static_cast<float>(i) / 8 + static_cast<float>(version);
  }
  v1::JobSpec Job(const std::string& model) const {
    v1::JobSpec job;
    job.set_job_id("new-job");
    job.set_model(model);
    job.set_init_from(dir_);
    return job;
  }

  std::string dir_;
};

TEST_F(RingCheckpointInitTest, ANewJobStartsFromTheNewestCompleteCheckpoint) {
  const v1::JobSpec job = Job("6-4-3");
  absl::StatusOr<ModelDef> model = JobModel(job);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<ParameterLayout> layout = ModelJobLayout(*model);
  ASSERT_TRUE(layout.ok());
  const int64_t n = layout->total_elements();
  WriteRing(3, 50, n);
  WriteRing(3, 100, n);
  // Version 150 was cut short: rank 2's part is missing.
  WriteRing(3, 150, n);
  std::filesystem::remove(CheckpointPath(dir_, 2, 150));
  absl::StatusOr<std::vector<float>> values = JobInitialValues(job, *model);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(static_cast<int64_t>(values->size()), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ((*values)[i], Value(i, 100)) << i;
  // A shard's slice is that slice of the same values.
  absl::StatusOr<std::vector<float>> slice = JobDenseInitialSlice(job, 3, 9);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(*slice,
            std::vector<float>(values->begin() + 3, values->begin() + 9));
}

TEST_F(RingCheckpointInitTest, ACheckpointOfAnotherModelIsRefusedNamingBoth) {
  WriteRing(2, 10, 5);
  const v1::JobSpec job = Job("6-4-3");
  absl::StatusOr<ModelDef> model = JobModel(job);
  ASSERT_TRUE(model.ok());
  const absl::Status status = JobInitialValues(job, *model).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("--init-from " + dir_));
  EXPECT_THAT(std::string(status.message()), HasSubstr("this job's has 43"));
}

// A hybrid job's ring checkpoints hold only its dense layers: a DLRM job
// cannot take its tables from them, and says where they are.
TEST_F(RingCheckpointInitTest, TablesFromACheckpointWithoutTablesAreRefused) {
  WriteRing(2, 10, 5);
  absl::StatusOr<std::unique_ptr<SparseStore>> store = SparseStore::Create(
      MakeSparseStoreConfig(EmbeddingOptions{}, {4, 4}, /*seed=*/1));
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Status status =
      RestoreDlrmInitTables(dir_, 5, **store, TableScope::kAll);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("holds no embedding tables"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("PS shards"));
}

}  // namespace
}  // namespace ferry
