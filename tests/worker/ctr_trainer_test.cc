#include "worker/ctr_trainer.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_system.h"
#include "data/ctr_generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm_spec.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr char kSmallDlrm[] =
    R"({"format": "ferry.model.v1", "kind": "dlrm", "embedding_dim": 4,
        "bottom": [8], "top": [8]})";

class CtrTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/ctr-trainer-", getpid()));
    std::filesystem::create_directories(*dir_);
    CtrGeneratorOptions gen;
    gen.rows = 1500;
    gen.test_rows = 500;
    gen.seed = 3;
    gen.vocab_sizes.assign(26, 50);
    ASSERT_TRUE(WriteCtrDataset(*dir_ + "/data", gen).ok());
    std::ofstream(*dir_ + "/small.json") << kSmallDlrm;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static TrainOptions Options() {
    TrainOptions o;
    o.model = *dir_ + "/small.json";
    o.dataset = "criteo:" + *dir_ + "/data";
    o.device = DeviceChoice::kCpu;
    o.batch = 64;
    o.epochs = 1;
    o.optimizer.kind = OptimizerKind::kAdam;
    o.optimizer.lr = 1e-3;
    return o;
  }

  static std::string* dir_;
  ProgressPrinter progress_{stderr, false};
};
std::string* CtrTrainerTest::dir_ = nullptr;

TEST_F(CtrTrainerTest, TrainsDeterministicallyAndCountsRows) {
  TrainOptions options = Options();
  options.max_steps = 15;
  const EmbeddingOptions embedding;
  auto a = RunCtrStandalone(options, embedding, progress_);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = RunCtrStandalone(options, embedding, progress_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->steps, 15);
  EXPECT_EQ(a->final_parameters, b->final_parameters);
  EXPECT_EQ(a->test_auc, b->test_auc);
  EXPECT_TRUE(std::isfinite(a->test_logloss));
  EXPECT_GT(a->embedding_rows, 0);
  EXPECT_EQ(a->embedding_rows, b->embedding_rows);
  // admit_count 1: every row touched was created and is still there.
  EXPECT_EQ(a->embedding.total.rows_created, a->embedding_rows);
  // A step touches at most batch x 26 ids, and the small vocabularies
  // repeat ids within a batch.
  EXPECT_GT(a->unique_ids_per_step, 26.0);
  EXPECT_LT(a->unique_ids_per_step, 64.0 * 26);
  const nlohmann::json json = a->ToJson();
  EXPECT_EQ(json["embedding_rows"].get<int64_t>(), a->embedding_rows);
  EXPECT_EQ(json["test_auc"].get<double>(), a->test_auc);
  EXPECT_TRUE(json.contains("unique_ids_per_step"));
  EXPECT_TRUE(json.contains("embedding_admitted"));

  // Admission after 3 sightings stores fewer rows and drops updates.
  EmbeddingOptions admit3;
  admit3.admit_count = 3;
  auto c = RunCtrStandalone(options, admit3, progress_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_LT(c->embedding_rows, a->embedding_rows);
  EXPECT_GT(c->embedding.total.updates_dropped, 0);
}

TEST_F(CtrTrainerTest, RefusesCombinationsThatCannotWork) {
  const EmbeddingOptions embedding;
  TrainOptions image_data = Options();
  image_data.dataset = "fashion-mnist";
  auto s = RunCtrStandalone(image_data, embedding, progress_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("criteo:DIR"));

  const std::string wrong = *dir_ + "/ten-fields.json";
  std::ofstream(wrong) << R"({"format": "ferry.model.v1", "kind": "dlrm",
      "num_fields": 10, "embedding_dim": 4, "bottom": [8], "top": [8]})";
  TrainOptions ten_fields = Options();
  ten_fields.model = wrong;
  s = RunCtrStandalone(ten_fields, embedding, progress_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("10 categorical fields"));

  TrainOptions evaluate_only = Options();
  evaluate_only.evaluate_only = true;
  s = RunCtrStandalone(evaluate_only, embedding, progress_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--init-from"));
  TrainOptions no_export = Options();
  no_export.init_from = *dir_ + "/nowhere";
  s = RunCtrStandalone(no_export, embedding, progress_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("--init-from"));

  TrainOptions missing = Options();
  missing.dataset = "criteo:" + *dir_ + "/nowhere";
  EXPECT_EQ(RunCtrStandalone(missing, embedding, progress_).status().code(),
            absl::StatusCode::kNotFound);

  EmbeddingOptions bad;
  bad.admit_count = 0;
  s = RunCtrStandalone(Options(), bad, progress_);
  EXPECT_THAT(s.status().message(), HasSubstr("--embedding-admit-count"));
}

TEST_F(CtrTrainerTest, AnExportEvaluatesAsTrainedAndTrainsOn) {
  const EmbeddingOptions embedding;
  TrainOptions options = Options();
  options.max_steps = 12;
  options.export_dir = *dir_ + "/export";
  auto trained = RunCtrStandalone(options, embedding, progress_);
  ASSERT_TRUE(trained.ok()) << trained.status();
  // The same weights and rows: the same test AUC and log loss, exactly.
  TrainOptions evaluate = Options();
  evaluate.init_from = options.export_dir;
  evaluate.evaluate_only = true;
  auto evaluated = RunCtrStandalone(evaluate, embedding, progress_);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->steps, 0);
  EXPECT_EQ(evaluated->test_auc, trained->test_auc);
  EXPECT_EQ(evaluated->test_logloss, trained->test_logloss);
  EXPECT_EQ(evaluated->embedding_rows, trained->embedding_rows);
  EXPECT_EQ(evaluated->final_parameters, trained->final_parameters);
  // Evaluating reads the test split only: a directory without train.tsv.
  const std::string test_only = *dir_ + "/test-only";
  std::filesystem::create_directories(test_only);
  std::filesystem::copy_file(*dir_ + "/data/test.tsv", test_only + "/test.tsv");
  TrainOptions on_test_only = evaluate;
  on_test_only.dataset = "criteo:" + test_only;
  auto test_split = RunCtrStandalone(on_test_only, embedding, progress_);
  ASSERT_TRUE(test_split.ok()) << test_split.status();
  EXPECT_EQ(test_split->test_auc, trained->test_auc);
  // Training on from it moves the weights and keeps the rows it had.
  TrainOptions more = Options();
  more.init_from = options.export_dir;
  more.max_steps = 5;
  auto continued = RunCtrStandalone(more, embedding, progress_);
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_NE(continued->final_parameters, trained->final_parameters);
  EXPECT_GE(continued->embedding_rows, trained->embedding_rows);
  // Another row optimizer keeps other floats per row: refused, named.
  EmbeddingOptions sgd;
  sgd.optimizer.kind = RowOptimizerKind::kSgd;
  auto other = RunCtrStandalone(evaluate, sgd, progress_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(),
              HasSubstr("pass --embedding-optimizer adagrad"));
}

TEST(EmbeddingOptionsTest, ValidatesEachFlag) {
  EXPECT_TRUE(ValidateEmbeddingOptions({}).ok());
  EmbeddingOptions o;
  o.optimizer.lr = 0.0f;
  EXPECT_EQ(ValidateEmbeddingOptions(o).code(),
            absl::StatusCode::kInvalidArgument);
  o = {};
  o.ttl_steps = -1;
  EXPECT_THAT(ValidateEmbeddingOptions(o).message(),
              HasSubstr("--embedding-ttl-steps"));
  o = {};
  o.max_mb = -5;
  EXPECT_THAT(ValidateEmbeddingOptions(o).message(),
              HasSubstr("--embedding-max-mb"));
  o = {};
  o.optimizer.kind = RowOptimizerKind::kFtrl;
  o.optimizer.l1 = -1.0f;
  EXPECT_EQ(ValidateEmbeddingOptions(o).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IsDlrmModelTextTest, TellsDlrmSpecsFromOthers) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(fs.WriteFileAtomically("/m/dlrm.json", kSmallDlrm).ok());
  ASSERT_TRUE(fs.WriteFileAtomically("/m/dir/model.json", kSmallDlrm).ok());
  ASSERT_TRUE(
      fs.WriteFileAtomically("/m/seq.json",
                             R"({"format": "ferry.model.v1", "layers": []})")
          .ok());
  EXPECT_TRUE(IsDlrmModelText("dlrm", &fs));
  EXPECT_TRUE(IsDlrmModelText("/m/dlrm.json", &fs));
  EXPECT_TRUE(IsDlrmModelText("/m/dir", &fs));
  EXPECT_FALSE(IsDlrmModelText("/m/seq.json", &fs));
  EXPECT_FALSE(IsDlrmModelText("mlp", &fs));
  EXPECT_FALSE(IsDlrmModelText("784-256-10", &fs));
  EXPECT_FALSE(IsDlrmModelText("/m/missing.json", &fs));
}

}  // namespace
}  // namespace ferry
