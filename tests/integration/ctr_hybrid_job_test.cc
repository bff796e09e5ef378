// A DLRM trained by a real `ferry local --mode hybrid` cluster (the
// embedding tables on two PS shards, the dense layers all-reduced in the
// ring of two workers, one step committed on both sides or neither) and by
// `ferry local --mode ring` (every member holds the whole tables; a step
// all-gathers the touched rows' gradients). Checked against `ferry-worker
// --standalone` on the same data, seed and global batch (a sync step is the
// single process's step: the dense mean gradient through the same
// optimizer, row-wise Adagrad on the mean row gradient), and for what moves
// where.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
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

// 12,001 rows at batch 64: the epoch's last step has one sample, so one of
// the two ring members trains an empty lease (zeros, no rows pushed).
constexpr int kTrainRows = 12001;
constexpr int kBatch = 64;
constexpr int kSteps = (kTrainRows + kBatch - 1) / kBatch;  // 188
// Dense parameters of small.json (bottom 13-16-8, top 36+8-16-1).
constexpr double kDenseFloats = 6137;

class CtrHybridJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/ctr-hybrid-job-", getpid()));
    const ProcessRun gen = testing::WriteSmallCtrJob(*dir_, kTrainRows, 3000);
    ASSERT_EQ(gen.rc, 0) << gen.output;
  }
  // The logs stay when a test failed (the path is printed).
  static void TearDownTestSuite() {
    if (::testing::UnitTest::GetInstance()->failed_test_count() == 0) {
      std::filesystem::remove_all(*dir_);
    } else {
      std::fprintf(stderr, "logs kept in %s\n", dir_->c_str());
    }
    delete dir_;
  }

  static std::vector<std::string> JobFlags(int epochs = 1) {
    return testing::CtrTrainFlags(*dir_ + "/small.json", *dir_ + "/data",
                                  epochs, kBatch);
  }
  // `ferry local --mode hybrid` with 2 shards and `workers` workers, plus
  // `extra`; its summary in NAME.json, its output in NAME.log.
  static ProcessRun RunHybrid(const std::string& name, int workers,
                              const std::vector<std::string>& extra,
                              int epochs = 1) {
    return RunMode("hybrid", name, workers, extra, epochs);
  }
  // The same in `mode` (ring: no shards).
  static ProcessRun RunMode(const std::string& mode, const std::string& name,
                            int workers, const std::vector<std::string>& extra,
                            int epochs = 1) {
    std::vector<std::string> local = {
        FerryBin("ferry"), "local",
        "--mode",          mode,
        "--workers",       std::to_string(workers),
        "--log-dir",       *dir_ + "/" + name + "-logs",
        "--timeout",       "240",
        "--summary-json",  *dir_ + "/" + name + ".json"};
    if (mode != "ring") local.insert(local.end(), {"--shards", "2"});
    local.insert(local.end(), extra.begin(), extra.end());
    const std::vector<std::string> job = JobFlags(epochs);
    local.insert(local.end(), job.begin(), job.end());
    return RunToEnd(local, *dir_ + "/" + name + ".log", absl::Seconds(300));
  }

  // `ferry-worker --standalone` on the same job (run once, its summary
  // kept).
  static const nlohmann::json& Alone() {
    static const nlohmann::json* alone = [] {
      std::vector<std::string> args = {FerryBin("ferry-worker"), "--standalone",
                                       "--summary-json", *dir_ + "/alone.json"};
      const std::vector<std::string> job = JobFlags();
      args.insert(args.end(), job.begin(), job.end());
      const ProcessRun a =
          RunToEnd(args, *dir_ + "/alone.log", absl::Seconds(180));
      EXPECT_EQ(a.rc, 0) << a.output;
      return new nlohmann::json(ReadJsonFile(*dir_ + "/alone.json"));
    }();
    return *alone;
  }

  static std::string* dir_;
};
std::string* CtrHybridJobTest::dir_ = nullptr;

double SentAndReceived(const nlohmann::json& counts) {
  return counts.value("sent", 0.0) + counts.value("received", 0.0);
}

TEST_F(CtrHybridJobTest, TwoShardsTwoWorkersMatchOneProcess) {
  const nlohmann::json& s = Alone();
  ASSERT_TRUE(s.is_object());

  const ProcessRun h = RunHybrid("hybrid", 2, {"--digest-every", "10"});
  ASSERT_EQ(h.rc, 0) << h.output;
  EXPECT_THAT(h.output, HasSubstr("hybrid mode"));
  const nlohmann::json d = ReadJsonFile(*dir_ + "/hybrid.json");
  ASSERT_FALSE(d.is_discarded()) << h.output;

  const double auc = d["test_auc"].get<double>();
  EXPECT_GT(auc, 0.65) << h.output;
  EXPECT_NEAR(auc, s["test_auc"].get<double>(), 2e-3) << h.output;
  EXPECT_NEAR(d["test_logloss"].get<double>(), s["test_logloss"].get<double>(),
              2e-3);
  EXPECT_EQ(d["steps"].get<int64_t>(), kSteps);
  ASSERT_EQ(d["epochs_accounting"].size(), 1u) << d.dump(2);
  EXPECT_EQ(d["epochs_accounting"][0]["samples_applied"].get<int64_t>(),
            kTrainRows);
  // The same steps create the same rows on the shards.
  EXPECT_EQ(d["embedding_rows"].get<int64_t>(),
            s["embedding_rows"].get<int64_t>());
  // The members' dense layers stayed bitwise identical.
  EXPECT_GT(d["digest_checks"].get<int64_t>(), 0) << d.dump(2);
  EXPECT_EQ(d["digest_mismatches"].get<int64_t>(), 0) << d.dump(2);

  // Shards: only rows (ids of 8 bytes and 8 floats each way, ~80 bytes per
  // unique id and step), no dense chunk. Ring: the dense gradient, 2(n-1)/n
  // of it sent and received per member and step (n = 2), plus the initial
  // broadcast of the weights and Adam's two moments.
  const double unique_ids = d["unique_ids_per_step"].get<double>();
  ASSERT_GT(unique_ids, 0.0);
  const double ps_bytes = SentAndReceived(d["worker_bytes_by_peer"]["ps"]);
  const double row_bytes = 2 * (8 + 8 * 4);
  EXPECT_GT(ps_bytes / kSteps, 0.9 * unique_ids * row_bytes) << d.dump(2);
  EXPECT_LT(ps_bytes / kSteps, 1.3 * unique_ids * row_bytes + 4096)
      << d.dump(2);
  const double ring_bytes =
      SentAndReceived(d["worker_bytes_by_peer"]["worker"]);
  const double dense_step = 4 * kDenseFloats;  // per member, each way
  EXPECT_GT(ring_bytes, kSteps * 2 * 2 * dense_step) << d.dump(2);
  EXPECT_LT(ring_bytes, (kSteps + 3 * 4) * 2 * 2 * dense_step) << d.dump(2);
}

TEST_F(CtrHybridJobTest, WorkersJoinAndLeaveMidTraining) {
  // Two epochs: a third worker joins at step 20, the first leaves (SIGTERM)
  // at step 60. Each change aborts the ring's open step: the members roll
  // their dense state back, the shards drop the step's buffered rows, and
  // every sample of each epoch is applied exactly once.
  const ProcessRun p = RunHybrid(
      "elastic", 2, {"--chaos", "join:1@step20,term:worker0@step60"}, 2);
  ASSERT_EQ(p.rc, 0) << p.output;
  const nlohmann::json d = ReadJsonFile(*dir_ + "/elastic.json");
  ASSERT_FALSE(d.is_discarded()) << p.output;
  EXPECT_EQ(d["workers_seen"].get<int>(), 3) << d.dump(2);
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
  EXPECT_EQ(d["digest_mismatches"].get<int64_t>(), 0) << d.dump(2);
  EXPECT_GT(d["test_auc"].get<double>(), 0.65) << p.output;
}

TEST_F(CtrHybridJobTest, RingOfThreeWorkersMatchesOneProcess) {
  const nlohmann::json& s = Alone();
  ASSERT_TRUE(s.is_object());
  const ProcessRun r = RunMode("ring", "ring", 3, {"--digest-every", "10"});
  ASSERT_EQ(r.rc, 0) << r.output;
  const nlohmann::json d = ReadJsonFile(*dir_ + "/ring.json");
  ASSERT_FALSE(d.is_discarded()) << r.output;
  // The same steps as one process, the dense all-reduce summing in another
  // order (measured: AUC within 1e-4).
  const double auc = d["test_auc"].get<double>();
  EXPECT_GT(auc, 0.65) << r.output;
  EXPECT_NEAR(auc, s["test_auc"].get<double>(), 2e-3) << r.output;
  EXPECT_NEAR(d["test_logloss"].get<double>(), s["test_logloss"].get<double>(),
              2e-3);
  EXPECT_EQ(d["steps"].get<int64_t>(), kSteps);
  EXPECT_EQ(d["epochs_accounting"][0]["samples_applied"].get<int64_t>(),
            kTrainRows);
  // The evaluated member holds the rows one process creates, and every
  // member's tables and dense layers stayed bitwise identical.
  EXPECT_EQ(d["embedding_rows"].get<int64_t>(),
            s["embedding_rows"].get<int64_t>())
      << d.dump(2);
  EXPECT_GT(d["digest_checks"].get<int64_t>(), 0) << d.dump(2);
  EXPECT_EQ(d["digest_mismatches"].get<int64_t>(), 0) << d.dump(2);
  // No shard; between the members the dense gradient (2(n-1)/n of it each
  // way per member) plus the all-gathered rows: each member's ids and row
  // gradients (8 + 8 * 4 bytes per id) travel n - 1 = 2 hops, each counted
  // by its sender and its receiver (unique_ids_per_step sums the members').
  EXPECT_FALSE(d["worker_bytes_by_peer"].contains("ps")) << d.dump(2);
  const double unique_ids = d["unique_ids_per_step"].get<double>();
  ASSERT_GT(unique_ids, 0.0);
  const double ring_bytes =
      SentAndReceived(d["worker_bytes_by_peer"]["worker"]) / kSteps;
  const double dense = 2 * 2.0 * (2.0 / 3.0) * 4 * kDenseFloats * 3;
  const double rows = 2 * 2 * unique_ids * (8 + 8 * 4);
  EXPECT_GT(ring_bytes, 0.9 * (dense + rows)) << d.dump(2);
  EXPECT_LT(ring_bytes, 1.4 * (dense + rows) + 16384) << d.dump(2);
}

TEST_F(CtrHybridJobTest, RingWorkersJoinAndLeaveKeepTheTablesInStep) {
  // Three epochs (a ring step takes ~15 ms here: a worker started at step
  // 20 joins some 50 steps later): a third worker joins (it gets rank 0's
  // tables in the new ring's broadcast), the first leaves at step 300;
  // every sample is applied once and the members' tables stay identical.
  const ProcessRun p = RunMode(
      "ring", "ring-elastic", 2,
      {"--digest-every", "5", "--chaos", "join:1@step20,term:worker0@step300"},
      3);
  ASSERT_EQ(p.rc, 0) << p.output;
  const nlohmann::json d = ReadJsonFile(*dir_ + "/ring-elastic.json");
  ASSERT_FALSE(d.is_discarded()) << p.output;
  EXPECT_EQ(d["workers_seen"].get<int>(), 3) << d.dump(2);
  ASSERT_EQ(d["epochs_accounting"].size(), 3u) << d.dump(2);
  for (const nlohmann::json& epoch : d["epochs_accounting"]) {
    EXPECT_EQ(epoch["samples_applied"].get<int64_t>(), kTrainRows) << d.dump(2);
  }
  EXPECT_GT(d["digest_checks"].get<int64_t>(), 10) << d.dump(2);
  EXPECT_EQ(d["digest_mismatches"].get<int64_t>(), 0) << d.dump(2);
  EXPECT_GT(d["test_auc"].get<double>(), 0.65) << p.output;
}

TEST_F(CtrHybridJobTest, RingFullTablesAllReduceEveryRowLikeDdp) {
  // --ring-full-table-rows 2000: every table is 2,000 rows (ids modulo
  // 2,000) and a step all-reduces all of them. Two workers train what one
  // does (the same hashed tables), and the ring carries the tables' whole
  // gradient every step.
  constexpr int64_t kRows = 2000;
  const std::vector<std::string> full = {"--ring-full-table-rows",
                                         std::to_string(kRows)};
  const ProcessRun one = RunMode("ring", "full-1", 1, full);
  ASSERT_EQ(one.rc, 0) << one.output;
  const ProcessRun two = RunMode("ring", "full-2", 2, full);
  ASSERT_EQ(two.rc, 0) << two.output;
  const nlohmann::json a = ReadJsonFile(*dir_ + "/full-1.json");
  const nlohmann::json d = ReadJsonFile(*dir_ + "/full-2.json");
  ASSERT_FALSE(a.is_discarded() || d.is_discarded()) << two.output;
  EXPECT_GT(d["test_auc"].get<double>(), 0.6) << two.output;
  EXPECT_NEAR(d["test_auc"].get<double>(), a["test_auc"].get<double>(), 2e-3);
  // At most 2,000 rows a table; a dense table of 26 fields would hold
  // 52,000.
  EXPECT_LE(d["embedding_rows"].get<int64_t>(), 26 * kRows) << d.dump(2);
  EXPECT_EQ(d["embedding_rows"].get<int64_t>(),
            a["embedding_rows"].get<int64_t>());
  // Per step, each of the 2 members sends and receives 2(n-1)/n = 1 x
  // (dense gradient + 26 x 2,000 x 8 floats).
  const double ring_bytes =
      SentAndReceived(d["worker_bytes_by_peer"]["worker"]) / kSteps;
  const double per_member = 4 * (kDenseFloats + 26.0 * kRows * 8);
  EXPECT_GT(ring_bytes, 0.98 * 2 * 2 * per_member) << d.dump(2);
  EXPECT_LT(ring_bytes, 1.05 * 2 * 2 * per_member) << d.dump(2);
  // Only a DLRM in ring mode takes it.
  const ProcessRun ps = RunHybrid("full-hybrid", 2, full);
  EXPECT_EQ(ps.rc, 2) << ps.output;
  EXPECT_THAT(ps.output, HasSubstr("--ring-full-table-rows: --mode hybrid"));
}

TEST_F(CtrHybridJobTest, RefusesWhatHybridCannotTrain) {
  // A dense model has nothing for the shards.
  ProcessRun dense = RunToEnd(
      {FerryBin("ferry"), "local", "--mode", "hybrid", "--model", "784-16-10",
       "--log-dir", *dir_ + "/dense-logs", "--timeout", "60"},
      *dir_ + "/dense.log", absl::Seconds(90));
  EXPECT_EQ(dense.rc, 2) << dense.output;
  EXPECT_THAT(dense.output, HasSubstr("embedding tables"));
  // The ring is synchronous.
  const ProcessRun async = RunHybrid("async", 2, {"--consistency", "async"});
  EXPECT_NE(async.rc, 0) << async.output;
  EXPECT_THAT(async.output, HasSubstr("synchronous"));
}

}  // namespace
}  // namespace ferry
