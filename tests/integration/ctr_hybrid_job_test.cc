// A DLRM trained by a real `ferry local --mode hybrid` cluster: the
// embedding tables on two PS shards, the dense layers all-reduced in the
// ring of two workers, one step committed on both sides or neither. Checked
// against `ferry-worker --standalone` on the same data, seed and global
// batch (a sync hybrid step is the single process's step: the dense mean
// gradient through the same optimizer, row-wise Adagrad on the mean row
// gradient), and for what moves where: only rows to the shards, only the
// dense gradient between the workers.
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
    std::vector<std::string> local = {
        FerryBin("ferry"), "local",
        "--mode",          "hybrid",
        "--workers",       std::to_string(workers),
        "--shards",        "2",
        "--log-dir",       *dir_ + "/" + name + "-logs",
        "--timeout",       "240",
        "--summary-json",  *dir_ + "/" + name + ".json"};
    local.insert(local.end(), extra.begin(), extra.end());
    const std::vector<std::string> job = JobFlags(epochs);
    local.insert(local.end(), job.begin(), job.end());
    return RunToEnd(local, *dir_ + "/" + name + ".log", absl::Seconds(300));
  }

  static std::string* dir_;
};
std::string* CtrHybridJobTest::dir_ = nullptr;

double SentAndReceived(const nlohmann::json& counts) {
  return counts.value("sent", 0.0) + counts.value("received", 0.0);
}

TEST_F(CtrHybridJobTest, TwoShardsTwoWorkersMatchOneProcess) {
  std::vector<std::string> alone = {FerryBin("ferry-worker"), "--standalone",
                                    "--summary-json", *dir_ + "/alone.json"};
  const std::vector<std::string> job = JobFlags();
  alone.insert(alone.end(), job.begin(), job.end());
  const ProcessRun a =
      RunToEnd(alone, *dir_ + "/alone.log", absl::Seconds(180));
  ASSERT_EQ(a.rc, 0) << a.output;
  const nlohmann::json s = ReadJsonFile(*dir_ + "/alone.json");
  ASSERT_FALSE(s.is_discarded()) << a.output;

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

// ASan builds define this (gcc) or report it through __has_feature (clang).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST_F(CtrHybridJobTest, WorkersJoinAndLeaveMidTraining) {
  if (kAddressSanitizer) {
    // Once, in the ASan suite beside other jobs, this job stopped making
    // progress right after the join (the two newer workers gave up after
    // ~100 s of failed steps); 8 more ASan runs, some under load, passed.
    // Skipped there until it is understood (issue 20's note); the plain
    // suite runs it.
    GTEST_SKIP() << "stalled once under ASan's load; being diagnosed";
  }
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
