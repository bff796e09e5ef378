#include "coordinator/ring_control.h"

#include "common/status_macros.h"
#include "proto/job_convert.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<RingControl>> RingControl::Create(
    const v1::JobSpec& job, Dataset test_set, const std::string& export_dir,
    absl::Duration fetch_timeout) {
  std::unique_ptr<RingControl> control(
      new RingControl(job.job_id(), fetch_timeout));
  ASSIGN_OR_RETURN(ModelDef model, JobModel(job));  // refuses a DLRM
  ASSIGN_OR_RETURN(
      control->evaluator_,
      TestSetEvaluator::Create(model, std::move(test_set), export_dir));
  return control;
}

absl::StatusOr<TestScores> RingControl::Evaluate(int64_t min_version) {
  return EvaluateAndNotify(min_version, [] {});
}

absl::StatusOr<TestScores> RingControl::EvaluateAndNotify(
    int64_t min_version, absl::FunctionRef<void()> fetched) {
  std::vector<float> params(evaluator_->num_parameters());
  RETURN_IF_ERROR(weights_.Fetch(min_version, params));
  fetched();
  return evaluator_->Evaluate(params.data());
}

}  // namespace ferry
