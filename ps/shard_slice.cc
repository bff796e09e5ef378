#include "ps/shard_slice.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// Whether `owner` is the only reference to its snapshot. Readers get
// references only under the shard's mutex, so then none can until it is
// released. Copying the reference is an acquire read-modify-write of the
// count, which the readers' release of theirs (after their last read)
// happens before; a relaxed use_count() read alone orders nothing.
bool SoleOwner(const std::shared_ptr<PsSnapshot>& owner) {
  if (owner == nullptr || owner.use_count() != 1) return false;
  const std::shared_ptr<PsSnapshot> ordered = owner;
  return true;
}

// Index of the first non-finite value, or -1.
int64_t FirstNonFinite(const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

ShardSlice::ShardSlice(int32_t shard_id,
                       std::unique_ptr<ComputeBackend> backend,
                       Optimizer optimizer, std::vector<float> params)
    : shard_id_(shard_id),
      backend_(std::move(backend)),
      optimizer_(std::move(optimizer)),
      current_(std::make_shared<PsSnapshot>(
          PsSnapshot{.version = 0, .values = std::move(params)})) {}

absl::Status ShardSlice::Apply(const float* grad, double lr_scale,
                               absl::Span<const FlatRange> skip) {
  std::vector<float>& params = WritableParams(/*keep_values=*/true);
  absl::Status status = optimizer_.Apply(grad, params.data(), lr_scale, skip);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrFormat("optimizer update of shard %d failed: %s", shard_id_,
                        status.ToString()));
  }
  current_->version = ++version_;
  return absl::OkStatus();
}

std::vector<float>& ShardSlice::WritableParams(bool keep_values) {
  if (SoleOwner(current_)) return current_->values;
  std::shared_ptr<PsSnapshot> next;
  if (SoleOwner(spare_)) {
    next = std::move(spare_);
  } else {
    next = std::make_shared<PsSnapshot>();
  }
  if (keep_values) {
    next->values.assign(current_->values.begin(), current_->values.end());
  } else {
    next->values.resize(current_->values.size());
  }
  next->version = current_->version;
  // The readers' version: its memory serves the next copy once they are
  // done with it.
  spare_ = std::exchange(current_, std::move(next));
  return current_->values;
}

absl::Status ShardSlice::FillView(PsShardStateView& view) {
  view.version = version_;
  view.optimizer_steps = optimizer_.steps_applied();
  view.params = current_->values;
  const bool in_place = backend_->IsHostMemory();
  for (DeviceBuffer* buffer : optimizer_.StateBuffers()) {
    if (in_place) {
      view.optimizer_state.emplace_back(buffer->data(), buffer->size());
      continue;
    }
    std::vector<float>& host = view.host_copies.emplace_back(buffer->size());
    const absl::Status status =
        backend_->CopyToHost(buffer->data(), buffer->size(), host.data());
    if (!status.ok()) {
      return absl::InternalError(
          absl::StrFormat("shard %d: cannot copy the optimizer state: %s",
                          shard_id_, status.ToString()));
    }
    view.optimizer_state.emplace_back(host);
  }
  return absl::OkStatus();
}

absl::Status ShardSlice::CheckVersion(int64_t expected_version) const {
  if (expected_version >= 0 && expected_version != version_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shard %d is at version %d, not %d", shard_id_,
                        version_, expected_version));
  }
  return absl::OkStatus();
}

absl::Status ShardSlice::CheckState(const PsShardState& state) {
  if (state.version < 0 || state.optimizer_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state of version %d with %d optimizer steps: must not be negative",
        state.version, state.optimizer_steps));
  }
  const size_t n = current_->values.size();
  if (state.params.size() != n) {
    return absl::FailedPreconditionError(
        absl::StrFormat("state holds %d parameters, shard %d owns %d",
                        state.params.size(), shard_id_, n));
  }
  const size_t buffers = optimizer_.StateBuffers().size();
  if (state.optimizer_state.size() != buffers) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "state holds %d optimizer buffers, shard %d's optimizer keeps %d",
        state.optimizer_state.size(), shard_id_, buffers));
  }
  for (size_t b = 0; b < buffers; ++b) {
    if (state.optimizer_state[b].size() != n) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "optimizer buffer %d holds %d elements, shard %d owns %d", b,
          state.optimizer_state[b].size(), shard_id_, n));
    }
  }
  if (const int64_t i = FirstNonFinite(state.params); i >= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("state: parameter %d is not finite", i));
  }
  for (size_t b = 0; b < buffers; ++b) {
    if (const int64_t i = FirstNonFinite(state.optimizer_state[b]); i >= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "state: optimizer buffer %d element %d is not finite", b, i));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardSlice::Restore(const PsShardState& state) {
  std::vector<DeviceBuffer*> buffers = optimizer_.StateBuffers();
  for (size_t b = 0; b < buffers.size(); ++b) {
    const absl::Status status =
        backend_->CopyToDevice(state.optimizer_state[b].data(),
                               buffers[b]->size(), buffers[b]->data());
    if (!status.ok()) {
      return absl::InternalError(
          absl::StrFormat("shard %d: cannot restore the optimizer state: %s",
                          shard_id_, status.ToString()));
    }
  }
  optimizer_.set_steps_applied(state.optimizer_steps);
  std::vector<float>& params = WritableParams(/*keep_values=*/false);
  params.assign(state.params.begin(), state.params.end());
  version_ = state.version;
  current_->version = version_;
  return absl::OkStatus();
}

}  // namespace ferry
