#include "worker/local_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<LocalExchange>> LocalExchange::Create(
    LocalExchangeOptions options) {
  const ExchangeBuffers& b = options.buffers;
  if (options.backend == nullptr || b.params == nullptr || b.grads == nullptr ||
      b.host_grads == nullptr || !b.segments.empty()) {
    return absl::InvalidArgumentError(
        "local exchange: missing backend or buffers, or buffers with "
        "segments");
  }
  if (options.state_elements < 0 || options.state_elements > b.num_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("local exchange: ", options.state_elements,
                     " state elements in a buffer of ", b.num_elements));
  }
  ASSIGN_OR_RETURN(
      Optimizer optimizer,
      Optimizer::Create(
          options.optimizer, options.backend,
          static_cast<size_t>(b.num_elements),
          static_cast<size_t>(b.num_elements - options.state_elements)));
  return std::unique_ptr<LocalExchange>(
      new LocalExchange(std::move(options), std::move(optimizer)));
}

LocalExchange::LocalExchange(LocalExchangeOptions options, Optimizer optimizer)
    : options_(std::move(options)), optimizer_(std::move(optimizer)) {
  if (options_.tables != nullptr) rows_.emplace(options_.tables);
}

absl::Status LocalExchange::BeginStep(const ExchangeStep& step) {
  if (open_) return absl::FailedPreconditionError("a step is already open");
  if (step.num_samples <= 0 || step.lease == nullptr) {
    return absl::InvalidArgumentError("a local step needs samples");
  }
  if (step.buffers != nullptr) {
    return absl::InvalidArgumentError(
        "the local exchange trains on the buffers it was made with");
  }
  open_ = true;
  step_ = step.lease->step();
  samples_ = step.num_samples;
  declared_ = 0;
  step_rows_.reset();
  return absl::OkStatus();
}

absl::Status LocalExchange::Ready(int64_t offset, int64_t length) {
  if (!open_) return absl::FailedPreconditionError("no open step");
  if (offset < 0 || length < 0 ||
      offset + length > options_.buffers.num_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "range [", offset, ", ", offset + length, ") outside the buffer of ",
        options_.buffers.num_elements));
  }
  declared_ += length;
  return absl::OkStatus();
}

absl::Status LocalExchange::ReadyRows(const std::vector<SparseRows>& rows) {
  if (!open_ || step_rows_.has_value()) {
    return absl::FailedPreconditionError(
        "rows declared without an open step or twice");
  }
  if (options_.tables == nullptr) {
    return absl::UnimplementedError("this job holds no embedding tables");
  }
  step_rows_ = rows;
  return absl::OkStatus();
}

absl::Status LocalExchange::FinishStep() {
  if (!open_) return absl::FailedPreconditionError("no open step");
  open_ = false;
  const ExchangeBuffers& b = options_.buffers;
  if (declared_ != b.num_elements) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step_, ": ", declared_, " of ", b.num_elements,
                     " gradient elements declared"));
  }
  ComputeBackend* backend = options_.backend;
  if (!backend->IsHostMemory()) {
    RETURN_IF_ERROR(
        backend->CopyToDevice(b.host_grads, b.num_elements, b.grads));
  }
  RETURN_IF_ERROR(backend->Scale(b.num_elements,
                                 1.0f / static_cast<float>(samples_), b.grads));
  RETURN_IF_ERROR(optimizer_.Apply(b.grads, b.params));
  if (options_.tables != nullptr && step_rows_.has_value()) {
    const std::vector<SparseRows>* contribution[] = {&*step_rows_};
    RETURN_IF_ERROR(options_.tables->ApplyStep(contribution, samples_, step_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> LocalExchange::FinalWeights() {
  const ExchangeBuffers& b = options_.buffers;
  std::vector<float> weights(b.num_elements);
  RETURN_IF_ERROR(
      options_.backend->CopyToHost(b.params, b.num_elements, weights.data()));
  return weights;
}

}  // namespace ferry
