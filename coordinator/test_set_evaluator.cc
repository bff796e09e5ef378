#include "coordinator/test_set_evaluator.h"

#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "data/evaluator.h"

namespace ferry {
namespace {
constexpr int kEvalBatch = 1000;
}  // namespace

absl::StatusOr<std::unique_ptr<TestSetEvaluator>> TestSetEvaluator::Create(
    const ModelDef& model_def, Dataset test_set) {
  std::unique_ptr<TestSetEvaluator> e(new TestSetEvaluator());
  e->backend_ = MakeCpuBackend(1);
  ASSIGN_OR_RETURN(SequentialModel model,
                   SequentialModel::Create(model_def, e->backend_.get()));
  e->model_ = std::make_unique<SequentialModel>(std::move(model));
  ASSIGN_OR_RETURN(BatchStager stager,
                   BatchStager::Create(e->backend_.get(),
                                       e->model_->input_dim(), kEvalBatch));
  e->stager_ = std::make_unique<BatchStager>(std::move(stager));
  e->test_set_ = std::move(test_set);
  return e;
}

absl::StatusOr<std::pair<double, double>> TestSetEvaluator::Evaluate(
    const float* params) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      EvalResult result,
      EvaluateDataset(*model_, params, test_set_, *stager_, kEvalBatch));
  return std::make_pair(result.accuracy, result.mean_loss);
}

}  // namespace ferry
