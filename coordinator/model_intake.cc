#include "coordinator/model_intake.h"

#include <cmath>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "model/safetensors.h"
#include "proto/job_convert.h"

namespace ferry {
namespace {

// The saved model's metadata: how many of its tensors are buffers.
constexpr char kBufferTensorsKey[] = "ferry.buffer_tensors";
// The defining worker's optimizer: a serialized v1::OptimizerSpec, base64.
constexpr char kOptimizerKey[] = "ferry.optimizer";

// OK when `optimizer` can train a job of `tensors` (the last `buffers` of
// them buffers); JobOptimizer's errors otherwise.
absl::Status CheckOptimizerFor(
    const v1::OptimizerSpec& optimizer,
    const std::vector<ParameterLayout::TensorDef>& tensors, int buffers) {
  v1::JobSpec job;
  *job.mutable_optimizer() = optimizer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    v1::TensorSpec* t = job.add_tensors();
    t->set_name(tensors[i].name);
    for (int64_t d : tensors[i].shape) t->add_shape(d);
    t->set_buffer(i + buffers >= tensors.size());
  }
  ASSIGN_OR_RETURN(const OptimizerConfig config, JobOptimizer(job));
  return ValidateOptimizerConfig(config);
}

}  // namespace

ModelIntake::ModelIntake(ModelIntakeOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

absl::StatusOr<bool> ModelIntake::Load() {
  if (options_.save_path.empty()) return false;
  absl::StatusOr<std::string> bytes = options_.fs->ReadFile(options_.save_path);
  if (absl::IsNotFound(bytes.status())) return false;
  RETURN_IF_ERROR(bytes.status());
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(*bytes);
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat(options_.save_path, ": ", file.status().message()));
  }
  int buffer_tensors = 0;
  if (auto it = file->metadata.find(kBufferTensorsKey);
      it != file->metadata.end() &&
      (!absl::SimpleAtoi(it->second, &buffer_tensors) || buffer_tensors < 0 ||
       buffer_tensors > static_cast<int>(file->tensors.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(options_.save_path, ": bad ",
                                                   kBufferTensorsKey, " '",
                                                   it->second, "'"));
  }
  std::optional<v1::OptimizerSpec> optimizer;
  if (auto it = file->metadata.find(kOptimizerKey);
      it != file->metadata.end()) {
    std::string bytes;
    if (!absl::Base64Unescape(it->second, &bytes) ||
        !optimizer.emplace().ParseFromString(bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.save_path, ": bad ", kOptimizerKey, " (not an optimizer)"));
    }
  }
  std::vector<ParameterLayout::TensorDef> defs;
  std::vector<float> values;
  for (SafetensorsTensor& t : file->tensors) {
    defs.push_back({t.name, t.shape});
    values.insert(values.end(), t.values.begin(), t.values.end());
  }
  absl::StatusOr<ParameterLayout> layout = ParameterLayout::Create(defs);
  if (!layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.save_path, ": ", layout.status().message()));
  }
  absl::MutexLock lock(&mu_);
  layout_ = std::move(*layout);
  values_ = std::move(values);
  buffer_tensors_ = buffer_tensors;
  optimizer_ = std::move(optimizer);
  defined_ = true;
  return true;
}

void ModelIntake::DropClaimLocked() {
  claim_.clear();
  buffer_tensors_ = 0;
  optimizer_.reset();
  init_values_.clear();
  layout_.reset();
  values_.clear();
  values_.shrink_to_fit();
}

absl::StatusOr<int> ModelIntake::TrailingBuffers(const Offer& offer) {
  if (offer.buffers.empty()) return 0;
  if (offer.buffers.size() != offer.tensors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(offer.buffers.size(), " buffer flags for ",
                     offer.tensors.size(), " tensors"));
  }
  int buffers = 0;
  for (size_t i = 0; i < offer.tensors.size(); ++i) {
    if (offer.buffers[i]) {
      ++buffers;
    } else if (buffers > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", offer.tensors[i].name,
          " follows a buffer: buffers must come after every parameter"));
    }
  }
  return buffers;
}

bool ModelIntake::SameTensorsLocked(const Offer& offer) const {
  const std::vector<TensorSlot>& slots = layout_->tensors();
  absl::StatusOr<int> buffers = TrailingBuffers(offer);
  if (offer.tensors.size() != slots.size() || !buffers.ok() ||
      *buffers != buffer_tensors_) {
    return false;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (offer.tensors[i].name != slots[i].name ||
        offer.tensors[i].shape != slots[i].shape) {
      return false;
    }
  }
  return true;
}

absl::Status ModelIntake::RefuseLocked(std::string message) {
  DropClaimLocked();
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status ModelIntake::CheckFiniteLocked(
    int64_t offset, absl::Span<const float> values) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    const int64_t flat = offset + static_cast<int64_t>(i);
    for (const TensorSlot& slot : layout_->tensors()) {
      if (flat < slot.offset + slot.numel) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor ", slot.name, " element ", flat - slot.offset, " is ",
            values[i], ": a model's values must be finite"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ModelIntake::SaveLocked() const {
  if (options_.save_path.empty()) return absl::OkStatus();
  std::map<std::string, std::string> metadata = {
      {"ferry", "the model of a job's first worker"},
      {kBufferTensorsKey, absl::StrCat(buffer_tensors_)}};
  if (optimizer_.has_value()) {
    metadata[kOptimizerKey] =
        absl::Base64Escape(optimizer_->SerializeAsString());
  }
  ASSIGN_OR_RETURN(const std::string bytes,
                   EncodeLayoutValues(*layout_, values_, metadata));
  return options_.fs->WriteFileAtomically(options_.save_path, bytes);
}

absl::StatusOr<ModelIntake::Progress> ModelIntake::Take(const Offer& offer) {
  if (offer.definition_id.empty()) {
    return absl::InvalidArgumentError("a model definition needs an id");
  }
  absl::MutexLock lock(&mu_);
  const int64_t n = static_cast<int64_t>(offer.values.size());
  if (defined_) {
    if (offer.definition_id == claim_) {
      return Progress{static_cast<int64_t>(values_.size()), true};
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "the job's model is already defined (", layout_->tensors().size(),
        " tensors, ", layout_->total_elements(),
        " elements): compare yours with the job's (GetJob)"));
  }
  const absl::Time now = clock_->Now();
  if (!claim_.empty() && claim_ != offer.definition_id) {
    if (now - claim_seen_ < options_.claim_timeout) {
      return absl::AbortedError(
          "another worker is defining the job's model: wait until it is "
          "defined (GetJob), then compare");
    }
    DropClaimLocked();  // its worker went silent
  }
  if (n > kMaxModelValuesPerCall) {
    return absl::ResourceExhaustedError(absl::StrCat(
        n, " values in one call; at most ", kMaxModelValuesPerCall));
  }
  if (claim_.empty()) {
    if (offer.tensors.empty()) {
      // A definition this intake never saw begin, or whose claim expired
      // (the coordinator restarted, the worker stalled): it starts again.
      return absl::AbortedError(
          "no model definition by this id is in progress (the coordinator "
          "restarted or its claim expired): start the definition again");
    }
    absl::StatusOr<ParameterLayout> layout =
        ParameterLayout::Create(offer.tensors);
    if (!layout.ok()) {
      if (!absl::IsInvalidArgument(layout.status())) return layout.status();
      return RefuseLocked(std::string(layout.status().message()));
    }
    for (const TensorSlot& slot : layout->tensors()) {
      if (slot.numel == 0) {
        return RefuseLocked(
            absl::StrCat("tensor ", slot.name, " has no elements"));
      }
    }
    absl::StatusOr<int> buffers = TrailingBuffers(offer);
    if (!buffers.ok())
      return RefuseLocked(std::string(buffers.status().message()));
    if (*buffers > 0 && !options_.buffers_allowed) {
      return RefuseLocked(absl::StrCat(
          "the model has buffers (",
          offer.tensors[offer.tensors.size() - *buffers].name,
          ", ...): BatchNorm statistics stay consistent only with sync steps "
          "(--mode ring, or --mode ps --consistency sync)"));
    }
    if (offer.optimizer.has_value()) {
      absl::Status usable =
          CheckOptimizerFor(*offer.optimizer, offer.tensors, *buffers);
      if (!usable.ok()) return RefuseLocked(std::string(usable.message()));
    }
    if (options_.init_from.has_value()) {
      absl::StatusOr<std::vector<float>> init = InitValuesFor(*layout);
      if (!init.ok()) return RefuseLocked(std::string(init.status().message()));
      init_values_ = *std::move(init);
    }
    buffer_tensors_ = *buffers;
    optimizer_ = offer.optimizer;
    claim_ = offer.definition_id;
    layout_ = std::move(*layout);
  } else if (!offer.tensors.empty()) {
    // The first call again (its answer was lost): the same tensors are
    // taken once; others end the definition.
    if (!SameTensorsLocked(offer)) {
      return RefuseLocked(
          "only the first call of a model definition names tensors");
    }
  }
  claim_seen_ = now;
  const int64_t received = static_cast<int64_t>(values_.size());
  if (n > 0 && offer.offset < received && offer.offset + n <= received) {
    return Progress{received, false};  // a repeated call
  }
  if (n > 0 && offer.offset != received) {
    return RefuseLocked(
        absl::StrCat("model values must arrive in order: expected "
                     "offset ",
                     received, ", got ", offer.offset));
  }
  if (received + n > layout_->total_elements()) {
    return RefuseLocked(absl::StrCat("model values run past the model's ",
                                     layout_->total_elements(), " elements"));
  }
  if (absl::Status finite = CheckFiniteLocked(received, offer.values);
      !finite.ok()) {
    return RefuseLocked(std::string(finite.message()));
  }
  if (n > 0 && values_.empty()) values_.reserve(layout_->total_elements());
  values_.insert(values_.end(), offer.values.begin(), offer.values.end());
  const int64_t total = static_cast<int64_t>(values_.size());
  if (!offer.done) return Progress{total, false};
  if (total != layout_->total_elements()) {
    return RefuseLocked(absl::StrCat("the model definition ended after ", total,
                                     " of its ", layout_->total_elements(),
                                     " values"));
  }
  // --init-from: the job starts from the file's values, not the worker's.
  if (!init_values_.empty()) values_.swap(init_values_);
  if (absl::Status saved = SaveLocked(); !saved.ok()) {
    if (!init_values_.empty()) values_.swap(init_values_);
    values_.resize(received);  // the call may be retried
    return saved;
  }
  defined_ = true;
  return Progress{total, true};
}

int ModelIntake::buffer_tensors() const {
  absl::MutexLock lock(&mu_);
  return defined_ ? buffer_tensors_ : 0;
}

absl::StatusOr<std::vector<float>> ModelIntake::InitValuesFor(
    const ParameterLayout& layout) const {
  std::map<std::string, const SafetensorsTensor*> by_name;
  for (const SafetensorsTensor& t : options_.init_from->tensors) {
    by_name[t.name] = &t;
  }
  std::vector<float> values;
  RETURN_IF_ERROR(
      TakeLayoutTensors(options_.init_from_path, layout, by_name, values));
  if (!by_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.init_from_path, ": tensor ", by_name.begin()->first,
        " is not one of the model's (--init-from takes the model's tensors "
        "exactly)"));
  }
  return values;
}

std::optional<v1::OptimizerSpec> ModelIntake::optimizer() const {
  absl::MutexLock lock(&mu_);
  if (!defined_) return std::nullopt;
  return optimizer_;
}

bool ModelIntake::defined() const {
  absl::MutexLock lock(&mu_);
  return defined_;
}

bool ModelIntake::WaitDefined(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&defined_), timeout);
  return defined_;
}

std::optional<std::vector<ParameterLayout::TensorDef>> ModelIntake::tensors()
    const {
  absl::MutexLock lock(&mu_);
  if (!defined_) return std::nullopt;
  std::vector<ParameterLayout::TensorDef> defs;
  for (const TensorSlot& slot : layout_->tensors()) {
    defs.push_back({slot.name, slot.shape});
  }
  return defs;
}

absl::StatusOr<std::vector<float>> ModelIntake::Values(int64_t begin,
                                                       int64_t end) const {
  absl::MutexLock lock(&mu_);
  if (!defined_) {
    return absl::FailedPreconditionError(
        "the job's model is not defined yet: its first worker defines it");
  }
  const int64_t total = static_cast<int64_t>(values_.size());
  if (begin < 0 || begin > end || end > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("model values [", begin, ", ", end,
                     ") are outside the model's ", total, " elements"));
  }
  if (end - begin > kMaxModelValuesPerCall) {
    return absl::ResourceExhaustedError(absl::StrCat(
        end - begin, " values in one call; at most ", kMaxModelValuesPerCall));
  }
  return std::vector<float>(values_.begin() + begin, values_.begin() + end);
}

}  // namespace ferry
