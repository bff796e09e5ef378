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
#include "coordinator/ctr_test_evaluator.h"
#include "coordinator/test_set_evaluator.h"
#include "ferry/v1/common.pb.h"

namespace ferry {

// Exactly one is set.
struct JobEvaluators {
  std::unique_ptr<TestSetEvaluator> dense;
  std::unique_ptr<CtrTestEvaluator> ctr;
  // The flat dense parameters the set one scores.
  int64_t num_parameters() const {
    return ctr != nullptr ? ctr->num_parameters() : dense->num_parameters();
  }
};

// `export_dir` (non-empty): every model the dense evaluator scores is
// written there (a DLRM's is written by GrpcShardControl or RingControl,
// which hold its tables). INVALID_ARGUMENT for a test set of the other
// kind, or a job whose model does not parse.
absl::StatusOr<JobEvaluators> MakeJobEvaluators(const v1::JobSpec& job,
                                                JobTestSet test_set,
                                                const std::string& export_dir);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_JOB_EVALUATORS_H_
