#include "worker/standalone_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "coordinator/ctr_test_evaluator.h"
#include "coordinator/test_set_evaluator.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "model/dlrm_spec.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "ps/dlrm_export.h"
#include "ps/dlrm_init.h"
#include "ps/job_tables.h"

namespace ferry {
namespace {

// Sequential layer stacks (MLP, ConvNet, BatchNorm): scored for accuracy.
class LayerStackFamily final : public StandaloneModel {
 public:
  static absl::StatusOr<std::unique_ptr<StandaloneModel>> Create(
      const v1::JobSpec& job) {
    auto m = std::unique_ptr<LayerStackFamily>(new LayerStackFamily(job));
    ASSIGN_OR_RETURN(m->def_, JobModel(job));
    ASSIGN_OR_RETURN(const ParameterLayout params,
                     ModelParameterLayout(m->def_));
    m->parameters_ = params.total_elements();
    ASSIGN_OR_RETURN(
        TrainTestData data,
        LoadTrainTest(job.dataset(), job.data_dir(), m->def_, job.seed()));
    m->test_samples_ = data.test.num_samples;
    ASSIGN_OR_RETURN(m->evaluator_,
                     TestSetEvaluator::Create(m->def_, std::move(data.test)));
    return std::unique_ptr<StandaloneModel>(std::move(m));
  }

  absl::StatusOr<std::vector<float>> InitialWeights() override {
    return JobInitialValues(job_, def_);
  }
  absl::StatusOr<TestScores> Evaluate(
      const std::vector<float>& weights) override {
    return evaluator_->Evaluate(weights.data());
  }
  absl::Status Export(const std::string& dir,
                      const std::vector<float>& weights) override {
    ModelValues values;
    values.def = def_;
    values.params.assign(weights.begin(), weights.begin() + parameters_);
    values.state.assign(weights.begin() + parameters_, weights.end());
    return ExportModel(dir, values);
  }
  int64_t parameter_elements() const override { return parameters_; }
  std::string Describe() const override {
    return absl::StrFormat("model %s (%d parameters), %s, %d test samples",
                           job_.model(), parameters_, job_.dataset(),
                           test_samples_);
  }

 private:
  explicit LayerStackFamily(v1::JobSpec job) : job_(std::move(job)) {}

  const v1::JobSpec job_;
  ModelDef def_;
  int64_t parameters_ = 0;
  int64_t test_samples_ = 0;
  std::unique_ptr<TestSetEvaluator> evaluator_;
};

nlohmann::json TableStatsJson(const SparseTableStats& s) {
  return {{"rows", s.rows},
          {"pending_ids", s.pending_ids},
          {"rows_created", s.rows_created},
          {"ids_admitted", s.ids_admitted},
          {"updates_dropped", s.updates_dropped},
          {"evicted_ttl", s.evicted_ttl},
          {"evicted_memory", s.evicted_memory},
          {"row_bytes", s.row_bytes},
          {"overhead_bytes", s.overhead_bytes}};
}

// DLRM CTR models on Criteo data: dense weights in the buffer, embedding
// rows in one SparseStore; scored for AUC and log loss.
class DlrmFamily final : public StandaloneModel {
 public:
  static absl::StatusOr<std::unique_ptr<StandaloneModel>> Create(
      const v1::JobSpec& job) {
    auto m = std::unique_ptr<DlrmFamily>(new DlrmFamily(job));
    ASSIGN_OR_RETURN(m->spec_, JobDlrmSpec(job));
    ASSIGN_OR_RETURN(const ParameterLayout layout,
                     DlrmParameterLayout(m->spec_));
    m->parameters_ = layout.total_elements();
    ASSIGN_OR_RETURN(m->embedding_, FromProto(job.embedding()));
    ASSIGN_OR_RETURN(m->tables_, SparseStore::Create(DlrmTablesConfig(
                                     m->spec_, m->embedding_, job.seed())));
    ASSIGN_OR_RETURN(const std::string dir, ParseCtrDatasetSpec(job.dataset()));
    ASSIGN_OR_RETURN(const std::string test_path, FindCtrFile(dir, "test"));
    ASSIGN_OR_RETURN(CtrDataset test, CtrDataset::LoadFile(test_path));
    m->test_summary_ = test.load_summary();
    ASSIGN_OR_RETURN(m->evaluator_,
                     CtrTestEvaluator::Create(m->spec_, std::move(test)));
    return std::unique_ptr<StandaloneModel>(std::move(m));
  }

  // --init-from's dense weights, and its tables replace the store's.
  absl::StatusOr<std::vector<float>> InitialWeights() override {
    if (job_.init_from().empty()) return JobDenseInitialValues(job_);
    if (IsRingCheckpointDirectory(PosixFileSystem(), job_.init_from())) {
      // A ring DLRM's checkpoint: the same version's dense half and tables.
      ASSIGN_OR_RETURN(std::vector<float> dense, JobDenseInitialValues(job_));
      RETURN_IF_ERROR(RestoreDlrmInitTables(job_.init_from(), parameters_,
                                            *tables_, TableScope::kAll));
      return dense;
    }
    absl::StatusOr<std::vector<float>> imported =
        ImportDlrm(job_.init_from(), spec_, *tables_);
    if (!imported.ok()) {
      return absl::Status(imported.status().code(),
                          absl::StrCat("--init-from ", job_.init_from(), ": ",
                                       imported.status().message()));
    }
    return imported;
  }
  SparseStore* tables() override { return tables_.get(); }
  absl::StatusOr<TestScores> Evaluate(
      const std::vector<float>& weights) override {
    SparseStoreRowSource rows(tables_.get());
    ASSIGN_OR_RETURN(TestScores scores,
                     evaluator_->Evaluate(weights.data(), rows));
    scores.embedding_rows = tables_->Stats().total.rows;
    return scores;
  }
  absl::Status Export(const std::string& dir,
                      const std::vector<float>& weights) override {
    return ExportDlrm(dir, spec_, weights, *tables_);
  }
  int64_t parameter_elements() const override { return parameters_; }
  std::string Describe() const override {
    return absl::StrFormat(
        "DLRM %s (%d dense parameters, %d tables of dim %d), %s, test: %s, "
        "embeddings %s lr %g admit %d ttl %d max %d MiB",
        job_.model(), parameters_, spec_.num_fields, spec_.embedding_dim,
        job_.dataset(), test_summary_,
        RowOptimizerKindName(embedding_.optimizer.kind),
        embedding_.optimizer.lr, embedding_.admit_count, embedding_.ttl_steps,
        embedding_.max_mb);
  }
  nlohmann::json SummaryJson() const override {
    const SparseStoreStats s = tables_->Stats();
    nlohmann::json tables = nlohmann::json::array();
    for (const SparseTableStats& t : s.tables) {
      tables.push_back(TableStatsJson(t));
    }
    nlohmann::json store = TableStatsJson(s.total);
    store["bytes"] = s.bytes;
    store["tables"] = std::move(tables);
    return {{"model", "dlrm"},
            {"embedding_rows", s.total.rows},
            {"embedding_admitted", s.total.ids_admitted},
            {"embedding_evicted_ttl", s.total.evicted_ttl},
            {"embedding_evicted_memory", s.total.evicted_memory},
            {"embedding_updates_dropped", s.total.updates_dropped},
            {"embedding_bytes", s.bytes},
            {"dense_parameters", parameters_},
            {"embedding", std::move(store)}};
  }

 private:
  explicit DlrmFamily(v1::JobSpec job) : job_(std::move(job)) {}

  const v1::JobSpec job_;
  DlrmSpec spec_;
  int64_t parameters_ = 0;
  EmbeddingOptions embedding_;
  std::string test_summary_;
  std::unique_ptr<SparseStore> tables_;
  std::unique_ptr<CtrTestEvaluator> evaluator_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StandaloneModel>> StandaloneModel::ForJob(
    const v1::JobSpec& job) {
  if (IsDlrmJob(job)) return DlrmFamily::Create(job);
  return LayerStackFamily::Create(job);
}

}  // namespace ferry
