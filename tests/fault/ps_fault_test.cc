// PS mode under churn, with real processes and signals (see fault_fixture.h).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_fixture.h"

namespace ferry::testing {
namespace {

// Workers join, one is SIGKILLed at step 100 and one leaves at step 225,
// with `flags`; the run's summary, once it passed ExpectHealthyRun.
nlohmann::json ChurnedPsRun(const std::string& name,
                            std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--chaos",
                             "join:1@step50,kill:worker1@step100,join:1@"
                             "step150,term:worker0@step225"});
  auto run = RunLocal(name, FaultJobArgs("ps", flags));
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return nlohmann::json();
  ExpectHealthyRun(*run, "ps", 5);
  EXPECT_GE(CountEvents(run->summary, "evicted"), 1) << run->summary.dump(1);
  EXPECT_GE(CountEvents(run->summary, "left"), 1);
  return run->summary;
}

// The shards serve 2 partitions each: a worker killed after its pushes
// reached some partitions leaves those applied on push over a set the
// coordinator then changes, which the job must undo on every partition
// alike (restore to a common checkpoint) so that nothing is applied twice
// or half.
TEST(PsFaultTest, WorkersJoinDieAndLeaveWhileTraining) {
  ChurnedPsRun("ps-workers", {"--partitions", "2"});
}

// Shards that sum pushes on arrival (--sum-on-arrival): a worker lost
// mid-step aborts the step (the shards roll back its sums, which cannot be
// taken apart) and the step is formed again without it. Every sample is
// applied exactly once.
TEST(PsFaultTest, SumOnArrivalWorkersJoinDieAndLeaveWhileTraining) {
  const nlohmann::json summary =
      ChurnedPsRun("ps-arrival", {"--sum-on-arrival", "true"});
  EXPECT_GE(CountEvents(summary, "step_aborted"), 1) << summary.dump(1);
}

// A sync PS pipeline job (2 stages, docs/pipeline.md) under churn: a
// stage worker killed mid-step fails its replica's step (its neighbour
// reports it and the coordinator re-forms the step under a new fence, the
// shards refusing the old attempt's pushes), nothing is applied twice, and
// a joiner completes a second replica.
TEST(PsFaultTest, PipelineStagesJoinDieAndLeaveWhileTraining) {
  auto run = RunLocal("ps-pipeline",
                      FaultJobArgs("ps", {"--pipeline-stages", "2",
                                          "--micro-batches", "4", "--chaos",
                                          "join:1@step50,kill:worker1@step125,"
                                          "term:worker0@step225"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 4);
  EXPECT_GE(CountEvents(run->summary, "step_aborted"), 1)
      << run->summary.dump(1);
}

// The same with BatchNorm and a worker memory budget: only whole replicas
// train, so of 3 workers one waits as a spare until the kill takes a stage
// away; every stage pulls and pushes its statistics' range with its
// parameters', and a member without samples of its own (the epoch's last
// step) still pushes its stage.
TEST(PsFaultTest, BudgetedBatchNormPipelineWithASpareThroughChurn) {
  ExpectHealthyUnderChurn(
      "ps-bn-pipeline-budget", "ps",
      {"--model", BatchNormMlpFile(), "--pipeline-stages", "2",
       "--micro-batches", "2", "--worker-memory-budget", "64MiB"});
}

// A shard process SIGKILLed mid-job comes back from its checkpoints; the
// job rolls every shard back to a version they all hold and still applies
// every sample exactly once. The process serves 2 partitions (4 logical
// shards, each applied on its own pushes: docs/operations.md): both come
// back, each from its own checkpoint directory. (One partition per process
// is the same path with the directory itself: the sparse fault tests kill
// such a shard.)
TEST(PsFaultTest, ShardKilledAndRestartedFromItsCheckpoint) {
  auto run = RunLocal(
      "ps-shard",
      FaultJobArgs("ps", {"--partitions", "2", "--chaos", "kill:ps1@step125"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 3);
  EXPECT_EQ(run->summary.at("restarts").value("ps1", 0), 1)
      << run->summary.dump(1);
  EXPECT_EQ(run->summary.at("partitions").get<int>(), 2);
  for (int shard : {1, 3}) {  // process 1's partitions
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(run->log_dir, "/logs/ps1/shard-", shard)))
        << run->log_dir;
  }
}

// Colocated shards (ferry local --colocated-shards): ps0 and ps1 are
// ferry-workers that host shard processes 0 and 1, worker0 a plain worker.
// Undisturbed, they train the job the separate shard processes train: the
// same sync steps over the same shards, so the same test loss.
TEST(PsFaultTest, ColocatedShardsTrainWhatSeparateShardsTrain) {
  auto run =
      RunLocal("ps-colocated", FaultJobArgs("ps", {"--colocated-shards"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 3);
  const nlohmann::json& s = run->summary;
  EXPECT_TRUE(s.at("colocated_shards").get<bool>());
  const nlohmann::json& reference = Reference("ps").summary;
  EXPECT_NEAR(s.at("evals").back().at("test_loss").get<double>(),
              reference.at("evals").back().at("test_loss").get<double>(), 1e-4)
      << "logs in " << run->log_dir;
  // The shards' own worker reaches them in-process: each hosting worker
  // sends (and receives) a third less over sockets than with no shard of
  // its own, so the mean per worker is below the separate shards' run.
  EXPECT_LT(s.at("bytes_per_step_per_worker").get<double>(),
            0.9 * reference.at("bytes_per_step_per_worker").get<double>());
  for (const char* name : {"ps0", "ps1"}) {
    std::ifstream log(absl::StrCat(run->log_dir, "/logs/", name, ".log"));
    const std::string text((std::istreambuf_iterator<char>(log)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("hosting PS shards in the worker's process"),
              std::string::npos)
        << name << ": " << text;
    EXPECT_NE(text.find("registered with"), std::string::npos) << text;
    // One SIGTERM at the job's end: the process writes its shard's last
    // checkpoint and exits (ferry local's second SIGTERM used to end it
    // first, killed with 143).
    EXPECT_NE(text.find("PS shard stopped"), std::string::npos)
        << name << ": " << text;
  }
}

// A colocated process SIGKILLed mid-training loses a worker and a shard at
// once: the supervisor restarts it like a shard, its shard resumes from its
// checkpoint with the job rolled back to it, its lease goes to the others,
// and the restarted process trains again as a new member. Nothing is
// applied twice or lost.
TEST(PsFaultTest, ColocatedProcessKilledRestartsItsShardAndWorker) {
  auto run = RunLocal("ps-colocated-kill",
                      FaultJobArgs("ps", {"--colocated-shards", "--chaos",
                                          "kill:ps1@step125"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 4);  // ps0, ps1, worker0, ps1 restarted
  EXPECT_EQ(run->summary.at("restarts").value("ps1", 0), 1)
      << run->summary.dump(1);
  EXPECT_GE(run->summary.at("rollbacks").get<int64_t>(), 1)
      << run->summary.dump(1);
}

// A worker paused (SIGSTOP) past the heartbeat timeout is evicted; once
// continued it learns so and registers again as a new member instead of
// exiting (ferry-worker --max-rejoins).
TEST(PsFaultTest, WorkerPausedPastTheHeartbeatTimeoutRejoins) {
  auto run = RunLocal(
      "ps-paused",
      FaultJobArgs("ps",
                   {"--chaos", "stop:worker1@step100,cont:worker1@step140"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 4);  // the paused one came back as a 4th id
  EXPECT_GE(CountEvents(run->summary, "evicted"), 1) << run->summary.dump(1);
  std::ifstream log(absl::StrCat(run->log_dir, "/logs/worker1.log"));
  const std::string text((std::istreambuf_iterator<char>(log)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("registering again as a new member"), std::string::npos)
      << text;
  size_t registered = 0;
  for (size_t at = text.find("registered with"); at != std::string::npos;
       at = text.find("registered with", at + 1))
    ++registered;
  EXPECT_EQ(registered, 2u) << text;
  EXPECT_EQ(text.find("worker failed"), std::string::npos) << text;
}

TEST(PsFaultTest, CoordinatorKilledAndResumedFromItsState) {
  auto run =
      RunLocal("ps-coordinator",
               FaultJobArgs("ps", {"--chaos", "kill:coordinator@step150"}));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, "ps", 3);
  EXPECT_EQ(CountEvents(run->summary, "coordinator_restarted"), 1)
      << run->summary.dump(1);
}

}  // namespace
}  // namespace ferry::testing
