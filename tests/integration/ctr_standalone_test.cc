// `ferry-worker --standalone` trains a DLRM on CTR data written by
// `ferry data ctr`: the real binaries, end to end. The test AUC beats chance
// clearly, the log loss is finite, rows are stored (fewer with admission
// after 3 sightings), and combinations that cannot train are refused with
// exit status 2 and a message naming what is wrong.
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
using ::ferry::testing::RunToEnd;

class CtrStandaloneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/ctr-standalone-", getpid()));
    std::filesystem::remove_all(*dir_);
    std::filesystem::create_directories(*dir_);
    // Vocabularies of 10 to 5,000 ids: a slice 40,000 rows learn in one
    // epoch (test AUC 0.76 here, the teacher's 0.87).
    const ProcessRun gen =
        testing::WriteCtrData(*dir_ + "/data", 40000, 8000, /*seed=*/11,
                              /*large=*/5000, *dir_ + "/gen.log");
    ASSERT_EQ(gen.rc, 0) << gen.output;
    std::ofstream(*dir_ + "/small.json")
        << R"({"format": "ferry.model.v1", "kind": "dlrm", "embedding_dim": 8,
               "bottom": [32], "top": [32, 16]})";
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // ferry-worker --standalone on the small DLRM, plus `extra`.
  static ProcessRun Train(const std::string& name,
                          const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {FerryBin("ferry-worker"), "--standalone",
                                     "--summary-json",
                                     *dir_ + "/" + name + ".json"};
    const std::vector<std::string> train = testing::CtrTrainFlags(
        *dir_ + "/small.json", *dir_ + "/data", /*epochs=*/1, /*batch=*/64);
    argv.insert(argv.end(), train.begin(), train.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunToEnd(argv, *dir_ + "/" + name + ".log");
  }

  static nlohmann::json Summary(const std::string& name) {
    std::ifstream in(*dir_ + "/" + name + ".json");
    return nlohmann::json::parse(in, nullptr, false);
  }

  static std::string* dir_;
};
std::string* CtrStandaloneTest::dir_ = nullptr;

TEST_F(CtrStandaloneTest, LearnsTheClicksAndAdmissionStoresFewerRows) {
  const ProcessRun all = Train("admit1", {});
  ASSERT_EQ(all.rc, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("test auc"));
  const nlohmann::json s = Summary("admit1");
  ASSERT_FALSE(s.is_discarded()) << all.output;
  EXPECT_EQ(s["epochs"].get<int>(), 1);
  EXPECT_EQ(s["steps"].get<int64_t>(), 40000 / 64);
  const double auc = s["test_auc"].get<double>();
  EXPECT_GT(auc, 0.70) << all.output;
  EXPECT_LT(auc, 1.0);
  const double logloss = s["test_logloss"].get<double>();
  EXPECT_TRUE(std::isfinite(logloss));
  EXPECT_GT(logloss, 0.0);
  // Predicting the positive rate (~0.25) everywhere scores ~0.56.
  EXPECT_LT(logloss, 0.53) << all.output;
  const int64_t rows = s["embedding_rows"].get<int64_t>();
  EXPECT_GT(rows, 0);
  EXPECT_GT(s["unique_ids_per_step"].get<double>(), 0.0);
  EXPECT_LE(s["unique_ids_per_step"].get<double>(), 64.0 * 26);

  const ProcessRun admit3 = Train("admit3", {"--embedding-admit-count", "3"});
  ASSERT_EQ(admit3.rc, 0) << admit3.output;
  const nlohmann::json t = Summary("admit3");
  // Most ids of the large vocabularies are seen fewer than 3 times.
  EXPECT_LT(t["embedding_rows"].get<int64_t>(), rows * 6 / 10);
  EXPECT_GT(t["embedding_updates_dropped"].get<int64_t>(), 0);
  EXPECT_GT(t["embedding_admitted"].get<int64_t>(), 0);
  EXPECT_GT(t["test_auc"].get<double>(), 0.70) << admit3.output;
}

TEST_F(CtrStandaloneTest, RefusesWhatCannotTrain) {
  const std::string bin = std::string(FERRY_BIN_DIR) + "/ferry-worker";
  const std::string data = "criteo:" + *dir_ + "/data";
  // A DLRM on image data.
  ProcessRun r = RunToEnd({bin, "--standalone", "--model", "dlrm", "--dataset",
                           "fashion-mnist", "--device", "cpu"},
                          *dir_ + "/bad1.log");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("criteo:DIR"));
  // An image model on CTR data.
  r = RunToEnd({bin, "--standalone", "--model", "mlp", "--dataset", data,
                "--device", "cpu"},
               *dir_ + "/bad2.log");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("DLRM"));
  // A DLRM spec that does not fit Criteo's 13 + 26 features.
  std::ofstream(*dir_ + "/five.json")
      << R"({"format": "ferry.model.v1", "kind": "dlrm", "num_fields": 5})";
  r = RunToEnd({bin, "--standalone", "--model", *dir_ + "/five.json",
                "--dataset", data, "--device", "cpu"},
               *dir_ + "/bad3.log");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("5 categorical fields"));
  // Bad embedding flags, and embedding flags on a dense model.
  r = RunToEnd({bin, "--standalone", "--model", "dlrm", "--dataset", data,
                "--embedding-admit-count", "0"},
               *dir_ + "/bad4.log");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--embedding-admit-count"));
  r = RunToEnd({bin, "--standalone", "--model", "mlp", "--embedding-lr", "0.1",
                "--max-steps", "1"},
               *dir_ + "/bad5.log");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("apply to DLRM models"));
}

}  // namespace
}  // namespace ferry
