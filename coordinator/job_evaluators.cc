#include "coordinator/job_evaluators.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "proto/job_convert.h"

namespace ferry {

absl::StatusOr<JobEvaluators> MakeJobEvaluators(const v1::JobSpec& job,
                                                JobTestSet test_set,
                                                const std::string& export_dir) {
  // A DLRM's export needs its tables: its control writes it.
  JobEvaluators out;
  if (job.model_from_worker()) return out;
  if (IsDlrmJob(job)) {
    CtrDataset* ctr = std::get_if<CtrDataset>(&test_set);
    if (ctr == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the job's model '", job.model(),
          "' is a DLRM: it is evaluated on a criteo: dataset's test split"));
    }
    ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job));
    ASSIGN_OR_RETURN(out.ctr, CtrTestEvaluator::Create(spec, std::move(*ctr)));
    return out;
  }
  Dataset* dense = std::get_if<Dataset>(&test_set);
  if (dense == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(),
        "' is not a DLRM: it cannot be evaluated on Criteo examples"));
  }
  ASSIGN_OR_RETURN(ModelDef model, JobModel(job));
  ASSIGN_OR_RETURN(out.dense, TestSetEvaluator::Create(model, std::move(*dense),
                                                       export_dir));
  return out;
}

absl::Status NoEvaluatorStatus() {
  return absl::UnimplementedError(
      "the job's model is its workers' (--model external): ferry does not "
      "evaluate it; the script does");
}

absl::Status ExportWorkerModel(const std::string& dir,
                               const ParameterLayout& layout,
                               absl::Span<const float> values) {
  absl::Status written = ExportLayoutValues(dir, layout, values);
  if (!written.ok()) {
    return absl::Status(written.code(), absl::StrCat("--export ", dir, ": ",
                                                     written.message()));
  }
  return absl::OkStatus();
}

}  // namespace ferry
