#include "coordinator/test_set_evaluator.h"

#include "common/log.h"
#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "data/evaluator.h"
#include "model/model_export.h"

namespace ferry {
namespace {
// Samples per evaluation pass: activations scale with it (the ConvNet holds
// ~0.5 MB of activations per sample), and a bigger batch is not faster on
// the CPU backend, whose convolutions run sample by sample.
constexpr int kEvalBatch = 250;
}  // namespace

absl::StatusOr<std::unique_ptr<TestSetEvaluator>> TestSetEvaluator::Create(
    const ModelDef& model_def, Dataset test_set,
    const std::string& export_dir) {
  std::unique_ptr<TestSetEvaluator> e(new TestSetEvaluator());
  e->def_ = model_def;
  e->export_dir_ = export_dir;
  e->backend_ = MakeCpuBackend(1);
  ASSIGN_OR_RETURN(SequentialModel model,
                   SequentialModel::Create(model_def, e->backend_.get()));
  e->model_ = std::make_unique<SequentialModel>(std::move(model));
  e->job_elements_ = e->model_->layout().total_elements() +
                     e->model_->state_layout().total_elements();
  ASSIGN_OR_RETURN(BatchStager stager,
                   BatchStager::Create(e->backend_.get(),
                                       e->model_->input_dim(), kEvalBatch));
  e->stager_ = std::make_unique<BatchStager>(std::move(stager));
  e->test_set_ = std::move(test_set);
  return e;
}

absl::StatusOr<TestScores> TestSetEvaluator::Evaluate(const float* values) {
  absl::MutexLock lock(&mu_);
  const int64_t num_params = model_->layout().total_elements();
  const int64_t num_state = job_elements_ - num_params;
  if (num_state > 0) {
    RETURN_IF_ERROR(backend_->CopyToDevice(values + num_params, num_state,
                                           model_->state()));
  }
  ASSIGN_OR_RETURN(
      EvalResult result,
      EvaluateDataset(*model_, values, test_set_, *stager_, kEvalBatch));
  if (!export_dir_.empty()) {
    ModelValues exported;
    exported.def = def_;
    exported.params.assign(values, values + num_params);
    exported.state.assign(values + num_params, values + job_elements_);
    if (absl::Status s = ExportModel(export_dir_, exported); !s.ok()) {
      LogError("cannot export the model", {{"dir", export_dir_}, {"error", s}});
    } else {
      LogInfo("model exported",
              {{"dir", export_dir_}, {"test_accuracy", result.accuracy}});
    }
  }
  return TestScores{.accuracy = result.accuracy, .loss = result.mean_loss};
}

}  // namespace ferry
