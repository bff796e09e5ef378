#include "model/ctr_step.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm_model.h"
#include "ps/sparse_store.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

DlrmSpec TinySpec() {
  DlrmSpec s;
  s.dense_features = 2;
  s.num_fields = 3;
  s.embedding_dim = 4;
  s.bottom = {5};
  s.top = {6};
  return s;
}

// A batch of `ids[sample][field]` (one id per bag; kNoId: an empty bag).
constexpr uint64_t kNoId = ~uint64_t{0};
CtrBatch MakeBatch(const std::vector<std::vector<uint64_t>>& ids,
                   int dense_features) {
  CtrBatch b;
  b.batch = static_cast<int>(ids.size());
  b.num_fields = static_cast<int>(ids[0].size());
  b.offsets.push_back(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (uint64_t id : ids[i]) {
      if (id != kNoId) b.ids.push_back(id);
      b.offsets.push_back(static_cast<int32_t>(b.ids.size()));
    }
    for (int j = 0; j < dense_features; ++j) {
      b.dense.push_back(0.25f * static_cast<float>(i) - 0.3f * j);
    }
    b.labels.push_back(static_cast<float>(i % 2));
  }
  return b;
}

std::unique_ptr<SparseStore> MakeStore(const DlrmSpec& spec) {
  SparseStoreConfig c;
  c.dims.assign(spec.num_fields, spec.embedding_dim);
  c.seed = 7;
  c.optimizer.kind = RowOptimizerKind::kSgd;
  c.optimizer.lr = 0.1f;
  auto store = SparseStore::Create(c);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

// Records reads (calls, and per table the ids asked) and fails a read that
// asks for one table.
class RecordingSource : public EmbeddingRowSource {
 public:
  RecordingSource(const SparseStore* store, int fail_table)
      : inner_(store), fail_table_(fail_table) {}
  absl::Status Read(absl::Span<const TableIds> tables,
                    std::vector<std::vector<float>>& out) override {
    ++calls_;
    for (const TableIds& t : tables) {
      reads_[t.table].push_back(
          std::vector<uint64_t>(t.ids.begin(), t.ids.end()));
      if (t.table == fail_table_) {
        return absl::UnavailableError("table 1 on shard 3 is gone");
      }
    }
    return inner_.Read(tables, out);
  }
  int calls_ = 0;
  std::map<int32_t, std::vector<std::vector<uint64_t>>> reads_;

 private:
  SparseStoreRowSource inner_;
  int fail_table_;
};

const std::vector<std::vector<uint64_t>> kIds = {
    {10, 20, 30}, {11, 20, kNoId}, {10, 21, 30}, {10, 20, 31}, {12, 22, 30}};

TEST(CtrStepTest, MatchesTheModelOnHandGatheredRows) {
  const DlrmSpec spec = TinySpec();
  auto backend = MakeCpuBackend(1);
  auto step = CtrStep::Create(spec, backend.get());
  ASSERT_TRUE(step.ok()) << step.status();
  auto store = MakeStore(spec);
  SparseStoreRowSource source(store.get());
  const CtrBatch batch = MakeBatch(kIds, spec.dense_features);
  const int64_t p = step->num_params();
  const std::vector<float> params = step->model().InitialParameters(3);
  std::vector<float> grads(p, -1.0f);
  auto result =
      step->ForwardBackward(batch, params.data(), source, grads.data());
  ASSERT_TRUE(result.ok()) << result.status();

  // The reference: rows read one id at a time, pooled by hand.
  const int n = batch.batch, f = spec.num_fields, d = spec.embedding_dim;
  std::vector<float> pooled(n * f * d, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < f; ++t) {
      if (kIds[i][t] == kNoId) continue;
      const uint64_t id = kIds[i][t];
      ASSERT_TRUE(store
                      ->Read(t, absl::MakeConstSpan(&id, 1),
                             absl::MakeSpan(pooled).subspan((i * f + t) * d, d))
                      .ok());
    }
  }
  auto model = DlrmModel::Create(spec, backend.get());
  ASSERT_TRUE(model.ok());
  std::vector<float> want_grads(p), d_pooled(n * f * d);
  auto want_loss = model->ForwardBackward(
      params.data(), batch.dense.data(), pooled.data(), batch.labels.data(), n,
      1.0f, want_grads.data(), d_pooled.data());
  ASSERT_TRUE(want_loss.ok());
  EXPECT_DOUBLE_EQ(result->loss_sum, *want_loss);
  EXPECT_EQ(result->batch, n);
  EXPECT_EQ(grads, want_grads);  // the same computation: the same bits

  // Row gradients: per unique id the sum of its bags' pooled gradients.
  std::vector<std::map<uint64_t, std::vector<float>>> want_rows(f);
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < f; ++t) {
      if (kIds[i][t] == kNoId) continue;
      std::vector<float>& g = want_rows[t][kIds[i][t]];
      g.resize(d, 0.0f);
      for (int e = 0; e < d; ++e) g[e] += d_pooled[(i * f + t) * d + e];
    }
  }
  ASSERT_EQ(result->rows.size(), 3u);
  for (const SparseRows& rows : result->rows) {
    const std::map<uint64_t, std::vector<float>>& want = want_rows[rows.table];
    ASSERT_EQ(rows.ids.size(), want.size()) << "table " << rows.table;
    ASSERT_EQ(rows.grads.size(), rows.ids.size() * d);
    for (size_t k = 0; k < rows.ids.size(); ++k) {
      ASSERT_TRUE(want.contains(rows.ids[k]));
      for (int e = 0; e < d; ++e) {
        EXPECT_NEAR(rows.grads[k * d + e], want.at(rows.ids[k])[e], 1e-6f)
            << "table " << rows.table << " id " << rows.ids[k];
      }
    }
  }

  // Predict agrees with the model on the same rows.
  std::vector<float> probs(n), want_probs(n);
  ASSERT_TRUE(
      step->Predict(batch, params.data(), source, absl::MakeSpan(probs)).ok());
  ASSERT_TRUE(model
                  ->Predict(params.data(), batch.dense.data(), pooled.data(), n,
                            want_probs.data())
                  .ok());
  EXPECT_EQ(probs, want_probs);
}

TEST(CtrStepTest, ReadsAndReturnsOnlyTheUniqueIds) {
  const DlrmSpec spec = TinySpec();
  auto backend = MakeCpuBackend(1);
  auto step = CtrStep::Create(spec, backend.get());
  ASSERT_TRUE(step.ok());
  auto store = MakeStore(spec);
  RecordingSource source(store.get(), /*fail_table=*/-1);
  // Table 2 has no id at all in this batch.
  const std::vector<std::vector<uint64_t>> ids = {
      {5, 9, kNoId}, {5, 9, kNoId}, {6, 9, kNoId}, {5, 8, kNoId}};
  const CtrBatch batch = MakeBatch(ids, spec.dense_features);
  const std::vector<float> params = step->model().InitialParameters(1);
  std::vector<float> grads(step->num_params());
  auto result =
      step->ForwardBackward(batch, params.data(), source, grads.data());
  ASSERT_TRUE(result.ok()) << result.status();

  // One read per table holding ids, each of its distinct ids once.
  EXPECT_EQ(source.calls_, 1);  // every table in one read
  ASSERT_EQ(source.reads_.size(), 2u);
  EXPECT_EQ(source.reads_[0], (std::vector<std::vector<uint64_t>>{{5, 6}}));
  EXPECT_EQ(source.reads_[1], (std::vector<std::vector<uint64_t>>{{9, 8}}));
  EXPECT_EQ(result->unique_ids_per_table, (std::vector<int64_t>{2, 2, 0}));
  EXPECT_EQ(result->unique_ids, 4);
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->rows[0].table, 0);
  EXPECT_EQ(result->rows[0].ids, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(result->rows[1].table, 1);
  EXPECT_EQ(result->rows[1].ids, (std::vector<uint64_t>{9, 8}));

  // Applied to the store, the step creates exactly those rows.
  const std::vector<SparseRows>* contribution[] = {&result->rows};
  ASSERT_TRUE(store->ApplyStep(contribution, batch.batch, 0).ok());
  EXPECT_EQ(store->Stats().total.rows, 4);
  EXPECT_TRUE(store->table(0).HasRow(5));
  EXPECT_TRUE(store->table(0).HasRow(6));
  EXPECT_TRUE(store->table(1).HasRow(8));
  EXPECT_TRUE(store->table(1).HasRow(9));
  EXPECT_EQ(store->table(2).rows(), 0);
}

TEST(CtrStepTest, ARowSourceErrorPropagatesNamingTheTable) {
  const DlrmSpec spec = TinySpec();
  auto backend = MakeCpuBackend(1);
  auto step = CtrStep::Create(spec, backend.get());
  ASSERT_TRUE(step.ok());
  auto store = MakeStore(spec);
  RecordingSource source(store.get(), /*fail_table=*/1);
  const CtrBatch batch = MakeBatch(kIds, spec.dense_features);
  const std::vector<float> params = step->model().InitialParameters(1);
  std::vector<float> grads(step->num_params(), 42.0f);
  auto result =
      step->ForwardBackward(batch, params.data(), source, grads.data());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("embedding tables"));
  EXPECT_THAT(result.status().message(),
              HasSubstr("table 1 on shard 3 is gone"));
  EXPECT_EQ(grads, std::vector<float>(step->num_params(), 42.0f));

  std::vector<float> probs(batch.batch);
  EXPECT_EQ(
      step->Predict(batch, params.data(), source, absl::MakeSpan(probs)).code(),
      absl::StatusCode::kUnavailable);
}

TEST(CtrStepTest, RefusesBatchesThatDoNotFitTheModel) {
  const DlrmSpec spec = TinySpec();
  auto backend = MakeCpuBackend(1);
  auto step = CtrStep::Create(spec, backend.get());
  ASSERT_TRUE(step.ok());
  auto store = MakeStore(spec);
  SparseStoreRowSource source(store.get());
  const std::vector<float> params = step->model().InitialParameters(1);
  std::vector<float> grads(step->num_params());
  auto run = [&](const CtrBatch& b) {
    return step->ForwardBackward(b, params.data(), source, grads.data())
        .status();
  };
  CtrBatch empty;
  empty.num_fields = spec.num_fields;
  empty.offsets = {0};
  EXPECT_EQ(run(empty).code(), absl::StatusCode::kInvalidArgument);

  CtrBatch two_fields = MakeBatch({{1, 2}, {3, 4}}, spec.dense_features);
  EXPECT_THAT(run(two_fields).message(), HasSubstr("2 categorical fields"));

  CtrBatch wide = MakeBatch(kIds, spec.dense_features + 1);
  EXPECT_EQ(run(wide).code(), absl::StatusCode::kInvalidArgument);

  CtrBatch no_labels = MakeBatch(kIds, spec.dense_features);
  no_labels.labels.pop_back();
  EXPECT_EQ(run(no_labels).code(), absl::StatusCode::kInvalidArgument);

  CtrBatch bad_offsets = MakeBatch(kIds, spec.dense_features);
  bad_offsets.offsets[2] = 0;  // decreasing
  EXPECT_EQ(run(bad_offsets).code(), absl::StatusCode::kInvalidArgument);

  const CtrBatch ok = MakeBatch(kIds, spec.dense_features);
  std::vector<float> short_out(ok.batch - 1);
  EXPECT_EQ(step->Predict(ok, params.data(), source, absl::MakeSpan(short_out))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(run(ok).ok());
}

}  // namespace
}  // namespace ferry
