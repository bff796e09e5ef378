// The coordinator's evaluators of a job's test set, as GrpcShardControl
// (PS, hybrid) and RingControl (ring) build them: a CtrTestEvaluator for a
// DLRM (its criteo: test split), a TestSetEvaluator otherwise.
//
// Thread safety: a pure function; the evaluators say theirs.
#ifndef FERRY_COORDINATOR_JOB_EVALUATORS_H_
#define FERRY_COORDINATOR_JOB_EVALUATORS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/ctr_test_evaluator.h"
#include "coordinator/test_set_evaluator.h"
#include "ferry/v1/common.pb.h"
#include "model/parameter_layout.h"

namespace ferry {

// One is set, or none for a job whose model is its workers'
// (JobSpec.model_from_worker: ferry cannot run it; the script evaluates).
struct JobEvaluators {
  std::unique_ptr<TestSetEvaluator> dense;
  std::unique_ptr<CtrTestEvaluator> ctr;
  // The flat dense parameters the set one scores (0 when none is).
  int64_t num_parameters() const {
    if (ctr != nullptr) return ctr->num_parameters();
    return dense != nullptr ? dense->num_parameters() : 0;
  }
};

// What a control's Evaluate answers when it has no evaluator: UNIMPLEMENTED
// (the coordinator records no result and logs nothing).
absl::Status NoEvaluatorStatus();

// Writes `values` (a job whose model is its workers': its flat buffer,
// laid out by `layout`) to DIR/model.safetensors by tensor name
// (ExportLayoutValues); errors prefixed with "--export DIR".
absl::Status ExportWorkerModel(const std::string& dir,
                               const ParameterLayout& layout,
                               absl::Span<const float> values);

// `export_dir` (non-empty): every model the dense evaluator scores is
// written there (a DLRM's is written by GrpcShardControl or RingControl,
// which hold its tables). INVALID_ARGUMENT for a test set of the other
// kind, or a job whose model does not parse.
absl::StatusOr<JobEvaluators> MakeJobEvaluators(const v1::JobSpec& job,
                                                JobTestSet test_set,
                                                const std::string& export_dir);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_JOB_EVALUATORS_H_
