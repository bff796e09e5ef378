#include "compute/optimizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/range_sets.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<Optimizer> Optimizer::Create(const OptimizerConfig& config,
                                            ComputeBackend* backend,
                                            size_t size, size_t trainable,
                                            int64_t offset) {
  RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  if (trainable == kAllTrainable) trainable = size;
  if (trainable > size) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer over ", size,
                                                   " values with ", trainable,
                                                   " trainable ones"));
  }
  ASSIGN_OR_RETURN(const DenseOptimizer* dense,
                   FindDenseOptimizer(config.kind));
  const int state_buffers = OptimizerStateBuffers(config.kind);
  if (state_buffers > kMaxDenseOptimizerState) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer '", OptimizerKindName(config.kind), "' keeps ",
                     state_buffers, " state buffers, at most ",
                     kMaxDenseOptimizerState, " are supported"));
  }
  Optimizer optimizer(config, dense, backend, size, trainable);
  optimizer.spans_ = GroupSpansIn(config, offset, static_cast<int64_t>(size));
  for (int i = 0; i < state_buffers; ++i) {
    ASSIGN_OR_RETURN(DeviceBuffer buffer, backend->Allocate(size));
    optimizer.state_.push_back(std::move(buffer));
  }
  return optimizer;
}

double Optimizer::NextLearningRate() const {
  return LearningRateAt(config_, steps_applied_);
}

OptimizerStepParams Optimizer::StepParams(double lr_scale) const {
  OptimizerStepParams p;
  p.lr = static_cast<float>(NextLearningRate() * lr_scale);
  p.weight_decay = static_cast<float>(config_.weight_decay);
  p.momentum = static_cast<float>(config_.momentum);
  p.nesterov = config_.nesterov;
  p.beta1 = static_cast<float>(config_.beta1);
  p.beta2 = static_cast<float>(config_.beta2);
  p.epsilon = static_cast<float>(config_.epsilon);
  p.step = steps_applied_ + 1;
  return p;
}

absl::Status Optimizer::UpdateRange(const OptimizerStepParams& p, size_t begin,
                                    size_t end, const float* grad, float* param,
                                    double lr_scale) {
  // Trainable parameters first, then non-trainable state after trainable_.
  // A shard's slice may hold state only (split == begin): no update to run.
  const size_t split = std::clamp(trainable_, begin, end);
  size_t at = begin;
  for (const GroupSpan& span : spans_) {
    const size_t b = std::max(span.begin, at);
    const size_t e = std::min(span.end, split);
    if (b >= e) continue;
    RETURN_IF_ERROR(UpdateTrainable(p, at, b, grad, param));
    OptimizerStepParams group = p;
    group.lr = static_cast<float>(
        GroupLearningRateAt(config_, span.group, steps_applied_) * lr_scale);
    group.weight_decay =
        static_cast<float>(config_.groups[span.group].weight_decay);
    RETURN_IF_ERROR(UpdateTrainable(group, b, e, grad, param));
    at = e;
  }
  RETURN_IF_ERROR(UpdateTrainable(p, at, split, grad, param));
  if (end > split) {
    RETURN_IF_ERROR(
        backend_->Axpy(end - split, 1.0f, grad + split, param + split));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::UpdateTrainable(const OptimizerStepParams& p,
                                        size_t begin, size_t end,
                                        const float* grad, float* param) {
  if (end <= begin) return absl::OkStatus();
  DenseUpdateArgs args;
  args.n = end - begin;
  args.grad = grad + begin;
  for (size_t i = 0; i < state_.size(); ++i) {
    args.state[i] = state_[i].data() + begin;
  }
  args.param = param + begin;
  return RunDenseUpdate(*backend_, *dense_, p, args);
}

absl::Status Optimizer::Apply(const float* grad, float* param, double lr_scale,
                              absl::Span<const FlatRange> skip) {
  const OptimizerStepParams p = StepParams(lr_scale);
  if (skip.empty()) {
    RETURN_IF_ERROR(UpdateRange(p, 0, size_, grad, param, lr_scale));
  } else {
    RETURN_IF_ERROR(CheckRangeSet(skip, static_cast<int64_t>(trainable_),
                                  "parameters skipped by the optimizer"));
    for (const FlatRange& r :
         ComplementRangeSet(skip, 0, static_cast<int64_t>(size_))) {
      RETURN_IF_ERROR(UpdateRange(p, static_cast<size_t>(r.begin),
                                  static_cast<size_t>(r.end), grad, param,
                                  lr_scale));
    }
  }
  ++steps_applied_;
  return absl::OkStatus();
}

absl::Status Optimizer::ApplyRanges(const float* grad, float* param,
                                    const std::vector<Range>& ranges) {
  for (const Range& r : ranges) {
    if (r.begin > r.end || r.end > size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer range [", r.begin, ", ", r.end,
                       ") outside its ", size_, " values"));
    }
  }
  const OptimizerStepParams p = StepParams(1.0);
  for (const Range& r : ranges) {
    if (r.end > r.begin) {
      RETURN_IF_ERROR(UpdateRange(p, r.begin, r.end, grad, param, 1.0));
    }
  }
  ++steps_applied_;
  return absl::OkStatus();
}

std::vector<DeviceBuffer*> Optimizer::StateBuffers() {
  std::vector<DeviceBuffer*> out;
  for (DeviceBuffer& b : state_) out.push_back(&b);
  return out;
}

}  // namespace ferry
