// DLRM models through the standalone loop (worker/standalone_loop.h).
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
#include "worker/standalone_trainer.h"

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

  absl::StatusOr<TrainSummary> Run(TrainOptions options,
                                   const EmbeddingOptions& embedding) {
    options.embedding = embedding;
    return RunStandalone(options, progress_);
  }
  static int64_t Rows(const TrainSummary& s) {
    return s.family["embedding_rows"].get<int64_t>();
  }
  static int64_t TotalStat(const TrainSummary& s, const char* key) {
    return s.family["embedding"][key].get<int64_t>();
  }

  static std::string* dir_;
  ProgressPrinter progress_{stderr, false};
};
std::string* CtrTrainerTest::dir_ = nullptr;

TEST_F(CtrTrainerTest, TrainsDeterministicallyAndCountsRows) {
  TrainOptions options = Options();
  options.max_steps = 15;
  const EmbeddingOptions embedding;
  auto a = Run(options, embedding);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Run(options, embedding);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->steps, 15);
  EXPECT_EQ(a->final_parameters, b->final_parameters);
  EXPECT_EQ(a->test.auc.value(), b->test.auc.value());
  EXPECT_TRUE(std::isfinite(a->test.loss));
  EXPECT_GT(Rows(*a), 0);
  EXPECT_EQ(Rows(*a), Rows(*b));
  // admit_count 1: every row touched was created and is still there.
  EXPECT_EQ(TotalStat(*a, "rows_created"), Rows(*a));
  // A step touches at most batch x 26 ids, and the small vocabularies
  // repeat ids within a batch.
  EXPECT_GT(a->unique_ids_per_step, 26.0);
  EXPECT_LT(a->unique_ids_per_step, 64.0 * 26);
  const nlohmann::json json = a->ToJson();
  EXPECT_EQ(json["embedding_rows"].get<int64_t>(), Rows(*a));
  EXPECT_EQ(json["test_auc"].get<double>(), a->test.auc.value());
  EXPECT_TRUE(json.contains("unique_ids_per_step"));
  EXPECT_TRUE(json.contains("embedding_admitted"));

  // Admission after 3 sightings stores fewer rows and drops updates.
  EmbeddingOptions admit3;
  admit3.admit_count = 3;
  auto c = Run(options, admit3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_LT(Rows(*c), Rows(*a));
  EXPECT_GT(TotalStat(*c, "updates_dropped"), 0);
}

TEST_F(CtrTrainerTest, RefusesCombinationsThatCannotWork) {
  const EmbeddingOptions embedding;
  TrainOptions image_data = Options();
  image_data.dataset = "fashion-mnist";
  auto s = Run(image_data, embedding);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("criteo:DIR"));

  const std::string wrong = *dir_ + "/ten-fields.json";
  std::ofstream(wrong) << R"({"format": "ferry.model.v1", "kind": "dlrm",
      "num_fields": 10, "embedding_dim": 4, "bottom": [8], "top": [8]})";
  TrainOptions ten_fields = Options();
  ten_fields.model = wrong;
  s = Run(ten_fields, embedding);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("10 categorical fields"));

  TrainOptions evaluate_only = Options();
  evaluate_only.evaluate_only = true;
  s = Run(evaluate_only, embedding);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--init-from"));
  TrainOptions no_export = Options();
  no_export.init_from = *dir_ + "/nowhere";
  s = Run(no_export, embedding);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("--init-from"));

  TrainOptions missing = Options();
  missing.dataset = "criteo:" + *dir_ + "/nowhere";
  EXPECT_EQ(Run(missing, embedding).status().code(),
            absl::StatusCode::kNotFound);

  EmbeddingOptions bad;
  bad.admit_count = 0;
  s = Run(Options(), bad);
  EXPECT_THAT(s.status().message(), HasSubstr("--embedding-admit-count"));
}

TEST_F(CtrTrainerTest, AnExportEvaluatesAsTrainedAndTrainsOn) {
  const EmbeddingOptions embedding;
  TrainOptions options = Options();
  options.max_steps = 12;
  options.export_dir = *dir_ + "/export";
  auto trained = Run(options, embedding);
  ASSERT_TRUE(trained.ok()) << trained.status();
  // The same weights and rows: the same test AUC and log loss, exactly.
  TrainOptions evaluate = Options();
  evaluate.init_from = options.export_dir;
  evaluate.evaluate_only = true;
  auto evaluated = Run(evaluate, embedding);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->steps, 0);
  EXPECT_EQ(evaluated->test.auc.value(), trained->test.auc.value());
  EXPECT_EQ(evaluated->test.loss, trained->test.loss);
  EXPECT_EQ(Rows(*evaluated), Rows(*trained));
  EXPECT_EQ(evaluated->final_parameters, trained->final_parameters);
  // Evaluating reads the test split only: a directory without train.tsv.
  const std::string test_only = *dir_ + "/test-only";
  std::filesystem::create_directories(test_only);
  std::filesystem::copy_file(*dir_ + "/data/test.tsv", test_only + "/test.tsv");
  TrainOptions on_test_only = evaluate;
  on_test_only.dataset = "criteo:" + test_only;
  auto test_split = Run(on_test_only, embedding);
  ASSERT_TRUE(test_split.ok()) << test_split.status();
  EXPECT_EQ(test_split->test.auc.value(), trained->test.auc.value());
  // Training on from it moves the weights and keeps the rows it had.
  TrainOptions more = Options();
  more.init_from = options.export_dir;
  more.max_steps = 5;
  auto continued = Run(more, embedding);
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_NE(continued->final_parameters, trained->final_parameters);
  EXPECT_GE(Rows(*continued), Rows(*trained));
  // Another row optimizer keeps other floats per row: refused, named.
  EmbeddingOptions sgd;
  sgd.optimizer.kind = RowOptimizerKind::kSgd;
  auto other = Run(evaluate, sgd);
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
