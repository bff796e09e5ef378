// The coordinator's pipeline figures: each report's part of a pipeline step
// (StepReport.pipeline) is summed per role into the status, figures that
// are not a stage of the job's are refused and change nothing, and the
// totals survive a coordinator restart.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

v1::PipelineStepFigures Figures(int stage, int stages, double busy) {
  v1::PipelineStepFigures f;
  f.set_stage(stage);
  f.set_stages(stages);
  f.set_busy_seconds(busy);
  f.set_wait_seconds(0.25);
  f.set_step_seconds(2.0);
  f.set_activation_bytes(std::isfinite(busy) ? static_cast<int64_t>(busy * 1000)
                                             : 0);
  f.set_neighbour_bytes_sent(10);
  f.set_neighbour_bytes_received(20);
  return f;
}

TEST(CoordinatorPipelineTest, FiguresAreSummedPerRoleAndBadOnesRefused) {
  v1::JobSpec job = Job(4, 2);
  job.set_pipeline_stages(2);
  Fixture f(job, 16, 1, "state");
  const std::string w = f.Join();
  auto lease = NextWork(f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();

  // Not a stage of this 2-stage job, or not finite: refused, nothing kept.
  for (const v1::PipelineStepFigures& bad :
       {Figures(2, 2, 1.0), Figures(0, 3, 1.0), Figures(-1, 2, 1.0),
        Figures(0, 1, std::numeric_limits<double>::quiet_NaN()),
        Figures(0, 2, -1.0)}) {
    v1::StepReport done = Done(*lease);
    *done.mutable_pipeline() = bad;
    const absl::Status refused = Next(f, w, &done).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("pipeline figures"));
  }
  EXPECT_EQ(f.coordinator->Status().pipeline_size(), 0);
  EXPECT_EQ(f.coordinator->Status().step(), 0);

  // Two steps alone (one worker of a 2-stage job trains the whole model).
  for (double busy : {1.0, 1.5}) {
    v1::StepReport done = Done(*lease);
    *done.mutable_pipeline() = Figures(0, 1, busy);
    lease = NextWork(f, w, &done);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  v1::StatusResponse s = f.coordinator->Status();
  ASSERT_EQ(s.pipeline_size(), 1);
  EXPECT_EQ(s.pipeline(0).role(), "alone");
  EXPECT_EQ(s.pipeline(0).steps(), 2);
  EXPECT_DOUBLE_EQ(s.pipeline(0).busy_seconds(), 2.5);
  EXPECT_DOUBLE_EQ(s.pipeline(0).wait_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(s.pipeline(0).step_seconds(), 4.0);
  EXPECT_EQ(s.pipeline(0).peak_activation_bytes(), 1500);
  EXPECT_EQ(s.pipeline(0).neighbour_bytes_sent(), 20);
  EXPECT_EQ(s.pipeline(0).neighbour_bytes_received(), 40);

  // A stage's figures come before the lone members'; a restart keeps both.
  v1::StepReport done = Done(*lease);
  *done.mutable_pipeline() = Figures(1, 2, 0.5);
  lease = NextWork(f, w, &done);
  ASSERT_TRUE(lease.ok()) << lease.status();
  f.coordinator->Shutdown();
  f.coordinator.reset();
  auto restarted = f.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  f.coordinator = std::move(*restarted);
  s = f.coordinator->Status();
  ASSERT_EQ(s.pipeline_size(), 2);
  EXPECT_EQ(s.pipeline(0).role(), "stage 1 of 2");
  EXPECT_EQ(s.pipeline(0).steps(), 1);
  EXPECT_EQ(s.pipeline(1).role(), "alone");
  EXPECT_EQ(s.pipeline(1).steps(), 2);
}

// A PS pipeline job with a worker memory budget trains whole replicas
// only: of three members of a 2-stage job, the third (which would train the
// whole model alone) waits as a spare, outside the step, and the global
// batch goes to the replica. Without a budget it trains alone.
TEST(CoordinatorPipelineTest, ABudgetLeavesMembersAfterTheLastReplicaSpare) {
  for (const bool budget : {true, false}) {
    SCOPED_TRACE(budget ? "with a budget" : "without");
    v1::JobSpec job = Job(6, 1);
    job.set_pipeline_stages(2);
    if (budget) job.set_worker_memory_budget_bytes(int64_t{1} << 30);
    Fixture f(job, 12, /*min_workers=*/3);
    const std::string a = f.Join(), b = f.Join(), c = f.Join();
    int trained = 0;
    int64_t samples = 0;
    std::vector<std::string> waited;
    for (const std::string& w : {a, b, c}) {
      auto lease = Next(f, w);
      ASSERT_TRUE(lease.ok()) << lease.status();
      if (lease->action() != v1::NextTaskResponse::TRAIN) {
        waited.push_back(w);
        continue;
      }
      ++trained;
      EXPECT_EQ(lease->ring_size(), budget ? 2 : 3);
      for (const v1::DataTask& t : lease->tasks())
        samples += t.end() - t.begin();
    }
    EXPECT_EQ(trained, budget ? 2 : 3);
    EXPECT_EQ(samples, 6);
    EXPECT_EQ(waited.size(), budget ? 1u : 0u);
  }
}

// The epoch's last step has fewer samples than members: a PS pipeline keeps
// its replicas whole, so a member without samples of its own is still in
// the step (it trains its stage of its replica's samples) and in the set
// the shards finalize, with 0 samples.
TEST(CoordinatorPipelineTest, PsReplicasStayWholeWhenSomeMembersHaveNoSamples) {
  v1::JobSpec job = Job(4, 1);
  job.set_pipeline_stages(2);
  job.set_worker_memory_budget_bytes(int64_t{1} << 30);
  Fixture f(job, /*epoch_size=*/3, /*min_workers=*/4);
  std::vector<std::string> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(f.Join());
  int64_t samples = 0;
  for (const std::string& w : workers) {
    auto lease = Next(f, w);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN) << w;
    EXPECT_EQ(lease->ring_size(), 4);
    ASSERT_EQ(lease->step_contributors_size(), 4);
    int64_t set_samples = 0;
    for (const v1::Contributor& c : lease->step_contributors()) {
      set_samples += c.num_samples();
    }
    EXPECT_EQ(set_samples, 3);
    for (const v1::DataTask& t : lease->tasks()) samples += t.end() - t.begin();
  }
  EXPECT_EQ(samples, 3);
}

}  // namespace
}  // namespace ferry
