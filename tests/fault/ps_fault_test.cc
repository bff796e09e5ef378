// PS mode under churn, with real processes and signals (see fault_fixture.h).
#include "gtest/gtest.h"
#include "tests/fault/fault_fixture.h"

namespace ferry::testing {
namespace {

TEST(PsFaultTest, WorkersJoinDieAndLeaveWhileTraining) {
  auto run =
      RunLocal("ps-workers",
               FaultJobArgs("ps", {"--chaos",
                                   "join:1@step100,kill:worker1@step200,join:1@"
                                   "step300,term:worker0@step450"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 5);
  EXPECT_GE(CountEvents(run->summary, "evicted"), 1) << run->summary.dump(1);
  EXPECT_GE(CountEvents(run->summary, "left"), 1);
}

TEST(PsFaultTest, ShardKilledAndRestartedFromItsCheckpoint) {
  auto run =
      RunLocal("ps-shard", FaultJobArgs("ps", {"--chaos", "kill:ps1@step250"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 3);
  EXPECT_EQ(run->summary.at("restarts").value("ps1", 0), 1)
      << run->summary.dump(1);
}

TEST(PsFaultTest, CoordinatorKilledAndResumedFromItsState) {
  auto run =
      RunLocal("ps-coordinator",
               FaultJobArgs("ps", {"--chaos", "kill:coordinator@step300"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 3);
  EXPECT_EQ(CountEvents(run->summary, "coordinator_restarted"), 1)
      << run->summary.dump(1);
}

}  // namespace
}  // namespace ferry::testing
