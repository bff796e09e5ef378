#include "data/evaluator.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<EvalResult> EvaluateDataset(SequentialModel& model,
                                           const float* params,
                                           const Dataset& data,
                                           BatchStager& stager, int batch) {
  if (data.num_samples == 0) {
    return absl::InvalidArgumentError("cannot evaluate on an empty dataset");
  }
  std::vector<int64_t> indices(batch);
  EvalResult result;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.num_samples; begin += batch) {
    const int n =
        static_cast<int>(std::min<int64_t>(batch, data.num_samples - begin));
    std::iota(indices.begin(), indices.begin() + n, begin);
    RETURN_IF_ERROR(stager.Stage(data, absl::MakeConstSpan(indices.data(), n)));
    ASSIGN_OR_RETURN(LossStats stats, model.Evaluate(params, stager.inputs(),
                                                     stager.labels(), n));
    loss_sum += stats.loss_sum;
    correct += stats.correct;
  }
  result.samples = data.num_samples;
  result.accuracy = static_cast<double>(correct) / data.num_samples;
  result.mean_loss = loss_sum / data.num_samples;
  return result;
}

}  // namespace ferry
