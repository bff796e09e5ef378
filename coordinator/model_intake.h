// The model of a job whose model comes from its first worker
// (JobSpec.model_from_worker, `--model external`; docs/pytorch.md): which
// worker's definition is being received, the values received so far, and,
// once complete, the job's tensors and starting values, which the shards
// and ring members start from (Coordinator.ModelValues).
//
// A definition is a sequence of Offer calls with one definition id (the
// defining process's token): the tensors first, then the values in flat
// order, then `done`. One definition at a time holds the claim; a claim
// whose calls stop for `claim_timeout` (its worker died) is given to the
// next definition. A defined model never changes. Thread-safe.
#ifndef FERRY_COORDINATOR_MODEL_INTAKE_H_
#define FERRY_COORDINATOR_MODEL_INTAKE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "ferry/v1/common.pb.h"
#include "model/parameter_layout.h"
#include "model/safetensors.h"

namespace ferry {

// Most values one DefineModel or ModelValues call carries (1 MiB of fp32).
inline constexpr int64_t kMaxModelValuesPerCall = int64_t{1} << 18;

struct ModelIntakeOptions {
  // A definition whose calls stop for this long loses its claim.
  absl::Duration claim_timeout = absl::Seconds(30);
  // Whether the job can keep buffers consistent (sync steps: ring or sync
  // PS); a model with buffers is refused otherwise.
  bool buffers_allowed = true;
  // Non-empty: the defined model is written here (safetensors, the tensors'
  // names and values) before it counts as defined, and Load reads it back
  // after a restart. Through `fs` (required then).
  std::string save_path;
  FileSystem* fs = nullptr;
  // Set (`--init-from DIR`): the job's starting values, by tensor name,
  // replacing the defining worker's. A definition must name exactly its
  // tensors, with their shapes. `init_from_path` names the file in errors.
  std::optional<SafetensorsFile> init_from;
  std::string init_from_path;
};

class ModelIntake {
 public:
  struct Offer {
    std::string definition_id;
    // The first call of a definition names the whole flat buffer; empty in
    // the others. `buffers` (empty: none) says which tensors are buffers
    // (BatchNorm statistics), which must follow every parameter.
    std::vector<ParameterLayout::TensorDef> tensors;
    std::vector<bool> buffers;
    // First call only, optional: the job's optimizer as the worker's torch
    // optimizer computes it (parameter groups by tensor name, lr tables).
    std::optional<v1::OptimizerSpec> optimizer;
    int64_t offset = 0;
    absl::Span<const float> values;
    bool done = false;
  };
  struct Progress {
    int64_t received = 0;
    bool defined = false;
  };

  // `clock` is not owned and must outlive this.
  ModelIntake(ModelIntakeOptions options, Clock* clock);

  // Reads a model saved by an earlier coordinator of the job (save_path):
  // true when there was one (the model is then defined), false when there
  // is none. The reader's errors for a file that does not decode.
  absl::StatusOr<bool> Load();

  // One call of a definition; a repeated call (its answer lost) is taken
  // once. Errors (nothing changes but the claim, which an INVALID_ARGUMENT
  // call gives up so that another worker can define): ALREADY_EXISTS once
  // another definition defined the model (the same definition's repeated
  // last call gets its Progress again); ABORTED while another definition
  // holds an unexpired claim, or for a later call of a definition that
  // holds none (a restarted coordinator, an expired claim: the worker
  // starts again); INVALID_ARGUMENT for a definition without an id, other
  // tensors on a later call, a tensor of no elements, a bad tensor list
  // (ParameterLayout::Create's errors), a buffer before a parameter or in a
  // job without sync steps, an optimizer the job cannot run (a group naming
  // a tensor the model lacks, JobOptimizer's errors), tensors that are not
  // init_from's (named: missing, misshapen, not finite, or left over),
  // values that do not
  // continue the
  // received ones or run past the end, a value that is not finite (named
  // by tensor and element), `done` before every value arrived;
  // RESOURCE_EXHAUSTED over kMaxModelValuesPerCall values; the save's
  // errors (the model is then not defined; the definition may retry).
  absl::StatusOr<Progress> Take(const Offer& offer);

  bool defined() const;
  // Waits up to `timeout` for the model to be defined; whether it is.
  bool WaitDefined(absl::Duration timeout) const;
  // The defined model's tensors; nullopt before.
  std::optional<std::vector<ParameterLayout::TensorDef>> tensors() const;
  // How many of them, at the end, are buffers (0 before).
  int buffer_tensors() const;
  // The defining worker's optimizer; nullopt before the model is defined or
  // when that worker gave none (the job's own optimizer stands).
  std::optional<v1::OptimizerSpec> optimizer() const;
  // Elements [begin, end) of the defined starting values.
  // FAILED_PRECONDITION before the model is defined; INVALID_ARGUMENT for a
  // range outside it; RESOURCE_EXHAUSTED over kMaxModelValuesPerCall.
  absl::StatusOr<std::vector<float>> Values(int64_t begin, int64_t end) const;

 private:
  // How many tensors, at the end, `offer.buffers` marks; INVALID_ARGUMENT
  // for flags that do not match the tensors or a parameter after a buffer.
  static absl::StatusOr<int> TrailingBuffers(const Offer& offer);
  // Whether `offer` names the claim's tensors (and buffers) again.
  bool SameTensorsLocked(const Offer& offer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropClaimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // INVALID_ARGUMENT with `message`, the claim given up.
  absl::Status RefuseLocked(std::string message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckFiniteLocked(int64_t offset,
                                 absl::Span<const float> values) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // options_.init_from's values for `layout`, in its order; INVALID_ARGUMENT
  // naming the first tensor that differs.
  absl::StatusOr<std::vector<float>> InitValuesFor(
      const ParameterLayout& layout) const;

  const ModelIntakeOptions options_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  // The claim: the definition being received (empty: none) and its last call.
  std::string claim_ ABSL_GUARDED_BY(mu_);
  absl::Time claim_seen_ ABSL_GUARDED_BY(mu_);
  // The claim's (then the defined model's) tensors and values received.
  std::optional<ParameterLayout> layout_ ABSL_GUARDED_BY(mu_);
  std::vector<float> values_ ABSL_GUARDED_BY(mu_);
  int buffer_tensors_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::OptimizerSpec> optimizer_ ABSL_GUARDED_BY(mu_);
  // The claim's starting values from options_.init_from (empty: none).
  std::vector<float> init_values_ ABSL_GUARDED_BY(mu_);
  bool defined_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_MODEL_INTAKE_H_
