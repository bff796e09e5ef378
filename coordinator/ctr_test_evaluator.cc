#include "coordinator/ctr_test_evaluator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "data/ctr_metrics.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<CtrTestEvaluator>> CtrTestEvaluator::Create(
    const DlrmSpec& spec, CtrDataset test_set, int batch) {
  RETURN_IF_ERROR(ValidateDlrmSpec(spec));
  if (spec.dense_features != kCriteoDense ||
      spec.num_fields != kCriteoCategorical) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the DLRM has %d dense features and %d categorical fields; Criteo "
        "data has %d and %d",
        spec.dense_features, spec.num_fields, kCriteoDense,
        kCriteoCategorical));
  }
  if (batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("evaluation batch %d must be > 0", batch));
  }
  std::unique_ptr<CtrTestEvaluator> e(new CtrTestEvaluator());
  const int64_t n = test_set.num_samples();
  e->labels_.resize(static_cast<size_t>(n));
  int64_t clicks = 0;
  for (int64_t i = 0; i < n; ++i) {
    e->labels_[static_cast<size_t>(i)] = test_set.label(i);
    clicks += test_set.label(i);
  }
  if (clicks == 0 || clicks == n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the test split %s has %d samples, %s: its AUC is undefined",
        test_set.path().empty() ? "(in memory)" : test_set.path(), n,
        clicks == 0 ? "no click" : "only clicks"));
  }
  e->batch_ = batch;
  e->test_set_ = std::move(test_set);
  e->backend_ = MakeCpuBackend(1);
  absl::MutexLock lock(&e->mu_);
  ASSIGN_OR_RETURN(CtrStep step, CtrStep::Create(spec, e->backend_.get()));
  e->num_parameters_ = step.num_params();
  e->step_.emplace(std::move(step));
  ASSIGN_OR_RETURN(e->params_, e->backend_->Allocate(
                                   static_cast<size_t>(e->num_parameters_)));
  e->probabilities_.resize(static_cast<size_t>(n));
  return e;
}

absl::StatusOr<TestScores> CtrTestEvaluator::Evaluate(
    const float* params, EmbeddingRowSource& rows) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(backend_->CopyToDevice(
      params, static_cast<size_t>(num_parameters_), params_.data()));
  const int64_t n = test_set_.num_samples();
  int64_t right = 0;
  for (int64_t begin = 0; begin < n; begin += batch_) {
    const int64_t b = std::min<int64_t>(batch_, n - begin);
    indices_.resize(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i)
      indices_[static_cast<size_t>(i)] = begin + i;
    RETURN_IF_ERROR(test_set_.GatherBatch(indices_, staged_));
    const absl::Span<float> out =
        absl::MakeSpan(probabilities_)
            .subspan(static_cast<size_t>(begin), static_cast<size_t>(b));
    RETURN_IF_ERROR(step_->Predict(staged_, params_.data(), rows, out));
    for (int64_t i = 0; i < b; ++i) {
      const float p = out[static_cast<size_t>(i)];
      if (std::isnan(p)) {
        return absl::InternalError(absl::StrFormat(
            "the click probability of test sample %d is not a number (the "
            "weights diverged)",
            begin + i));
      }
      right += (p > 0.5f) == (labels_[static_cast<size_t>(begin + i)] == 1);
    }
  }
  TestScores scores;
  scores.accuracy = static_cast<double>(right) / static_cast<double>(n);
  ASSIGN_OR_RETURN(scores.loss, LogLoss(probabilities_, labels_));
  ASSIGN_OR_RETURN(scores.auc, BinaryAuc(probabilities_, labels_));
  return scores;
}

}  // namespace ferry
