// The coordinator's evaluation of a DLRM job: CtrTestEvaluator on a row
// source, and GrpcShardControl over two real PS shards with embedding rows
// on loopback (their rows trained by pushes, as ps/ps_rows_test.cc does),
// against the metrics computed directly from one SparseStore holding the
// same rows.
#include "coordinator/ctr_test_evaluator.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sharding.h"
#include "compute/cpu_backend.h"
#include "coordinator/grpc_shard_control.h"
#include "data/ctr_generator.h"
#include "data/ctr_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_convert.h"
#include "ps/dlrm_export.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"
#include "ps/sparse_store.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr int kShards = 2;
constexpr uint64_t kSeed = 5;
constexpr int64_t kMaxChunk = 64;

DlrmSpec SmallDlrm() {
  DlrmSpec spec;
  spec.embedding_dim = 4;
  spec.bottom = {8};
  spec.top = {8};
  return spec;
}

EmbeddingOptions Tables() {
  EmbeddingOptions options;
  options.optimizer.kind = RowOptimizerKind::kAdagrad;
  options.optimizer.lr = 0.5f;
  return options;
}

// Counts the reads it passes on.
class CountingRows final : public EmbeddingRowSource {
 public:
  explicit CountingRows(EmbeddingRowSource* inner) : inner_(inner) {}
  absl::Status Read(absl::Span<const TableIds> tables,
                    std::vector<std::vector<float>>& out) override {
    ++reads;
    return inner_->Read(tables, out);
  }
  int reads = 0;

 private:
  EmbeddingRowSource* inner_;
};

// The scores of `params` and `rows` on `test`, from predictions of the whole
// split in one batch.
TestScores Expected(const CtrDataset& test, const std::vector<float>& params,
                    EmbeddingRowSource& rows) {
  auto backend = MakeCpuBackend(1);
  auto step = CtrStep::Create(SmallDlrm(), backend.get());
  EXPECT_TRUE(step.ok()) << step.status();
  const int64_t n = test.num_samples();
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    indices[static_cast<size_t>(i)] = i;
    labels[static_cast<size_t>(i)] = test.label(i);
  }
  CtrBatch batch;
  EXPECT_TRUE(test.GatherBatch(indices, batch).ok());
  auto device = backend->Allocate(params.size());
  EXPECT_TRUE(device.ok());
  EXPECT_TRUE(
      backend->CopyToDevice(params.data(), params.size(), device->data()).ok());
  std::vector<float> p(static_cast<size_t>(n));
  EXPECT_TRUE(
      step->Predict(batch, device->data(), rows, absl::MakeSpan(p)).ok());
  for (int64_t i = 0; i < n; ++i) {
    right += (p[static_cast<size_t>(i)] > 0.5f) ==
             (labels[static_cast<size_t>(i)] == 1);
  }
  TestScores scores;
  scores.accuracy = static_cast<double>(right) / static_cast<double>(n);
  scores.loss = *LogLoss(p, labels);
  scores.auc = *BinaryAuc(p, labels);
  return scores;
}

class CtrTestEvaluatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/ctr-eval-", getpid()));
    std::filesystem::create_directories(*dir_);
    CtrGeneratorOptions gen;
    gen.rows = 256;
    gen.test_rows = 300;
    gen.seed = 3;
    gen.vocab_sizes.assign(26, 40);
    ASSERT_TRUE(WriteCtrDataset(*dir_, gen).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    auto data = LoadCtrTrainTest(*dir_);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
    auto layout = DlrmParameterLayout(SmallDlrm());
    ASSERT_TRUE(layout.ok());
    layout_ = *layout;
    initial_ = DlrmInitialParameters(SmallDlrm(), layout_, kSeed);
  }

  std::unique_ptr<SparseStore> Store(int32_t shard = 0,
                                     int32_t num_shards = 1) {
    auto store = SparseStore::Create(MakeSparseStoreConfig(
        Tables(), std::vector<int32_t>(26, 4), kSeed, shard, num_shards));
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

  static std::string* dir_;
  CtrTrainTest data_;
  ParameterLayout layout_;
  std::vector<float> initial_;
};
std::string* CtrTestEvaluatorTest::dir_ = nullptr;

TEST_F(CtrTestEvaluatorTest, ScoresInBatchesAsOnePassDoes) {
  std::unique_ptr<SparseStore> store = Store();
  // Rows that are not their initial values: one Adagrad step on ids of the
  // test split.
  CtrBatch batch;
  ASSERT_TRUE(data_.test.GatherBatch({0, 1, 2, 3, 4, 5, 6, 7}, batch).ok());
  std::vector<SparseRows> rows(26);
  for (int f = 0; f < 26; ++f) {
    rows[f].table = f;
    for (int s = 0; s < 8; ++s) {
      const uint64_t id = batch.ids[static_cast<size_t>(s * 26 + f)];
      if (std::find(rows[f].ids.begin(), rows[f].ids.end(), id) !=
          rows[f].ids.end()) {
        continue;
      }
      rows[f].ids.push_back(id);
      for (int k = 0; k < 4; ++k) rows[f].grads.push_back(0.1f * (s - k));
    }
  }
  const std::vector<const std::vector<SparseRows>*> one = {&rows};
  ASSERT_TRUE(store->ApplyStep(one, 8, 0).ok());
  SparseStoreRowSource source(store.get());
  const TestScores expected = Expected(data_.test, initial_, source);

  auto evaluator = CtrTestEvaluator::Create(SmallDlrm(), data_.test, 128);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_EQ((*evaluator)->num_parameters(), layout_.total_elements());
  CountingRows counted(&source);
  auto scores = (*evaluator)->Evaluate(initial_.data(), counted);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_EQ(counted.reads, 3);  // 300 samples, 128 at a time
  ASSERT_TRUE(scores->auc.has_value());
  EXPECT_NEAR(*scores->auc, *expected.auc, 1e-9);
  EXPECT_NEAR(scores->loss, expected.loss, 1e-6);
  EXPECT_NEAR(scores->accuracy, expected.accuracy, 1e-9);
  EXPECT_GT(*scores->auc, 0.0);
  EXPECT_LT(*scores->auc, 1.0);
  // Again: the same scores (nothing carried over between passes).
  auto again = (*evaluator)->Evaluate(initial_.data(), source);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again->auc, *scores->auc);
  EXPECT_EQ(again->loss, scores->loss);
}

TEST_F(CtrTestEvaluatorTest, RowSourceErrorsComeBackWithTheirCode) {
  class Down final : public EmbeddingRowSource {
    absl::Status Read(absl::Span<const TableIds>,
                      std::vector<std::vector<float>>&) override {
      return absl::UnavailableError("shard 1 is down");
    }
  } down;
  auto evaluator = CtrTestEvaluator::Create(SmallDlrm(), data_.test);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto scores = (*evaluator)->Evaluate(initial_.data(), down);
  EXPECT_TRUE(absl::IsUnavailable(scores.status())) << scores.status();
  EXPECT_THAT(scores.status().message(), HasSubstr("shard 1 is down"));
}

TEST_F(CtrTestEvaluatorTest, RefusesWhatItCannotScore) {
  DlrmSpec wide = SmallDlrm();
  wide.dense_features = 10;
  auto bad = CtrTestEvaluator::Create(wide, data_.test);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("10 dense features"));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CtrTestEvaluator::Create(SmallDlrm(), data_.test, 0).status()));
  CtrDataset no_clicks;
  CriteoExample example;
  no_clicks.Append(example);
  no_clicks.Append(example);
  bad = CtrTestEvaluator::Create(SmallDlrm(), std::move(no_clicks));
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("AUC is undefined"));
}

// Two real shards with embedding rows, trained by a few sync steps of a
// worker's CtrStep; the coordinator's control evaluates them.
class GrpcShardControlDlrmTest : public CtrTestEvaluatorTest {
 protected:
  void SetUp() override {
    CtrTestEvaluatorTest::SetUp();
    if (HasFatalFailure()) return;
    job_.set_job_id("job");
    job_.set_model("small-dlrm.json");
    job_.set_model_def(DlrmToJson(SmallDlrm()));
    job_.set_seed(kSeed);
    job_.set_max_chunk_elements(kMaxChunk);
    *job_.mutable_embedding() = ToProto(Tables());
    const int64_t total = layout_.total_elements();
    for (int s = 0; s < kShards; ++s) {
      PsShardConfig config;
      config.job_id = "job";
      config.shard_id = s;
      config.num_shards = kShards;
      config.tensor_sizes = layout_.TensorSizes();
      config.max_chunk_elements = kMaxChunk;
      config.optimizer.lr = 0.05;
      const FlatRange range = ShardRange(total, kShards, s);
      config.initial_slice.assign(initial_.begin() + range.begin,
                                  initial_.begin() + range.end);
      config.sparse = MakeSparseStoreConfig(
          Tables(), std::vector<int32_t>(26, 4), kSeed, s, kShards);
      auto shard = PsShard::Create(config);
      ASSERT_TRUE(shard.ok()) << shard.status();
      shards_.push_back(*std::move(shard));
      auto server = StartPsServer(shards_.back().get());
      ASSERT_TRUE(server.ok()) << server.status();
      job_.add_shard_addresses(absl::StrCat("127.0.0.1:", server->port));
      servers_.push_back(*std::move(server));
    }
    GrpcParameterClientOptions options;
    options.job_id = "job";
    options.worker_id = "w";
    options.shard_addresses.assign(job_.shard_addresses().begin(),
                                   job_.shard_addresses().end());
    auto chunks = PlaceChunks(layout_.TensorSizes(), kShards, kMaxChunk);
    ASSERT_TRUE(chunks.ok());
    options.chunks = *chunks;
    options.rpc_timeout = absl::Seconds(10);
    auto client = GrpcParameterClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    worker_ = *std::move(client);
    reference_ = Store();
  }

  // `steps` sync steps of 32 training samples: the dense gradient and the
  // rows pushed to the shards, the rows applied to reference_ too.
  void Train(int steps) {
    auto backend = MakeCpuBackend(1);
    auto step = CtrStep::Create(SmallDlrm(), backend.get());
    ASSERT_TRUE(step.ok());
    const size_t n = static_cast<size_t>(layout_.total_elements());
    std::vector<float> params(n), grads(n);
    auto params_dev = backend->Allocate(n);
    auto grads_dev = backend->Allocate(n);
    ASSERT_TRUE(params_dev.ok() && grads_dev.ok());
    CtrBatch batch;
    for (int s = 0; s < steps; ++s) {
      ASSERT_TRUE(worker_->Pull(s, params.data()).ok());
      ASSERT_TRUE(
          backend->CopyToDevice(params.data(), n, params_dev->data()).ok());
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < 32; ++i) indices.push_back(s * 32 + i);
      ASSERT_TRUE(data_.train.GatherBatch(indices, batch).ok());
      ParameterClientRowSource rows(worker_.get());
      rows.set_min_version(s);
      auto result = step->ForwardBackward(batch, params_dev->data(), rows,
                                          grads_dev->data());
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_TRUE(backend->CopyToHost(grads_dev->data(), n, grads.data()).ok());
      PushInfo info;
      info.step = s;
      info.num_samples = 32;
      info.base_version = s;
      info.step_contributors = {{"w", 32}};
      info.with_rows = true;
      auto session = worker_->BeginPush(info);
      ASSERT_TRUE(session.ok()) << session.status();
      ASSERT_TRUE(
          (*session)->Ready(0, static_cast<int64_t>(n), grads.data()).ok());
      ASSERT_TRUE((*session)->AddRows(result->rows).ok());
      const absl::Status pushed = (*session)->Finish();
      ASSERT_TRUE(pushed.ok()) << pushed;
      const std::vector<const std::vector<SparseRows>*> one = {&result->rows};
      ASSERT_TRUE(reference_->ApplyStep(one, 32, s).ok());
    }
  }

  v1::JobSpec job_;
  std::vector<std::unique_ptr<PsShard>> shards_;
  std::vector<PsServer> servers_;
  std::unique_ptr<GrpcParameterClient> worker_;
  std::unique_ptr<SparseStore> reference_;
};

TEST_F(GrpcShardControlDlrmTest, EvaluatesTheShardsWeightsAndRows) {
  ASSERT_NO_FATAL_FAILURE(Train(3));
  int64_t rows_on_shards = 0;
  for (auto& shard : shards_) {
    EXPECT_EQ(shard->version(), 3);
    rows_on_shards += shard->Info().sparse->total.rows;
  }
  EXPECT_EQ(rows_on_shards, reference_->Stats().total.rows);

  auto control = GrpcShardControl::Create(job_, CtrDataset(data_.test));
  ASSERT_TRUE(control.ok()) << control.status();
  int fetched = 0;
  auto scores = (*control)->EvaluateAndNotify(3, [&] { ++fetched; });
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_EQ(fetched, 1);
  ASSERT_TRUE(scores->auc.has_value());

  // The same from one store holding the same rows, and the dense weights
  // of version 3.
  std::vector<float> dense(static_cast<size_t>(layout_.total_elements()));
  ASSERT_TRUE(worker_->Pull(3, dense.data()).ok());
  EXPECT_NE(dense, initial_) << "the steps did not train";
  SparseStoreRowSource one_store(reference_.get());
  const TestScores expected = Expected(data_.test, dense, one_store);
  EXPECT_NEAR(*scores->auc, *expected.auc, 1e-6);
  EXPECT_NEAR(scores->loss, expected.loss, 1e-5);
  EXPECT_NEAR(scores->accuracy, expected.accuracy, 1e-9);
  // The rows count: the initial rows give other scores.
  const std::unique_ptr<SparseStore> untrained = Store();
  SparseStoreRowSource initial_rows(untrained.get());
  EXPECT_NE(*Expected(data_.test, dense, initial_rows).auc, *scores->auc);
  EXPECT_GT((*control)->bytes().received, 0);
}

// --export: every evaluation writes the DLRM, its tables read from every
// shard and merged: it imports as the one store that applied the same
// steps, with the evaluated dense weights, and scores as evaluated.
TEST_F(GrpcShardControlDlrmTest, AnExportHoldsEveryShardsRowsMerged) {
  ASSERT_NO_FATAL_FAILURE(Train(3));
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/export-", getpid());
  auto control = GrpcShardControl::Create(job_, CtrDataset(data_.test), dir);
  ASSERT_TRUE(control.ok()) << control.status();
  auto scores = (*control)->Evaluate(3);
  ASSERT_TRUE(scores.ok()) << scores.status();

  const std::unique_ptr<SparseStore> imported = Store();
  auto dense = ImportDlrm(dir, SmallDlrm(), *imported);
  ASSERT_TRUE(dense.ok()) << dense.status();
  std::vector<float> pulled(static_cast<size_t>(layout_.total_elements()));
  ASSERT_TRUE(worker_->Pull(3, pulled.data()).ok());
  EXPECT_EQ(*dense, pulled);
  EXPECT_EQ(imported->Stats().total.rows, reference_->Stats().total.rows);
  EXPECT_EQ(imported->Stats().total.pending_ids,
            reference_->Stats().total.pending_ids);
  SparseStoreRowSource rows(imported.get());
  const TestScores again = Expected(data_.test, *dense, rows);
  EXPECT_NEAR(*again.auc, *scores->auc, 1e-9);
  EXPECT_NEAR(again.loss, scores->loss, 1e-9);
  // The shards' spool files are gone: the export's three files are left.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"embeddings.ckpt", "model.json",
                                             "model.safetensors"}));
  std::filesystem::remove_all(dir);
}

TEST_F(GrpcShardControlDlrmTest, RefusesAnotherKindOfTestSet) {
  auto dense = GrpcShardControl::Create(job_, Dataset());
  EXPECT_TRUE(absl::IsInvalidArgument(dense.status()));
  EXPECT_THAT(dense.status().message(), HasSubstr("criteo:"));
}

}  // namespace
}  // namespace ferry
