// The pipeline trainer in one process against the single-process trainer:
// same data order, initial values and optimizer schedule, so the weights
// after a few steps agree within 1e-4; the memory budget; the flags.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "model/model_export.h"
#include "pipeline/stage_memory.h"
#include "worker/pipeline_lease_trainer.h"
#include "worker/standalone_trainer.h"

namespace ferry {
namespace {

TrainOptions SmallRun(const std::string& model, OptimizerKind kind) {
  TrainOptions o;
  o.model = model;
  o.dataset = "synthetic:600";
  o.batch = 40;
  o.epochs = 1;
  o.max_steps = 6;
  o.device = DeviceChoice::kCpu;
  o.optimizer.kind = kind;
  o.optimizer.lr = kind == OptimizerKind::kAdam ? 0.01 : 0.05;
  o.optimizer.weight_decay = 0;
  o.optimizer.schedule.kind = ScheduleKind::kCosine;
  o.optimizer.schedule.warmup_steps = 2;
  return o;
}

// The standalone loop with the model in pipeline stages.
absl::StatusOr<TrainSummary> RunPipelineStandalone(
    TrainOptions options, const PipelineOptions& pipeline,
    int64_t memory_budget_bytes, ProgressPrinter& progress) {
  options.pipeline = pipeline;
  options.memory_budget_bytes = memory_budget_bytes;
  return RunStandalone(options, progress);
}

double WorstDifference(const std::vector<float>& a,
                       const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) /
                                std::max(1.0, std::abs(double(b[i]))));
  }
  return worst;
}

// The check in one process: P = 2, M = 4, both schedules, an MLP
// with Adam and the ConvNet (dropout) with momentum.
TEST(PipelineTrainerTest, WeightsEqualOneProcessWithinTolerance) {
  ProgressPrinter quiet(stderr, false);
  for (const auto& [model, kind] : {std::pair<std::string, OptimizerKind>{
                                        "784-64-32-10", OptimizerKind::kAdam},
                                    {"convnet", OptimizerKind::kMomentum}}) {
    TrainOptions options = SmallRun(model, kind);
    if (model == "convnet") options.max_steps = 3;
    auto single = RunStandalone(options, quiet);
    ASSERT_TRUE(single.ok()) << single.status();
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      PipelineOptions pipeline;
      pipeline.stages = 2;
      pipeline.micro_batches = 4;
      pipeline.schedule = schedule;
      auto piped = RunPipelineStandalone(options, pipeline, 0, quiet);
      ASSERT_TRUE(piped.ok()) << piped.status();
      EXPECT_EQ(piped->steps, single->steps);
      EXPECT_LT(
          WorstDifference(piped->final_parameters, single->final_parameters),
          1e-4)
          << model << " " << PipelineScheduleName(schedule);
      EXPECT_NEAR(piped->test.accuracy, single->test.accuracy, 0.01);
      // The summary names the split and each stage's figures.
      ASSERT_TRUE(piped->family["pipeline"].is_object());
      EXPECT_EQ(piped->family["pipeline"]["stages"], 2);
      ASSERT_EQ(piped->family["pipeline"]["per_stage"].size(), 2u);
      for (const auto& stage : piped->family["pipeline"]["per_stage"]) {
        EXPECT_GT(stage["busy_seconds"].get<double>(), 0.0);
        EXPECT_GT(stage["peak_activation_bytes"].get<int64_t>(), 0);
        EXPECT_GT(stage["bytes_sent"].get<int64_t>(), 0);
      }
    }
  }
}

TEST(PipelineTrainerTest, ExportedModelEvaluatesTheSameInOneProcess) {
  ProgressPrinter quiet(stderr, false);
  TrainOptions options = SmallRun("784-64-32-10", OptimizerKind::kMomentum);
  const std::string dir =
      ::testing::TempDir() + "/pipeline_export_" + std::to_string(getpid());
  options.export_dir = dir;
  PipelineOptions pipeline;
  pipeline.stages = 3;
  pipeline.micro_batches = 2;
  auto piped = RunPipelineStandalone(options, pipeline, 0, quiet);
  ASSERT_TRUE(piped.ok()) << piped.status();
  auto values = ImportModel(dir);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->params, piped->final_parameters);
  TrainOptions check = options;
  check.export_dir.clear();
  check.init_from = dir;
  check.evaluate_only = true;
  auto evaluated = RunStandalone(check, quiet);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_NEAR(evaluated->test.accuracy, piped->test.accuracy, 1e-9);
  std::filesystem::remove_all(dir);
}

// A model over the per-worker budget is refused in one stage (nothing
// trains) and trains in two.
TEST(PipelineTrainerTest, MemoryBudgetRefusesOneStageAndTrainsTwo) {
  ProgressPrinter quiet(stderr, false);
  TrainOptions options = SmallRun("784-1024-1024-10", OptimizerKind::kMomentum);
  options.max_steps = 2;
  PipelineOptions pipeline;
  // 1.86M parameters, momentum: ~22 MB in one stage, ~13.5 MB in the
  // larger of two.
  const int64_t budget = int64_t{15} << 20;
  auto refused = RunPipelineStandalone(options, pipeline, budget, quiet);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("the model (layers 0-4)"),
            std::string::npos)
      << refused.status();
  pipeline.stages = 2;
  auto trained = RunPipelineStandalone(options, pipeline, budget, quiet);
  EXPECT_TRUE(trained.ok()) << trained.status();
}

TEST(PipelineTrainerTest, BadOptionsAreRefused) {
  ProgressPrinter quiet(stderr, false);
  TrainOptions options = SmallRun("784-64-32-10", OptimizerKind::kSgd);
  PipelineOptions pipeline;
  pipeline.stages = 4;  // three layers with parameters
  EXPECT_EQ(RunPipelineStandalone(options, pipeline, 0, quiet).status().code(),
            absl::StatusCode::kInvalidArgument);
  pipeline.stages = 2;
  pipeline.micro_batches = 41;  // batch 40
  EXPECT_EQ(RunPipelineStandalone(options, pipeline, 0, quiet).status().code(),
            absl::StatusCode::kInvalidArgument);
  pipeline.micro_batches = 2;
  pipeline.split = {1};  // a ReLU
  EXPECT_EQ(RunPipelineStandalone(options, pipeline, 0, quiet).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Consecutive ranks form replicas; the members after the last whole
// replica train alone.
TEST(PipelineRoleTest, ConsecutiveRanksFormReplicas) {
  EXPECT_EQ(PipelineRoleOf(0, 4, 2), (PipelineRole{0, 0, 2}));
  EXPECT_EQ(PipelineRoleOf(1, 4, 2), (PipelineRole{0, 1, 2}));
  EXPECT_EQ(PipelineRoleOf(3, 4, 2), (PipelineRole{2, 1, 2}));
  EXPECT_EQ(PipelineRoleOf(4, 5, 2), (PipelineRole{4, 0, 1}));  // alone
  EXPECT_EQ(PipelineRoleOf(0, 1, 2), (PipelineRole{0, 0, 1}));
  EXPECT_EQ(PipelineRoleOf(5, 7, 3), (PipelineRole{3, 2, 3}));
  EXPECT_EQ(PipelineRoleOf(6, 7, 3), (PipelineRole{6, 0, 1}));
  EXPECT_EQ(PipelineRoleOf(2, 3, 1), (PipelineRole{2, 0, 1}));
  for (int size = 1; size <= 9; ++size) {
    for (int stages = 1; stages <= 4; ++stages) {
      for (int rank = 0; rank < size; ++rank) {
        const PipelineRole r = PipelineRoleOf(rank, size, stages);
        EXPECT_EQ(r.first_rank + r.stage, rank);
        EXPECT_LE(r.first_rank + r.stages, size);
        EXPECT_TRUE(r.stages == stages || r.stages == 1);
      }
    }
  }
}

TEST(PipelineTrainerTest, FlagsParse) {
  EXPECT_EQ(*ParseByteSize("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("1.5GB"), int64_t{1500000000});
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  for (const char* bad : {"", "MiB", "-1MiB", "12XB", "nanGB"}) {
    EXPECT_EQ(ParseByteSize(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  PipelineFlags flags;
  EXPECT_FALSE(flags.given());
  EXPECT_TRUE(flags.ToArgs().empty());
  flags.stages = 2;
  flags.split = "2";
  flags.schedule = "gpipe";
  EXPECT_TRUE(flags.given());
  EXPECT_EQ(flags.ToArgs(),
            (std::vector<std::string>{
                "--pipeline-stages", "2", "--micro-batches", "1",
                "--pipeline-schedule", "gpipe", "--pipeline-balance", "compute",
                "--pipeline-split", "2"}));
  auto options = ParsePipelineFlags(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->split, std::vector<int>{2});
  EXPECT_EQ(options->schedule, PipelineSchedule::kGPipe);
  flags.schedule = "zb";
  auto bad = ParsePipelineFlags(flags);
  EXPECT_NE(bad.status().message().find("--pipeline-schedule"),
            std::string::npos);
  flags.schedule = "1f1b";
  flags.split = "2,x";
  EXPECT_NE(
      ParsePipelineFlags(flags).status().message().find("--pipeline-split"),
      std::string::npos);
}

// A job's pipeline fields read back: defaults for what the job leaves
// empty, the coordinator's resolved split as it is.
TEST(PipelineTrainerTest, JobPipelineOptionsReadTheJobsFields) {
  v1::JobSpec job;
  auto defaults = JobPipelineOptions(job);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->stages, 1);
  EXPECT_EQ(defaults->micro_batches, 1);
  EXPECT_EQ(defaults->schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(defaults->balance, StageBalance::kCompute);
  job.set_pipeline_stages(3);
  job.set_micro_batches(4);
  job.set_pipeline_schedule("gpipe");
  job.set_pipeline_balance("params");
  job.add_pipeline_split(2);
  job.add_pipeline_split(5);
  auto read = JobPipelineOptions(job);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->stages, 3);
  EXPECT_EQ(read->micro_batches, 4);
  EXPECT_EQ(read->schedule, PipelineSchedule::kGPipe);
  EXPECT_EQ(read->balance, StageBalance::kParams);
  EXPECT_EQ(read->split, (std::vector<int>{2, 5}));
  job.set_pipeline_balance("flops");
  EXPECT_EQ(JobPipelineOptions(job).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
