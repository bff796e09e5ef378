// Evaluation of a model's parameters over a whole dataset.
#ifndef FERRY_DATA_EVALUATOR_H_
#define FERRY_DATA_EVALUATOR_H_

#include "absl/status/statusor.h"
#include "data/batch_stager.h"
#include "data/dataset.h"
#include "model/sequential_model.h"

namespace ferry {

struct EvalResult {
  double accuracy = 0.0;   // fraction of correct predictions
  double mean_loss = 0.0;  // mean cross-entropy
  int64_t samples = 0;
};

// Runs `model` with backend-resident `params` over every sample of `data`
// in batches of the stager's size. INVALID_ARGUMENT on an empty dataset.
absl::StatusOr<EvalResult> EvaluateDataset(SequentialModel& model,
                                           const float* params,
                                           const Dataset& data,
                                           BatchStager& stager, int batch);

}  // namespace ferry

#endif  // FERRY_DATA_EVALUATOR_H_
