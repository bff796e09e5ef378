// ExportDlrm / ImportDlrm (ps/dlrm_export.h): a DLRM directory round
// trips the dense weights and every table's rows, state and counters, and
// a directory that does not fit the job is refused, naming what, with the
// store unchanged.
#include "ps/dlrm_export.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_export.h"
#include "ps/merged_tables.h"
#include "ps/tables_file.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

DlrmSpec SmallSpec() {
  DlrmSpec spec = *DlrmPreset("dlrm");
  spec.embedding_dim = 4;
  spec.bottom = {8};
  spec.top = {8};
  return spec;
}

std::unique_ptr<SparseStore> Store(const DlrmSpec& spec,
                                   RowOptimizerKind kind) {
  SparseStoreConfig config;
  config.dims.assign(spec.num_fields, spec.embedding_dim);
  config.optimizer.kind = kind;
  config.seed = 5;
  return *SparseStore::Create(config);
}

// Rows in three tables, two steps (so the optimizer state moved).
void Fill(SparseStore& store, int dim) {
  for (int step = 0; step < 2; ++step) {
    std::vector<SparseRows> rows;
    for (int32_t table : {0, 3, 25}) {
      SparseRows part;
      part.table = table;
      for (uint64_t id = 1; id <= 40; ++id) {
        part.ids.push_back(id * 7919 + table);
      }
      part.grads.assign(part.ids.size() * dim, 0.01f * (step + 1));
      rows.push_back(std::move(part));
    }
    const std::vector<SparseRows>* contribution[] = {&rows};
    ASSERT_TRUE(store.ApplyStep(contribution, 1, step).ok());
  }
}

std::vector<float> Params(const DlrmSpec& spec) {
  const ParameterLayout layout = *DlrmParameterLayout(spec);
  std::vector<float> params(layout.total_elements());
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.001f * (i % 97);
  return params;
}

void ExpectSameRows(const SparseStore& a, const SparseStore& b) {
  const std::vector<TableCheckpoint> x = a.Export(), y = b.Export();
  ASSERT_EQ(x.size(), y.size());
  for (size_t t = 0; t < x.size(); ++t) {
    EXPECT_EQ(x[t].ids, y[t].ids) << t;
    EXPECT_EQ(x[t].values, y[t].values) << t;
    // Last-seen steps are shifted by the newest + 1 (here 1 + 1), in order.
    ASSERT_EQ(x[t].last_seen.size(), y[t].last_seen.size());
    for (size_t i = 0; i < x[t].last_seen.size(); ++i) {
      EXPECT_EQ(x[t].last_seen[i] - 2, y[t].last_seen[i]) << t;
    }
    EXPECT_EQ(x[t].counters, y[t].counters) << t;
  }
}

TEST(DlrmExport, RoundTripsWeightsRowsAndTheirState) {
  InMemoryFileSystem fs;
  const DlrmSpec spec = SmallSpec();
  auto store = Store(spec, RowOptimizerKind::kAdagrad);
  Fill(*store, spec.embedding_dim);
  const std::vector<float> params = Params(spec);
  ASSERT_TRUE(ExportDlrm("/m", spec, params, *store, &fs).ok());
  EXPECT_THAT(*fs.ListDirectory("/m"),
              ::testing::ElementsAre("embeddings.ckpt", "model.json",
                                     "model.safetensors"));
  // The weights file is plain safetensors under the layout's names.
  const SafetensorsFile weights =
      *DecodeSafetensors(*fs.ReadFile("/m/model.safetensors"));
  EXPECT_EQ(weights.tensors.front().name, "bot_l.0.weight");

  auto copy = Store(spec, RowOptimizerKind::kAdagrad);
  absl::StatusOr<std::vector<float>> back = ImportDlrm("/m", spec, *copy, &fs);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, params);
  ExpectSameRows(*store, *copy);
  EXPECT_EQ(copy->Stats().total.rows, 120);
}

// A distributed job's export: two shards' parts (the rows each holds)
// merged are the one store's rows; their counters add up.
TEST(DlrmExport, MergedShardPartsExportAsTheWholeStore) {
  InMemoryFileSystem fs;
  const DlrmSpec spec = SmallSpec();
  auto whole = Store(spec, RowOptimizerKind::kAdagrad);
  Fill(*whole, spec.embedding_dim);
  // The whole store's parts cut in two by id, as placement would.
  std::vector<TableCheckpoint> a = whole->Export(), b = a;
  for (size_t t = 0; t < a.size(); ++t) {
    const size_t half = a[t].ids.size() / 2;
    const size_t floats = half * a[t].row_floats;
    a[t].ids.resize(half);
    a[t].last_seen.resize(half);
    a[t].values.resize(floats);
    b[t].ids.erase(b[t].ids.begin(), b[t].ids.begin() + half);
    b[t].last_seen.erase(b[t].last_seen.begin(), b[t].last_seen.begin() + half);
    b[t].values.erase(b[t].values.begin(), b[t].values.begin() + floats);
    b[t].counters = TableCounters{1, 2, 3, 4, 5};
  }
  auto merged = MergedTableSources::Create({ViewsOf(a), ViewsOf(b)});
  ASSERT_TRUE(merged.ok()) << merged.status();
  const std::vector<float> params = Params(spec);
  ASSERT_TRUE(ExportDlrm("/m", spec, params, (*merged)->pointers(),
                         TablesMetaOf(whole->config(), spec.embedding_dim), &fs)
                  .ok());
  auto copy = Store(spec, RowOptimizerKind::kAdagrad);
  auto back = ImportDlrm("/m", spec, *copy, &fs);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, params);
  EXPECT_EQ(copy->Stats().total.rows, whole->Stats().total.rows);
  const std::vector<TableCheckpoint> x = whole->Export(), y = copy->Export();
  ASSERT_EQ(x.size(), y.size());
  for (size_t t = 0; t < x.size(); ++t) {
    EXPECT_EQ(x[t].ids, y[t].ids) << t;
    EXPECT_EQ(x[t].values, y[t].values) << t;
    TableCounters sum = *x[t].counters;
    sum.rows_created += 1;
    sum.ids_admitted += 2;
    sum.updates_dropped += 3;
    sum.evicted_ttl += 4;
    sum.evicted_memory += 5;
    EXPECT_EQ(*y[t].counters, sum) << t;
  }
}

TEST(DlrmExport, RefusesWhatDoesNotFitAndChangesNoRow) {
  InMemoryFileSystem fs;
  const DlrmSpec spec = SmallSpec();
  auto store = Store(spec, RowOptimizerKind::kAdagrad);
  Fill(*store, spec.embedding_dim);
  ASSERT_TRUE(ExportDlrm("/m", spec, Params(spec), *store, &fs).ok());
  // A target with rows of its own: a refused import keeps them.
  auto target = Store(spec, RowOptimizerKind::kAdagrad);
  {
    std::vector<SparseRows> own = {{1, {424242}, {1, 1, 1, 1}}};
    const std::vector<SparseRows>* contribution[] = {&own};
    ASSERT_TRUE(target->ApplyStep(contribution, 1, 0).ok());
  }
  const auto unchanged = [&] {
    EXPECT_EQ(target->Stats().total.rows, 1);
    EXPECT_TRUE(target->table(1).HasRow(424242));
  };

  // Other seeds or admission would read ids the export never saw otherwise.
  SparseStoreConfig other_seed = target->config();
  other_seed.seed = 6;
  auto reseeded = *SparseStore::Create(other_seed);
  auto s = ImportDlrm("/m", spec, *reseeded, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--seed 5"));
  SparseStoreConfig admit2 = target->config();
  admit2.admit_count = 2;
  s = ImportDlrm("/m", spec, **SparseStore::Create(admit2), &fs);
  EXPECT_THAT(s.status().message(), HasSubstr("--embedding-admit-count 1"));

  DlrmSpec wider = spec;
  wider.top = {16};
  s = ImportDlrm("/m", wider, *target, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("another model"));
  unchanged();

  // Rows with another optimizer's state: refused from the metadata, and by
  // the tables file itself for an export that does not record it.
  auto sgd = Store(spec, RowOptimizerKind::kSgd);
  s = ImportDlrm("/m", spec, *sgd, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("--embedding-optimizer adagrad, this job's is sgd"));
  EXPECT_EQ(sgd->Stats().total.rows, 0);
  const std::string recorded = *fs.ReadFile("/m/model.safetensors");
  SafetensorsFile unrecorded = *DecodeSafetensors(recorded);
  ASSERT_EQ(unrecorded.metadata.erase("ferry.embedding.row_optimizer"), 1u);
  fs.SetFileContents("/m/model.safetensors", *EncodeSafetensors(unrecorded));
  s = ImportDlrm("/m", spec, *sgd, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("/m/embeddings.ckpt"));
  EXPECT_EQ(sgd->Stats().total.rows, 0);
  fs.SetFileContents("/m/model.safetensors", recorded);

  std::string ckpt = *fs.ReadFile("/m/embeddings.ckpt");
  std::string bad = ckpt;
  bad[bad.size() / 2] ^= 1;
  fs.SetFileContents("/m/embeddings.ckpt", bad);
  s = ImportDlrm("/m", spec, *target, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  unchanged();
  fs.SetFileContents("/m/embeddings.ckpt", ckpt);

  SafetensorsFile weights =
      *DecodeSafetensors(*fs.ReadFile("/m/model.safetensors"));
  const std::string good = *fs.ReadFile("/m/model.safetensors");
  weights.tensors[1].values[0] = std::nanf("");
  fs.SetFileContents("/m/model.safetensors", *EncodeSafetensors(weights));
  s = ImportDlrm("/m", spec, *target, &fs);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("non-finite"));
  unchanged();
  weights = *DecodeSafetensors(good);
  weights.tensors.pop_back();
  fs.SetFileContents("/m/model.safetensors", *EncodeSafetensors(weights));
  s = ImportDlrm("/m", spec, *target, &fs);
  EXPECT_THAT(s.status().message(), HasSubstr("is missing"));
  unchanged();
  fs.SetFileContents("/m/model.safetensors", good);

  EXPECT_EQ(ImportDlrm("/nowhere", spec, *target, &fs).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ExportDlrm("/n", spec, {1.0f}, *store, &fs).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ImportDlrm("/m", spec, *target, &fs).ok());
  EXPECT_FALSE(target->table(1).HasRow(424242));  // replaced by the export's
}

TEST(DlrmExport, ImportedRowsWereSeenBeforeStepZero) {
  InMemoryFileSystem fs;
  const DlrmSpec spec = SmallSpec();
  auto store = Store(spec, RowOptimizerKind::kAdagrad);
  Fill(*store, spec.embedding_dim);  // rows last seen at steps 0 and 1
  {
    std::vector<SparseRows> late = {{3, {99}, {1, 1, 1, 1}}};
    const std::vector<SparseRows>* contribution[] = {&late};
    ASSERT_TRUE(store->ApplyStep(contribution, 1, 50).ok());
  }
  ASSERT_TRUE(ExportDlrm("/m", spec, Params(spec), *store, &fs).ok());
  auto copy = Store(spec, RowOptimizerKind::kAdagrad);
  ASSERT_TRUE(ImportDlrm("/m", spec, *copy, &fs).ok());
  // The export's steps, in order, end at -1: step 50 -> -1, step 1 -> -50.
  for (const TableCheckpoint& part : copy->Export()) {
    for (size_t i = 0; i < part.ids.size(); ++i) {
      if (part.table == 3 && part.ids[i] == 99) {
        EXPECT_EQ(part.last_seen[i], -1);
      } else {
        EXPECT_LE(part.last_seen[i], -50) << part.table << " " << part.ids[i];
      }
    }
  }
}

}  // namespace
}  // namespace ferry
