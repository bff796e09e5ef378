// BuildSummary: the summary keys fault tests and scripts read, from a
// coordinator status in its JSON form (int64 fields as strings, like
// protobuf's JSON printer writes them).
#include <string>
#include <vector>

#include "client/local_cluster.h"
#include "client/status_view.h"
#include "ferry/v1/coordinator.pb.h"
#include "google/protobuf/util/json_util.h"
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

// The status as `ferry local` prints it to JSON (every primitive field).
std::string StatusJson(const v1::StatusResponse& status) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  EXPECT_TRUE(
      google::protobuf::util::MessageToJsonString(status, &out, options).ok());
  return out;
}

TEST(BuildSummaryTest, CtrJobsGetTheirAucAndLogLoss) {
  v1::StatusResponse status;
  status.set_step(40);
  v1::EvalPoint* first = status.add_evals();
  first->set_step(20);
  first->set_test_accuracy(0.7);
  first->set_test_loss(0.55);
  first->set_test_auc(0.71);
  v1::EvalPoint* last = status.add_evals();
  last->set_step(40);
  last->set_final(true);
  last->set_test_accuracy(0.75);
  last->set_test_loss(0.5);
  last->set_test_auc(0.78);
  status.set_unique_ids(40 * 3000);
  // Two shards' ShardInfo, as `ferry local` reads them (proto JSON: int64
  // as strings).
  const std::vector<std::string> shards = {
      R"({"shard_id": 0, "sparse": {"rows": "700", "evicted_ttl": "5"}})",
      R"({"shard_id": 1, "sparse": {"rows": "650", "evicted_ttl": "0"}})"};
  const nlohmann::json s =
      BuildSummary(LocalClusterOptions(), StatusJson(status), shards);
  EXPECT_DOUBLE_EQ(s["unique_ids_per_step"].get<double>(), 3000.0);
  EXPECT_EQ(s["embedding_rows"].get<int64_t>(), 1350);
  EXPECT_EQ(s["embedding"]["evicted_ttl"].get<int64_t>(), 5);
  EXPECT_DOUBLE_EQ(s["test_auc"].get<double>(), 0.78);
  EXPECT_DOUBLE_EQ(s["test_logloss"].get<double>(), 0.5);
  // Not a pipeline job: no pipeline section (the status has "pipeline": []).
  EXPECT_FALSE(s.contains("pipeline")) << s.dump(2);
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.75);
  ASSERT_EQ(s["evals"].size(), 2u);
  EXPECT_DOUBLE_EQ(s["evals"][0]["test_auc"].get<double>(), 0.71);
  EXPECT_DOUBLE_EQ(s["evals"][1]["test_auc"].get<double>(), 0.78);
  EXPECT_EQ(EvalScoresText(*last), "test auc 0.7800 logloss 0.5000");
}

TEST(BuildSummaryTest, DenseJobsHaveNoAuc) {
  v1::StatusResponse status;
  v1::EvalPoint* e = status.add_evals();
  e->set_test_accuracy(0.875);
  e->set_test_loss(0.25);
  const nlohmann::json s =
      BuildSummary(LocalClusterOptions(), StatusJson(status), {});
  EXPECT_FALSE(s.contains("test_auc")) << s.dump();
  EXPECT_FALSE(s.contains("test_logloss"));
  EXPECT_FALSE(s["evals"][0].contains("test_auc"));
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.875);
  EXPECT_EQ(EvalScoresText(*e), "test accuracy 0.8750");
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
