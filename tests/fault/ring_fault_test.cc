// Ring mode under churn, with real processes and signals (see
// fault_fixture.h). Every member's weights are compared every 10 steps.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

// The optimizer state sharded across the members (ZeRO stage 1): the
// joiner takes a slice of the state; the SIGKILLed member's slice and the
// SIGTERMed member's (it leaves with the only copy) come back from the
// ring checkpoints, the steps after them redone; accounting exact, digests
// equal, the undisturbed sharded ring's accuracy.
TEST(RingFaultTest, ShardedOptimizerStateUnderChurnResumesFromCheckpoints) {
  const std::vector<std::string> job = {"--ring-shard-optimizer-state", "true",
                                        "--digest-every", "10"};
  const LocalRun& reference =
      Reference("ring-sharded", FaultJobArgs("ring", job));
  std::vector<std::string> churn = job;
  churn.insert(churn.end(), {"--chaos", kChurn});
  auto run = RunLocal("ring-sharded", FaultJobArgs("ring", churn));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, reference, "ring", 4);
  EXPECT_GE(CountEvents(run->summary, "ring_resumed"), 2)
      << run->summary.dump(1);
  EXPECT_EQ(CountEvents(run->summary, "ring_state_lost"), 0);
  // Every process's peak memory, the killed one's too (each holds the
  // Fashion-MNIST training set: 188 MB).
  const nlohmann::json& peaks = run->summary.at("peak_rss_mib");
  for (const char* name :
       {"coordinator", "worker0", "worker1", "worker2", "worker3"}) {
    ASSERT_TRUE(peaks.contains(name)) << peaks.dump();
    EXPECT_GT(peaks.at(name).get<double>(), 100.0) << name;
  }
  EXPECT_GE(run->summary.at("worker_peak_rss_mib").get<double>(),
            peaks.at("worker1").get<double>());
}

// Every member killed at once mid-epoch (a node drain, a rolling update),
// three new ones started: none holds the job's state, so the ring resumes
// from the newest ring checkpoint (written every 50 steps by the members,
// each its third) and the steps after it go back to the queue. The job ends
// with exact accounting and the undisturbed run's accuracy.
TEST(RingFaultTest, EveryMemberKilledAtOnceResumesFromTheRingCheckpoint) {
  auto run = RunLocal(
      "ring-all-killed",
      FaultJobArgs("ring", {"--digest-every", "10", "--chaos",
                            "kill:worker0@step160,kill:worker1@step160,"
                            "kill:worker2@step160,join:3@step160"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ring", 6);
  ExpectResumedFromOneCheckpoint(run->summary);
  EXPECT_EQ(CountEvents(run->summary, "ring_state_lost"), 0);
  EXPECT_GE(CountEvents(run->summary, "ring_checkpoint"), 4);
}

// A ring pipeline (2 stages, 3 members: one replica and a member training
// alone) whose members are all SIGKILLed in its second epoch, three new
// ones started: each stage's holders wrote their shares of the ring
// checkpoints, the new ring's rank 0 loads the newest one (every stage) and
// the others gather the stages from it; accounting exact, digests equal,
// the undisturbed ring's accuracy.
TEST(RingFaultTest, PipelineEveryMemberKilledAtOnceResumesFromTheCheckpoint) {
  auto run = RunLocal(
      "ring-pipeline-all-killed",
      FaultJobArgs("ring", {"--pipeline-stages", "2", "--micro-batches", "2",
                            "--digest-every", "10", "--chaos",
                            "kill:worker0@step300,kill:worker1@step300,"
                            "kill:worker2@step300,join:3@step300"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ring", 6);
  ExpectResumedFromOneCheckpoint(run->summary);
  EXPECT_EQ(CountEvents(run->summary, "ring_state_lost"), 0);
  EXPECT_GE(CountEvents(run->summary, "ring_checkpoint"), 6);
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
