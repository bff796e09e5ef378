#include "coordinator/ring_control.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job_evaluators.h"
#include "proto/job_convert.h"
#include "ps/dlrm_export.h"
#include "ps/job_tables.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<RingControl>> RingControl::Create(
    const v1::JobSpec& job, JobTestSet test_set, const std::string& export_dir,
    absl::Duration fetch_timeout) {
  std::unique_ptr<RingControl> control(
      new RingControl(job.job_id(), fetch_timeout));
  ASSIGN_OR_RETURN(JobEvaluators evaluators,
                   MakeJobEvaluators(job, std::move(test_set), export_dir));
  control->evaluator_ = std::move(evaluators.dense);
  control->ctr_evaluator_ = std::move(evaluators.ctr);
  if (job.model_from_worker()) {
    ASSIGN_OR_RETURN(control->worker_model_, JobDenseLayout(job));
    control->export_dir_ = export_dir;
  }
  if (control->ctr_evaluator_ != nullptr) {
    ASSIGN_OR_RETURN(control->tables_, JobTablesConfig(job));
    control->full_table_rows_ = job.embedding().ring_full_table_rows();
    if (!export_dir.empty() && control->full_table_rows_ > 0) {
      return absl::InvalidArgumentError(
          "--export with --ring-full-table-rows: full tables hold ids mod "
          "that many rows, which an export cannot describe");
    }
    control->export_dir_ = export_dir;
    ASSIGN_OR_RETURN(control->spec_, JobDlrmSpec(job));
  }
  return control;
}

absl::StatusOr<TestScores> RingControl::Evaluate(int64_t min_version) {
  return EvaluateAndNotify(min_version, [] {});
}

absl::StatusOr<TestScores> RingControl::EvaluateAndNotify(
    int64_t min_version, absl::FunctionRef<void()> fetched) {
  if (worker_model_.has_value()) {  // not scored; exported when asked
    if (!export_dir_.empty()) {
      std::vector<float> params(
          static_cast<size_t>(worker_model_->total_elements()));
      absl::Status fetched_weights = weights_.Fetch(min_version, params);
      fetched();
      RETURN_IF_ERROR(fetched_weights);
      RETURN_IF_ERROR(ExportWorkerModel(export_dir_, *worker_model_, params));
    } else {
      fetched();
    }
    return NoEvaluatorStatus();
  }
  if (ctr_evaluator_ == nullptr) {
    std::vector<float> params(evaluator_->num_parameters());
    RETURN_IF_ERROR(weights_.Fetch(min_version, params));
    fetched();
    return evaluator_->Evaluate(params.data());
  }
  std::vector<float> params(ctr_evaluator_->num_parameters());
  std::string blob;
  RETURN_IF_ERROR(weights_.Fetch(min_version, params, &blob));
  fetched();
  absl::StatusOr<std::unique_ptr<SparseStore>> tables =
      DecodeSparseStore(blob, tables_);
  if (!tables.ok()) {
    return absl::Status(tables.status().code(),
                        absl::StrCat("the ring member's embedding tables: ",
                                     tables.status().message()));
  }
  SparseStoreRowSource rows(tables->get());
  // Full tables (--ring-full-table-rows N): id mod N, as the members read.
  ModuloRowSource full_rows(&rows, std::max<int64_t>(full_table_rows_, 1));
  EmbeddingRowSource& source =
      full_table_rows_ > 0 ? static_cast<EmbeddingRowSource&>(full_rows) : rows;
  ASSIGN_OR_RETURN(TestScores scores,
                   ctr_evaluator_->Evaluate(params.data(), source));
  if (!export_dir_.empty()) {
    if (absl::Status written = ExportDlrm(export_dir_, spec_, params, **tables);
        !written.ok()) {
      return absl::Status(
          written.code(),
          absl::StrCat("--export ", export_dir_, ": ", written.message()));
    }
  }
  const SparseStoreStats stats = (*tables)->Stats();
  scores.embedding_rows = stats.total.rows;
  scores.embedding_pending_ids = stats.total.pending_ids;
  return scores;
}

}  // namespace ferry
