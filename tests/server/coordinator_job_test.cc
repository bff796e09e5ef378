// BuildCoordinatorJob: the job a coordinator serves from its flags, dense
// and DLRM, and the configurations it refuses (the coordinator exits with
// kExitConfig for each).
#include "server/coordinator_job.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "data/ctr_generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm_spec.h"
#include "proto/job_convert.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSmallDlrm[] =
    R"({"format": "ferry.model.v1", "kind": "dlrm", "embedding_dim": 4,
        "bottom": [8], "top": [8]})";

class CoordinatorJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/coordinator-job-", getpid()));
    std::filesystem::create_directories(*dir_);
    CtrGeneratorOptions gen;
    gen.rows = 300;
    gen.test_rows = 120;
    gen.seed = 2;
    gen.vocab_sizes.assign(26, 20);
    ASSERT_TRUE(WriteCtrDataset(*dir_ + "/ctr", gen).ok());
    std::ofstream(*dir_ + "/small.json") << kSmallDlrm;
    std::ofstream(*dir_ + "/narrow.json")
        << R"({"format": "ferry.model.v1", "kind": "dlrm",
              "dense_features": 10, "embedding_dim": 4})";
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static CoordinatorFlags Dlrm() {
    CoordinatorFlags f;
    f.model = *dir_ + "/small.json";
    f.dataset = "criteo:" + *dir_ + "/ctr";
    f.shards = {"127.0.0.1:1", "127.0.0.1:2"};
    f.global_batch = 64;
    f.epochs = 2;
    return f;
  }
  static CoordinatorFlags Dense() {
    CoordinatorFlags f;
    f.model = "784-16-10";
    f.dataset = "synthetic:600";
    f.shards = {"127.0.0.1:1"};
    return f;
  }

  static std::string* dir_;
};
std::string* CoordinatorJobTest::dir_ = nullptr;

TEST_F(CoordinatorJobTest, ADlrmJobCarriesItsSpecTablesAndTestSplit) {
  CoordinatorFlags f = Dlrm();
  f.embedding.optimizer.kind = RowOptimizerKind::kFtrl;
  f.embedding.optimizer.lr = 0.1f;
  f.embedding.admit_count = 3;
  f.embedding_given = true;
  auto built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  const v1::JobSpec& job = built->job;
  ASSERT_TRUE(IsDlrmJob(job));
  auto spec = JobDlrmSpec(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->embedding_dim, 4);
  EXPECT_EQ(job.model(), f.model);
  EXPECT_EQ(job.dataset(), f.dataset);
  EXPECT_EQ(job.mode(), v1::MODE_PS);
  EXPECT_EQ(job.shard_addresses_size(), 2);
  auto tables = FromProto(job.embedding());
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_EQ(tables->optimizer.kind, RowOptimizerKind::kFtrl);
  EXPECT_FLOAT_EQ(tables->optimizer.lr, 0.1f);
  EXPECT_EQ(tables->admit_count, 3);
  // The tensors are the DLRM's dense parameters.
  auto layout = DlrmParameterLayout(*spec);
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(job.tensors_size(), static_cast<int>(layout->tensors().size()));
  EXPECT_EQ(job.tensors(0).name(), "bot_l.0.weight");
  EXPECT_TRUE(CheckJobTensors(job, *layout).ok());
  EXPECT_EQ(built->epoch_size, 300);
  const CtrDataset* test = std::get_if<CtrDataset>(&built->test_set);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->num_samples(), 120);
}

TEST_F(CoordinatorJobTest, TheDlrmPresetTakesTheDefaultTables) {
  CoordinatorFlags f = Dlrm();
  f.model = "dlrm";
  f.consistency = "async";
  auto built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->job.consistency(), v1::CONSISTENCY_ASYNC);
  auto tables = FromProto(built->job.embedding());
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_EQ(tables->optimizer.kind, RowOptimizerKind::kAdagrad);
  EXPECT_FLOAT_EQ(tables->optimizer.lr, kDefaultEmbeddingLr);
  EXPECT_EQ(tables->admit_count, 1);
}

TEST_F(CoordinatorJobTest, ADenseJobIsAsBefore) {
  auto built = BuildCoordinatorJob(Dense());
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_FALSE(IsDlrmJob(built->job));
  EXPECT_FALSE(built->job.has_embedding());
  EXPECT_EQ(built->epoch_size, 600);
  const Dataset* test = std::get_if<Dataset>(&built->test_set);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->num_samples, 100);
}

// PS chunks pack tensors unless --pack-chunks false or a pipeline job, and
// always end where BatchNorm state begins (state travels uncompressed).
TEST_F(CoordinatorJobTest, ChunksPackTensorsExceptInPipelinesAndEndAtState) {
  auto built = BuildCoordinatorJob(Dense());
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(built->job.pack_chunks());
  auto cuts = JobChunkCuts(built->job, 784 * 16 + 16 + 16 * 10 + 10);
  ASSERT_TRUE(cuts.ok()) << cuts.status();
  EXPECT_FALSE(cuts->at_tensor_boundaries);
  EXPECT_TRUE(cuts->at.empty());
  v1::JobSpec pipeline = built->job;
  pipeline.set_pipeline_stages(2);
  EXPECT_TRUE(JobChunkCuts(pipeline, 100)->at_tensor_boundaries);

  CoordinatorFlags unpacked = Dense();
  unpacked.pack_chunks = false;
  built = BuildCoordinatorJob(unpacked);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(JobChunkCuts(built->job, 100)->at_tensor_boundaries);

  // A BatchNorm1d: its running statistics are the buffer's last elements.
  std::ofstream(*dir_ + "/bn.json") << R"({"format": "ferry.model.v1",
      "input": {"shape": [8]}, "classes": 2, "layers": [
      {"type": "Linear", "args": {"in_features": 8, "out_features": 16}},
      {"type": "BatchNorm1d", "args": {"num_features": 16}},
      {"type": "Linear", "args": {"in_features": 16, "out_features": 2}}]})";
  CoordinatorFlags bn = Dense();
  bn.model = *dir_ + "/bn.json";
  built = BuildCoordinatorJob(bn);
  ASSERT_TRUE(built.ok()) << built.status();
  auto state = JobStateElements(built->job);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_GT(*state, 0);
  cuts = JobChunkCuts(built->job, 1000);
  ASSERT_TRUE(cuts.ok()) << cuts.status();
  EXPECT_FALSE(cuts->at_tensor_boundaries);
  EXPECT_THAT(cuts->at, ::testing::ElementsAre(1000 - *state));
}

// Async and SSP count their schedule in pushes (one per worker per step of
// the global batch): the warm-up, decay and cosine lengths given in steps
// are stretched by the expected workers; sync keeps them.
TEST_F(CoordinatorJobTest, AsyncSchedulesCountPushesOfTheExpectedWorkers) {
  CoordinatorFlags f = Dense();
  f.global_batch = 60;  // 10 steps per epoch of 600
  f.epochs = 2;
  f.expected_workers = 3;
  f.optimizer.schedule.kind = ScheduleKind::kCosine;
  f.optimizer.schedule.warmup_steps = 4;
  f.optimizer.schedule.step_size = 0;
  auto sync = BuildCoordinatorJob(f);
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(sync->job.optimizer().warmup_steps(), 4);
  EXPECT_EQ(sync->job.optimizer().total_steps(), 20);
  for (const char* consistency : {"async", "ssp:2"}) {
    CoordinatorFlags a = f;
    a.consistency = consistency;
    auto built = BuildCoordinatorJob(a);
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->job.optimizer().warmup_steps(), 12) << consistency;
    EXPECT_EQ(built->job.optimizer().total_steps(), 60) << consistency;
  }
}

// --sum-on-arrival: carried by a sync PS job; refused where a step may
// apply fewer pushes than were summed (a quorum) or where no shard steps
// (async, ring).
TEST_F(CoordinatorJobTest, SumOnArrivalIsForSyncPsWithoutAQuorum) {
  CoordinatorFlags f = Dense();
  f.sum_on_arrival = true;
  auto built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(built->job.sum_on_arrival());
  EXPECT_FALSE(BuildCoordinatorJob(Dense())->job.sum_on_arrival());
  CoordinatorFlags quorum = f, async = f, ring = f;
  quorum.sync_quorum = 1;
  async.consistency = "async";
  ring.mode = "ring";
  ring.shards.clear();
  for (const CoordinatorFlags& bad : {quorum, async, ring}) {
    auto refused = BuildCoordinatorJob(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(), HasSubstr("--sum-on-arrival"));
  }
}

// --ring-shard-optimizer-state: ring mode with a checkpoint directory,
// fp32 gradients, no pipeline stages and all members writing checkpoints.
TEST_F(CoordinatorJobTest, ShardedOptimizerStateNeedsARingWithCheckpoints) {
  CoordinatorFlags f = Dense();
  f.mode = "ring";
  f.shards.clear();
  f.ring_checkpoint_dir = "/tmp/ring";
  f.ring_shard_optimizer_state = true;
  auto built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(built->job.ring_shard_optimizer_state());
  CoordinatorFlags ps = Dense(), no_dir = f, compressed = f, staged = f,
                   rank0 = f;
  ps.ring_shard_optimizer_state = true;
  no_dir.ring_checkpoint_dir.clear();
  compressed.compression = "fp16";
  staged.model = "784-16-16-10";
  staged.pipeline.stages = 2;
  rank0.ring_checkpoint_writers = "rank0";
  for (const auto& [bad, why] :
       std::vector<std::pair<CoordinatorFlags, std::string>>{
           {ps, "is for --mode ring"},
           {no_dir, "needs --ring-checkpoint-dir"},
           {compressed, "--compression"},
           {staged, "--pipeline-stages"},
           {rank0, "--ring-checkpoint-writers rank0"}}) {
    auto refused = BuildCoordinatorJob(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << why;
    EXPECT_THAT(refused.status().message(), HasSubstr(why));
  }
}

// --ring-checkpoint-writers rank0: the job says so; it needs a checkpoint
// directory and does not fit pipeline stages; other values are refused.
TEST_F(CoordinatorJobTest, RankZeroRingCheckpointsNeedADirectoryAndNoStages) {
  CoordinatorFlags f = Dense();
  f.mode = "ring";
  f.shards.clear();
  f.ring_checkpoint_dir = "/tmp/ring";
  f.ring_checkpoint_writers = "rank0";
  auto built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(built->job.ring_checkpoint_rank0());
  f.ring_checkpoint_writers = "all";
  EXPECT_FALSE(BuildCoordinatorJob(f)->job.ring_checkpoint_rank0());
  CoordinatorFlags no_dir = f, staged = f, unknown = f;
  no_dir.ring_checkpoint_writers = "rank0";
  no_dir.ring_checkpoint_dir.clear();
  staged.ring_checkpoint_writers = "rank0";
  staged.model = "784-16-16-10";
  staged.pipeline.stages = 2;
  unknown.ring_checkpoint_writers = "rank1";
  for (const CoordinatorFlags& bad : {no_dir, staged, unknown}) {
    auto refused = BuildCoordinatorJob(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(),
                HasSubstr("--ring-checkpoint-writers"));
  }
}

// --worker-memory-budget: a model whose whole exceeds it is refused, its
// PS pipeline stages fit and the job carries the budget; ring mode holds the
// whole model on every member; bad sizes and DLRMs are refused.
TEST_F(CoordinatorJobTest, AWorkerMemoryBudgetBoundsWhatOneWorkerHolds) {
  CoordinatorFlags f = Dense();
  f.model = "784-2048-2048-10";  // 5.8M parameters, 23 MB
  f.global_batch = 64;
  f.worker_memory_budget = "40MiB";
  absl::StatusOr<CoordinatorJob> built = BuildCoordinatorJob(f);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("over the worker memory budget of 40.0 MiB"));
  f.pipeline.stages = 2;
  // Whole replicas only: one expected worker cannot form one.
  EXPECT_THAT(std::string(BuildCoordinatorJob(f).status().message()),
              HasSubstr("1 expected workers are fewer than --pipeline-stages"));
  f.expected_workers = 4;
  built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->job.worker_memory_budget_bytes(), int64_t{40} << 20);
  EXPECT_EQ(built->job.pipeline_stages(), 2);
  // The error feedback residual is the whole model's.
  f.compression = "topk:0.1";
  f.error_feedback = true;
  EXPECT_THAT(
      std::string(BuildCoordinatorJob(f).status().message()),
      HasSubstr("--error-feedback keeps a residual of the whole model"));
  f.compression = "none";
  f.error_feedback = false;

  f.mode = "ring";
  built = BuildCoordinatorJob(f);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("in ring mode every member holds the whole model, "
                        "whatever --pipeline-stages: use --mode ps"));
  // No advice that cannot help a ring member.
  EXPECT_THAT(std::string(built.status().message()),
              Not(HasSubstr("split it into more pipeline stages")));
  f.mode = "ps";
  f.worker_memory_budget = "12XB";
  EXPECT_THAT(std::string(BuildCoordinatorJob(f).status().message()),
              HasSubstr("--worker-memory-budget: \"12XB\" is not a size"));

  CoordinatorFlags dlrm = Dlrm();
  dlrm.worker_memory_budget = "40MiB";
  EXPECT_THAT(std::string(BuildCoordinatorJob(dlrm).status().message()),
              HasSubstr("applies to layer-stack models"));
  EXPECT_EQ(
      BuildCoordinatorJob(Dense()).value().job.worker_memory_budget_bytes(), 0);
}

TEST_F(CoordinatorJobTest, ADlrmInRingModeKeepsEveryRow) {
  CoordinatorFlags f = Dlrm();
  f.mode = "ring";
  absl::StatusOr<CoordinatorJob> built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->job.mode(), v1::MODE_RING);
  EXPECT_TRUE(IsDlrmJob(built->job));
  // A TTL or a memory limit would evict rows a rollback cannot restore.
  f.embedding.ttl_steps = 100;
  absl::Status s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--embedding-ttl-steps: ring mode"));
  f.embedding.ttl_steps = 0;
  f.embedding.max_mb = 64;
  s = BuildCoordinatorJob(f).status();
  EXPECT_THAT(s.message(), HasSubstr("--embedding-max-mb: ring mode"));
}

TEST_F(CoordinatorJobTest, FullTablesAreRingModesAndADlrmsOnly) {
  CoordinatorFlags f = Dlrm();
  f.mode = "ring";
  f.ring_full_table_rows = 1000;
  absl::StatusOr<CoordinatorJob> built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->job.embedding().ring_full_table_rows(), 1000);
  f.mode = "ps";
  EXPECT_THAT(BuildCoordinatorJob(f).status().message(),
              HasSubstr("--ring-full-table-rows: --mode ps keeps the tables"));
  f.mode = "ring";
  f.ring_full_table_rows = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(BuildCoordinatorJob(f).status()));
  f.ring_full_table_rows = int64_t{1} << 30;  // x 26 fields x dim: > 2^31
  EXPECT_THAT(BuildCoordinatorJob(f).status().message(),
              HasSubstr("more than 2^31"));
  CoordinatorFlags dense = Dense();
  dense.ring_full_table_rows = 10;
  EXPECT_THAT(BuildCoordinatorJob(dense).status().message(),
              HasSubstr("has none"));
}

TEST_F(CoordinatorJobTest, HybridNeedsADlrmAndShards) {
  CoordinatorFlags f = Dlrm();
  f.mode = "hybrid";
  absl::StatusOr<CoordinatorJob> built = BuildCoordinatorJob(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->job.mode(), v1::MODE_HYBRID);
  f.shards.clear();
  EXPECT_THAT(BuildCoordinatorJob(f).status().message(),
              HasSubstr("hybrid mode needs --shards"));
  CoordinatorFlags dense = Dense();
  dense.mode = "hybrid";
  const absl::Status s = BuildCoordinatorJob(dense).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("needs a model with embedding tables"));
}

TEST_F(CoordinatorJobTest, ADlrmOnAnotherDatasetIsRefused) {
  for (const std::string dataset : {"fashion-mnist", "synthetic:600"}) {
    CoordinatorFlags f = Dlrm();
    f.dataset = dataset;
    const absl::Status s = BuildCoordinatorJob(f).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("trains on --dataset criteo:DIR"));
    EXPECT_THAT(s.message(), HasSubstr(dataset));
  }
  CoordinatorFlags f = Dlrm();
  f.dataset = "criteo:" + *dir_ + "/missing";
  EXPECT_TRUE(absl::IsNotFound(BuildCoordinatorJob(f).status()));
}

TEST_F(CoordinatorJobTest, ADlrmThatIsNotCriteosShapeIsRefused) {
  CoordinatorFlags f = Dlrm();
  f.model = *dir_ + "/narrow.json";
  const absl::Status s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("10 dense features and 26 categorical"));
}

TEST_F(CoordinatorJobTest, FullRingTablesCannotBeExportedOrInitialized) {
  CoordinatorFlags f = Dlrm();
  f.export_dir = *dir_ + "/out";
  EXPECT_TRUE(BuildCoordinatorJob(f).ok());
  f.mode = "ring";
  f.shards.clear();
  EXPECT_TRUE(BuildCoordinatorJob(f).ok());
  f.ring_full_table_rows = 1000;
  absl::Status s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--export with --ring-full-table-rows"));
  // --init-from: a DLRM export (checked here); not into full ring tables.
  f = Dlrm();
  f.init_from = *dir_ + "/in";
  s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--init-from " + *dir_ + "/in"));
  f.mode = "ring";
  f.ring_full_table_rows = 1000;
  s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--ring-full-table-rows"));
}

TEST_F(CoordinatorJobTest, BadTableOptionsAreRefused) {
  CoordinatorFlags f = Dlrm();
  f.embedding.admit_count = 0;
  f.embedding_given = true;
  const absl::Status s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--embedding-admit-count"));
}

TEST_F(CoordinatorJobTest, EmbeddingFlagsWithADenseModelAreRefused) {
  CoordinatorFlags f = Dense();
  f.embedding_given = true;
  const absl::Status s = BuildCoordinatorJob(f).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--embedding-* flags"));
  EXPECT_THAT(s.message(), HasSubstr("784-16-10 is a dense model"));
}

// A job's optimizer with parameter groups: each group's tensor names become
// their element ranges in the job's flat order.
TEST(JobOptimizerTest, GroupsResolveTheirTensorsToFlatRanges) {
  v1::JobSpec job;
  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 bool buffer) {
    v1::TensorSpec* t = job.add_tensors();
    t->set_name(name);
    for (int64_t d : shape) t->add_shape(d);
    t->set_buffer(buffer);
  };
  add("fc.weight", {2, 3}, false);
  add("fc.bias", {4}, false);
  add("out.bias", {3}, false);
  add("bn.running_mean", {2}, true);
  job.mutable_optimizer()->set_lr(0.1);
  job.mutable_optimizer()->set_beta1(0.9);
  job.mutable_optimizer()->set_beta2(0.999);
  job.mutable_optimizer()->set_epsilon(1e-8);
  v1::ParamGroup* group = job.mutable_optimizer()->add_groups();
  group->add_tensors("out.bias");
  group->add_tensors("fc.bias");
  group->set_lr(0.5);
  absl::StatusOr<OptimizerConfig> config = JobOptimizer(job);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->groups.size(), 1u);
  EXPECT_EQ(config->groups[0].ranges,
            (std::vector<std::pair<int64_t, int64_t>>{{10, 13}, {6, 10}}));
  EXPECT_DOUBLE_EQ(config->groups[0].lr, 0.5);
  group->set_tensors(0, "bn.running_mean");
  EXPECT_THAT(std::string(JobOptimizer(job).status().message()),
              HasSubstr("a buffer"));
  group->set_tensors(0, "fc.bias");  // in the group twice: overlapping ranges
  config = JobOptimizer(job);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(std::string(ValidateOptimizerConfig(*config).message()),
              HasSubstr("two parameter groups"));
}

}  // namespace
}  // namespace ferry
