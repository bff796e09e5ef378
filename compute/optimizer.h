// An optimizer over one flat range of parameters (a PS shard's slice, or a
// ring worker's whole model): holds its state buffers on the backend and
// applies one update per call with the configured learning-rate schedule,
// through the registered update of its kind (compute/dense_optimizers.h).
//
// Thread safety: not thread-safe; the owner serializes calls.
#ifndef FERRY_COMPUTE_OPTIMIZER_H_
#define FERRY_COMPUTE_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/optimizer_config.h"
#include "common/sharding.h"
#include "compute/compute_backend.h"
#include "compute/dense_optimizers.h"

namespace ferry {

class Optimizer {
 public:
  static constexpr size_t kAllTrainable = SIZE_MAX;

  // `backend` must outlive the optimizer. `size` is the number of values
  // this instance updates; the first `trainable` of them (all by default)
  // are parameters, the rest non-trainable state (BatchNorm running
  // statistics at the end of a job's flat buffer, model/model_params.h
  // ModelJobLayout), whose "gradient" is the step's mean change of the state.
  // `offset` is where the values start in the job's flat buffer (a PS
  // shard's slice begin; 0 for a whole model): the config's parameter
  // groups (element ranges of that buffer) are placed by it.
  // INVALID_ARGUMENT for an invalid config or trainable > size.
  static absl::StatusOr<Optimizer> Create(const OptimizerConfig& config,
                                          ComputeBackend* backend, size_t size,
                                          size_t trainable = kAllTrainable,
                                          int64_t offset = 0);

  // Applies one update: param[i] -= f(grad[i], state) for i < trainable(),
  // param[i] += grad[i] (no learning rate, no weight decay) for the state
  // after it. Both buffers hold `size()` elements in the backend's memory
  // space. Every learning rate (the schedule's and each group's) is
  // multiplied by `lr_scale` for this update: an async shard applies a push
  // of b samples with b / global_batch (the linear scaling rule).
  // Increments steps_applied().
  //
  // `skip` (a range set, common/range_sets.h, inside [0, trainable())) are
  // parameters the step's gradient leaves out (no sample used them): they
  // and their optimizer state stay as they are, as torch's optimizers skip
  // a parameter whose .grad is None. (Adam's bias correction counts the
  // optimizer's steps, not each element's.) INVALID_ARGUMENT for a `skip`
  // that is not such a set (nothing applied).
  absl::Status Apply(const float* grad, float* param, double lr_scale = 1.0,
                     absl::Span<const FlatRange> skip = {});

  // One update of the elements in `ranges` only (offsets into the same
  // size() buffers; each range within [0, size()), ranges disjoint), with
  // the learning rate and step of this step; the other elements and their
  // state are left as they are. Increments steps_applied() once. A ring
  // pipeline stage applies its layers' update this way. INVALID_ARGUMENT
  // for a range outside the buffers (nothing applied).
  struct Range {
    size_t begin = 0;
    size_t end = 0;
  };
  absl::Status ApplyRanges(const float* grad, float* param,
                           const std::vector<Range>& ranges);

  size_t size() const { return size_; }
  size_t trainable() const { return trainable_; }
  int64_t steps_applied() const { return steps_applied_; }
  // Learning rate the next Apply() will use for the elements of no group.
  double NextLearningRate() const;
  const OptimizerConfig& config() const { return config_; }

  // State buffers (0 for SGD, 1 for momentum, 2 for Adam/AdamW), for
  // checkpoints and for handing state to a joining ring member.
  std::vector<DeviceBuffer*> StateBuffers();
  // Restores the step count (with the state buffers, for checkpoints).
  void set_steps_applied(int64_t steps) { steps_applied_ = steps; }

 private:
  // The update of [begin, end) with step parameters `p` (those of the
  // elements of no group; each group's span with the group's rate and
  // weight decay).
  absl::Status UpdateRange(const OptimizerStepParams& p, size_t begin,
                           size_t end, const float* grad, float* param,
                           double lr_scale);
  // The update of trainable elements [begin, end), all with `p`.
  absl::Status UpdateTrainable(const OptimizerStepParams& p, size_t begin,
                               size_t end, const float* grad, float* param);
  OptimizerStepParams StepParams(double lr_scale) const;

  Optimizer(const OptimizerConfig& config, const DenseOptimizer* dense,
            ComputeBackend* backend, size_t size, size_t trainable)
      : config_(config),
        dense_(dense),
        backend_(backend),
        size_(size),
        trainable_(trainable) {}

  OptimizerConfig config_;
  const DenseOptimizer* dense_;  // the registry's entry for config_.kind
  ComputeBackend* backend_;
  size_t size_;
  size_t trainable_;
  std::vector<GroupSpan> spans_;  // the groups' elements, sorted
  int64_t steps_applied_ = 0;
  std::vector<DeviceBuffer> state_;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_OPTIMIZER_H_
