// Ring mode under churn, with real processes and signals (see
// fault_fixture.h). Every member's weights are compared every 10 steps.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fault/fault_fixture.h"

namespace ferry::testing {
namespace {

TEST(RingFaultTest, MembersJoinDieAndLeaveAndTheRingReforms) {
  auto run = RunLocal(
      "ring-workers",
      FaultJobArgs(
          "ring", {"--digest-every", "10", "--chaos",
                   "join:1@step50,kill:worker1@step125,term:worker0@step225"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ring", 4);
  EXPECT_GE(CountEvents(run->summary, "step_aborted"), 1)
      << run->summary.dump(1);
}

TEST(RingFaultTest, CoordinatorKilledAndResumedFromItsState) {
  auto run = RunLocal("ring-coordinator",
                      FaultJobArgs("ring", {"--digest-every", "10", "--chaos",
                                            "kill:coordinator@step150"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ring", 3);
  EXPECT_EQ(CountEvents(run->summary, "coordinator_restarted"), 1)
      << run->summary.dump(1);
}

// A pipeline job (2 stages, docs/pipeline.md) under the same churn: a
// stage worker killed mid-step fails its replica's step (its neighbour's
// receive fails within the collective timeout), the step is re-formed and
// nothing is applied twice; a joiner completes a second replica.
TEST(RingFaultTest, PipelineStagesJoinDieAndLeaveAndTheRingReforms) {
  auto run = RunLocal(
      "ring-pipeline",
      FaultJobArgs("ring", {"--pipeline-stages", "2", "--micro-batches", "4",
                            "--digest-every", "10", "--chaos",
                            "join:1@step50,kill:worker1@step125,"
                            "term:worker0@step225"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ring", 4);
  EXPECT_GE(CountEvents(run->summary, "step_aborted"), 1)
      << run->summary.dump(1);
}

// BatchNorm in a ring pipeline under the same churn: the stage rings and
// the ring of every member over the state (the running statistics) re-form
// with each generation, the state is gathered with the stages, every
// member's weights and state agree (digests), and the job ends as its
// undisturbed run does.
TEST(RingFaultTest, BatchNormPipelineStagesKeepTheirStatisticsThroughChurn) {
  ExpectHealthyUnderChurn(
      "ring-bn-pipeline", "ring",
      {"--model", BatchNormMlpFile(), "--pipeline-stages", "2",
       "--micro-batches", "2", "--digest-every", "10"});
}

}  // namespace
}  // namespace ferry::testing
