// A DLRM trained by a real `ferry local --mode ps` cluster (coordinator, two
// PS shards holding the embedding rows, two workers) on CTR data written by
// `ferry data ctr`, against `ferry-worker --standalone` on the same data with
// the same seed and global batch: sync PS applies exactly the single
// process's steps (dense mean gradient, row-wise Adagrad on the mean row
// gradient), so the test AUC agrees to rounding. The workers' PS traffic
// follows the batch's unique ids, not the tables' size.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/process_run.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

using ::ferry::testing::FerryBin;
using ::ferry::testing::ProcessRun;
using ::ferry::testing::ReadJsonFile;
using ::ferry::testing::RunToEnd;

constexpr int kTrainRows = 12000;
constexpr int kBatch = 64;

class CtrPsJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/ctr-ps-job-", getpid()));
    const ProcessRun gen = testing::WriteSmallCtrJob(*dir_, kTrainRows, 3000);
    ASSERT_EQ(gen.rc, 0) << gen.output;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::string Bin(const std::string& name) { return FerryBin(name); }
  // The job's flags, shared by both runs.
  static std::vector<std::string> JobFlags(int epochs = 1) {
    return testing::CtrTrainFlags(*dir_ + "/small.json", *dir_ + "/data",
                                  epochs, kBatch);
  }

  // Jobs in each of `modes` started with --init-from `init` (an export or a
  // ring checkpoint directory) and learning rates too small to move anything:
  // their evaluation is `trained`'s. Logs and summaries are named after `tag`.
  static void ExpectEveryModeStartsFrom(const std::string& init,
                                        const std::string& tag,
                                        const nlohmann::json& trained,
                                        const std::vector<std::string>& modes) {
    for (const std::string& mode : modes) {
      SCOPED_TRACE(mode);
      std::vector<std::string> local = {
          Bin("ferry"),     "local",
          "--mode",         mode,
          "--workers",      "2",
          "--init-from",    init,
          "--model",        *dir_ + "/small.json",
          "--dataset",      "criteo:" + *dir_ + "/data",
          "--batch",        std::to_string(kBatch),
          "--seed",         "5",
          "--optimizer",    "sgd",
          "--lr",           "1e-30",
          "--embedding-lr", "1e-30",
          "--max-steps",    "6",
          "--log-dir",      *dir_ + "/" + tag + "-logs-" + mode,
          "--timeout",      "180",
          "--summary-json", *dir_ + "/" + tag + "-" + mode + ".json"};
      if (mode != "ring") local.insert(local.end(), {"--shards", "2"});
      // PS: two partitions per shard process, four logical shards, each
      // loading its own rows.
      if (mode == "ps") local.insert(local.end(), {"--partitions", "2"});
      const ProcessRun p = RunToEnd(
          local, *dir_ + "/" + tag + "-" + mode + ".log", absl::Seconds(240));
      ASSERT_EQ(p.rc, 0) << p.output;
      const nlohmann::json d =
          ReadJsonFile(*dir_ + "/" + tag + "-" + mode + ".json");
      ASSERT_FALSE(d.is_discarded()) << p.output;
      EXPECT_NEAR(d["test_auc"].get<double>(),
                  trained["test_auc"].get<double>(), 1e-5)
          << p.output;
      EXPECT_NEAR(d["test_logloss"].get<double>(),
                  trained["test_logloss"].get<double>(), 1e-5);
      // Every exported row is on a shard (the steps' new ids beside them).
      EXPECT_GE(d["embedding_rows"].get<int64_t>(),
                trained["embedding_rows"].get<int64_t>());
      if (mode != "ring") {  // ring members hold the tables themselves
        std::ifstream shard_log(*dir_ + "/" + tag + "-logs-" + mode +
                                "/ps0.log");
        const std::string log((std::istreambuf_iterator<char>(shard_log)), {});
        EXPECT_THAT(log, HasSubstr("embedding rows from --init-from"));
      }
    }
  }

  static std::string* dir_;
};
std::string* CtrPsJobTest::dir_ = nullptr;

TEST_F(CtrPsJobTest, TwoShardsTwoWorkersMatchOneProcess) {
  std::vector<std::string> alone = {Bin("ferry-worker"), "--standalone",
                                    "--summary-json", *dir_ + "/alone.json"};
  const std::vector<std::string> job = JobFlags();
  alone.insert(alone.end(), job.begin(), job.end());
  const ProcessRun a =
      RunToEnd(alone, *dir_ + "/alone.log", absl::Seconds(180));
  ASSERT_EQ(a.rc, 0) << a.output;
  const nlohmann::json s = ReadJsonFile(*dir_ + "/alone.json");
  ASSERT_FALSE(s.is_discarded()) << a.output;

  std::vector<std::string> local = {Bin("ferry"),     "local",
                                    "--mode",         "ps",
                                    "--workers",      "2",
                                    "--shards",       "2",
                                    "--log-dir",      *dir_ + "/logs",
                                    "--timeout",      "240",
                                    "--summary-json", *dir_ + "/ps.json"};
  local.insert(local.end(), job.begin(), job.end());
  const ProcessRun p = RunToEnd(local, *dir_ + "/ps.log", absl::Seconds(300));
  ASSERT_EQ(p.rc, 0) << p.output;
  EXPECT_THAT(p.output, HasSubstr("test auc"));
  const nlohmann::json d = ReadJsonFile(*dir_ + "/ps.json");
  ASSERT_FALSE(d.is_discarded()) << p.output;

  const double auc = d["test_auc"].get<double>();
  EXPECT_GT(auc, 0.65) << p.output;
  EXPECT_NEAR(auc, s["test_auc"].get<double>(), 2e-3) << p.output;
  EXPECT_NEAR(d["test_logloss"].get<double>(), s["test_logloss"].get<double>(),
              2e-3);
  const int64_t steps = d["steps"].get<int64_t>();
  EXPECT_EQ(steps, (kTrainRows + kBatch - 1) / kBatch);
  // The same steps create the same rows, spread over the two shards.
  EXPECT_EQ(d["embedding_rows"].get<int64_t>(),
            s["embedding_rows"].get<int64_t>());
  const double unique_ids = d["unique_ids_per_step"].get<double>();
  EXPECT_GT(unique_ids, 0.0);
  EXPECT_LE(unique_ids, 26.0 * kBatch);

  // Per step, a worker pulls and pushes the dense part (6,137 floats for
  // small.json) and its half-batch's unique rows (ids of 8 bytes out, 8
  // floats back; ids and 8 gradient floats out): at most 26 x 32 rows. A
  // pull of whole tables would be ~28,000 rows of 32 bytes.
  const double dense_bytes = 4.0 * 6137;
  const nlohmann::json& to_ps = d["worker_bytes_by_peer"]["ps"];
  const double ps_bytes =
      to_ps["sent"].get<double>() + to_ps["received"].get<double>();
  const double per_worker_step = ps_bytes / steps / 2;
  const double row_bytes = 2 * (8 + 8 * 4);
  EXPECT_GT(per_worker_step, 2 * dense_bytes) << d.dump(2);
  EXPECT_LT(per_worker_step,
            2 * dense_bytes + 26.0 * kBatch / 2 * row_bytes + 8192)
      << d.dump(2);
  // What moves beyond the dense part is the unique rows: ~80 bytes each.
  const double row_traffic = ps_bytes / steps - 2 * 2 * dense_bytes;
  EXPECT_GT(row_traffic, 0.9 * unique_ids * row_bytes) << d.dump(2);
  EXPECT_LT(row_traffic, 1.3 * unique_ids * row_bytes + 4096) << d.dump(2);
}

TEST_F(CtrPsJobTest, AsyncAndSspJobsLearnToo) {
  for (const std::string consistency : {"async", "ssp:2"}) {
    const std::string name = consistency == "async" ? "async" : "ssp";
    std::vector<std::string> local = {
        Bin("ferry"),     "local",
        "--mode",         "ps",
        "--workers",      "2",
        "--shards",       "2",
        "--consistency",  consistency,
        "--log-dir",      *dir_ + "/" + name + "-logs",
        "--timeout",      "240",
        "--summary-json", *dir_ + "/" + name + ".json"};
    const std::vector<std::string> job = JobFlags();
    local.insert(local.end(), job.begin(), job.end());
    const ProcessRun p =
        RunToEnd(local, *dir_ + "/" + name + ".log", absl::Seconds(300));
    ASSERT_EQ(p.rc, 0) << p.output;
    const nlohmann::json d = ReadJsonFile(*dir_ + "/" + name + ".json");
    ASSERT_FALSE(d.is_discarded()) << p.output;
    // Stale rows and weights cost a little accuracy, not the model.
    EXPECT_GT(d["test_auc"].get<double>(), 0.65) << consistency << p.output;
    EXPECT_GT(d["embedding_rows"].get<int64_t>(), 0);
  }
}

TEST_F(CtrPsJobTest, WorkersJoinAndLeaveMidTraining) {
  // Two epochs (376 steps): a third worker joins at step 20 (it is training
  // a second or two later, once it has loaded the data), the first one
  // leaves (SIGTERM: it finishes its step and says goodbye) at step 60;
  // every sample of each epoch is applied exactly once.
  std::vector<std::string> local = {
      Bin("ferry"),     "local",
      "--mode",         "ps",
      "--workers",      "2",
      "--shards",       "2",
      "--chaos",        "join:1@step20,term:worker0@step60",
      "--log-dir",      *dir_ + "/elastic-logs",
      "--timeout",      "240",
      "--summary-json", *dir_ + "/elastic.json"};
  const std::vector<std::string> job = JobFlags(/*epochs=*/2);
  local.insert(local.end(), job.begin(), job.end());
  const ProcessRun p =
      RunToEnd(local, *dir_ + "/elastic.log", absl::Seconds(300));
  ASSERT_EQ(p.rc, 0) << p.output;
  const nlohmann::json d = ReadJsonFile(*dir_ + "/elastic.json");
  ASSERT_FALSE(d.is_discarded()) << p.output;
  EXPECT_EQ(d["workers_seen"].get<int>(), 3) << d.dump(2);
  // One worker left before the end, and all three had steps applied (ids
  // are given in registration order, not in start order).
  int left_early = 0, applied = 0;
  for (const nlohmann::json& e : d["events"]) {
    const std::string kind = e["kind"].get<std::string>();
    if (kind == "left" &&
        e["step"].get<int64_t>() < d["steps"].get<int64_t>()) {
      ++left_early;
    }
    if (kind == "first_applied") ++applied;
  }
  EXPECT_EQ(left_early, 1) << d["events"].dump(2);
  EXPECT_EQ(applied, 3) << d["events"].dump(2);
  ASSERT_EQ(d["epochs_accounting"].size(), 2u) << d.dump(2);
  for (const nlohmann::json& epoch : d["epochs_accounting"]) {
    EXPECT_EQ(epoch["samples_applied"].get<int64_t>(), kTrainRows) << d.dump(2);
  }
  EXPECT_GT(d["test_auc"].get<double>(), 0.65) << p.output;
}

TEST_F(CtrPsJobTest, EveryModeStartsFromAStandaloneExport) {
  // ferry-worker --standalone trains briefly and exports the DLRM.
  const std::string exported = *dir_ + "/export";
  std::vector<std::string> alone = {
      Bin("ferry-worker"), "--standalone",
      "--max-steps",       "40",
      "--export",          exported,
      "--summary-json",    *dir_ + "/trained.json"};
  const std::vector<std::string> job = JobFlags();
  alone.insert(alone.end(), job.begin(), job.end());
  const ProcessRun a =
      RunToEnd(alone, *dir_ + "/trained.log", absl::Seconds(180));
  ASSERT_EQ(a.rc, 0) << a.output;
  const nlohmann::json trained = ReadJsonFile(*dir_ + "/trained.json");
  ASSERT_FALSE(trained.is_discarded()) << a.output;

  // PS, hybrid and ring jobs start from it (the shards load the rows placed
  // on them, ring members the whole tables; the dense weights come from
  // model.safetensors: to the shards, or to the ring members) with
  // learning rates too small to move anything: their evaluation is the
  // export's.
  ExpectEveryModeStartsFrom(exported, "export", trained,
                            {"ps", "hybrid", "ring"});
}

// --init-from of a ring DLRM job's checkpoint directory: its newest complete
// checkpoint's dense parameters (every part) and tables (part 0, here
// written by rank 0 alone), read by the shards, the ring members and the
// single process as an export's are.
TEST_F(CtrPsJobTest, EveryModeStartsFromARingCheckpoint) {
  const std::string logs = *dir_ + "/ring-ckpt-logs";
  std::vector<std::string> ring = {Bin("ferry"),
                                   "local",
                                   "--mode",
                                   "ring",
                                   "--workers",
                                   "2",
                                   "--max-steps",
                                   "40",
                                   "--checkpoint-every",
                                   "20",
                                   "--ring-checkpoint-writers",
                                   "rank0",
                                   "--log-dir",
                                   logs,
                                   "--timeout",
                                   "180",
                                   "--summary-json",
                                   *dir_ + "/ring-trained.json"};
  const std::vector<std::string> job = JobFlags();
  ring.insert(ring.end(), job.begin(), job.end());
  const ProcessRun r =
      RunToEnd(ring, *dir_ + "/ring-trained.log", absl::Seconds(240));
  ASSERT_EQ(r.rc, 0) << r.output;
  const nlohmann::json trained = ReadJsonFile(*dir_ + "/ring-trained.json");
  ASSERT_FALSE(trained.is_discarded()) << r.output;
  // The checkpoint after the last step: the weights the job's final
  // evaluation scored.
  const std::string checkpoints = logs + "/ring";
  ASSERT_TRUE(
      std::filesystem::exists(checkpoints + "/shard-0-v000000000040.ckpt"))
      << r.output;
  ExpectEveryModeStartsFrom(checkpoints, "ring-ckpt", trained, {"ps", "ring"});

  // The single process evaluates it to the same scores.
  std::vector<std::string> alone = {Bin("ferry-worker"),
                                    "--standalone",
                                    "--init-from",
                                    checkpoints,
                                    "--evaluate-only",
                                    "--summary-json",
                                    *dir_ + "/ring-ckpt-alone.json"};
  alone.insert(alone.end(), job.begin(), job.end());
  const ProcessRun a =
      RunToEnd(alone, *dir_ + "/ring-ckpt-alone.log", absl::Seconds(120));
  ASSERT_EQ(a.rc, 0) << a.output;
  const nlohmann::json scored = ReadJsonFile(*dir_ + "/ring-ckpt-alone.json");
  ASSERT_FALSE(scored.is_discarded()) << a.output;
  EXPECT_NEAR(scored["test_auc"].get<double>(),
              trained["test_auc"].get<double>(), 1e-5)
      << a.output;
}

// --export of a distributed job: the coordinator writes the model at its
// evaluations, the tables read from every shard (PS, hybrid) or from a ring
// member. The export evaluates (ferry-worker --standalone --evaluate-only)
// to the job's own final scores, with the job's rows.
TEST_F(CtrPsJobTest, EveryModeExportsWhatItTrained) {
  for (const std::string mode : {"ps", "hybrid", "ring"}) {
    SCOPED_TRACE(mode);
    const std::string exported = *dir_ + "/exported-" + mode;
    std::vector<std::string> local = {
        Bin("ferry"),     "local",
        "--mode",         mode,
        "--workers",      "2",
        "--max-steps",    "25",
        "--export",       exported,
        "--log-dir",      *dir_ + "/export-logs-" + mode,
        "--timeout",      "180",
        "--summary-json", *dir_ + "/export-" + mode + ".json"};
    const std::vector<std::string> job = JobFlags();
    local.insert(local.end(), job.begin(), job.end());
    if (mode != "ring") local.insert(local.end(), {"--shards", "2"});
    const ProcessRun p =
        RunToEnd(local, *dir_ + "/export-" + mode + ".log", absl::Seconds(240));
    ASSERT_EQ(p.rc, 0) << p.output;
    const nlohmann::json trained =
        ReadJsonFile(*dir_ + "/export-" + mode + ".json");
    ASSERT_FALSE(trained.is_discarded()) << p.output;

    std::vector<std::string> evaluate = {
        Bin("ferry-worker"),
        "--standalone",
        "--init-from",
        exported,
        "--evaluate-only",
        "--summary-json",
        *dir_ + "/evaluated-" + mode + ".json"};
    evaluate.insert(evaluate.end(), job.begin(), job.end());
    const ProcessRun e = RunToEnd(
        evaluate, *dir_ + "/evaluated-" + mode + ".log", absl::Seconds(120));
    ASSERT_EQ(e.rc, 0) << e.output;
    const nlohmann::json evaluated =
        ReadJsonFile(*dir_ + "/evaluated-" + mode + ".json");
    ASSERT_FALSE(evaluated.is_discarded()) << e.output;
    EXPECT_NEAR(evaluated["test_auc"].get<double>(),
                trained["test_auc"].get<double>(), 1e-6);
    EXPECT_NEAR(evaluated["test_logloss"].get<double>(),
                trained["test_logloss"].get<double>(), 1e-6);
    EXPECT_EQ(evaluated["embedding_rows"].get<int64_t>(),
              trained["embedding_rows"].get<int64_t>());
  }
}

TEST_F(CtrPsJobTest, RefusesWhatCannotTrainDistributed) {
  // A memory limit evicts rows, which ring mode (every member holding
  // every row, rolled back step by step) cannot: it points at PS.
  const std::string data = "criteo:" + *dir_ + "/data";
  ProcessRun r =
      RunToEnd({Bin("ferry"), "local", "--mode", "ring", "--model", "dlrm",
                "--dataset", data, "--embedding-max-mb", "64", "--log-dir",
                *dir_ + "/ring-logs", "--timeout", "60"},
               *dir_ + "/ring.log", absl::Seconds(90));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--mode ps"));
}

}  // namespace
}  // namespace ferry
