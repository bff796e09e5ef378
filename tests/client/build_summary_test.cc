// BuildSummary: the summary keys fault tests and scripts read, from a
// coordinator status in its JSON form (int64 fields as strings, like
// protobuf's JSON printer writes them).
#include "client/local_cluster.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(BuildSummaryTest, AccountingWorkersSeenEventsAndRecovery) {
  LocalClusterOptions o;
  o.mode = "ps";
  o.workers = 2;
  o.shards = 2;
  o.epochs = 2;
  const std::string status = R"({
    "step": "939", "workers_seen": "3", "wall_seconds": 17.5, "train_loss": 0.3,
    "accounting": [
      {"epoch": "0", "samples_applied": "60000", "samples_released": "64", "samples_dropped": "0"},
      {"epoch": "1", "samples_applied": "60000", "samples_released": "0", "samples_dropped": "2"}],
    "events": [
      {"unix_seconds": 1700000000.5, "kind": "joined", "worker_id": "w2", "step": "10",
       "samples_lost": "0", "detail": ""},
      {"unix_seconds": 1700000001.0, "kind": "evicted", "worker_id": "w0", "step": "20",
       "samples_lost": "128", "detail": "no heartbeat"}],
    "aborted_steps": "1", "rollbacks": "2", "checkpoint_version": "900", "restarts": "1",
    "evals": [{"step": "939", "epoch": "1", "test_accuracy": 0.88, "test_loss": 0.33,
               "seconds": 17.1}]
  })";
  const nlohmann::json s = BuildSummary(o, status, {});
  EXPECT_EQ(s["workers_seen"], 3);
  EXPECT_EQ(s["steps"], 939);
  EXPECT_EQ(s["workers"], 2);
  ASSERT_EQ(s["epochs_accounting"].size(), 2u);
  EXPECT_EQ(s["epochs_accounting"][0],
            nlohmann::json({{"epoch", 0},
                            {"samples_applied", 60000},
                            {"samples_released", 64},
                            {"samples_dropped", 0}}));
  EXPECT_EQ(s["epochs_accounting"][1]["samples_dropped"], 2);
  ASSERT_EQ(s["events"].size(), 2u);
  EXPECT_EQ(s["events"][1], nlohmann::json({{"unix_seconds", 1700000001.0},
                                            {"kind", "evicted"},
                                            {"worker_id", "w0"},
                                            {"step", 20},
                                            {"samples_lost", 128},
                                            {"detail", "no heartbeat"}}));
  EXPECT_EQ(s["aborted_steps"], 1);
  EXPECT_EQ(s["rollbacks"], 2);
  EXPECT_EQ(s["checkpoint_version"], 900);
  EXPECT_EQ(s["coordinator_restarts"], 1);
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.88);
}

TEST(BuildSummaryTest, MissingFieldsReadAsEmpty) {
  const nlohmann::json s = BuildSummary(LocalClusterOptions(), "{}", {});
  EXPECT_EQ(s["workers_seen"], 0);
  EXPECT_EQ(s["epochs_accounting"], nlohmann::json::array());
  EXPECT_EQ(s["events"], nlohmann::json::array());
  EXPECT_EQ(s["checkpoint_version"], -1);
  EXPECT_EQ(s["coordinator_restarts"], 0);
  EXPECT_EQ(s["bytes_per_step_per_worker"], 0.0);
}

}  // namespace
}  // namespace ferry
