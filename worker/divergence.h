// Divergence: a step whose loss or gradients are not finite (a learning
// rate too high, an overflow). Nothing of such a step may be applied, and
// training on cannot recover, so the worker reports it (StepReport.
// diverged) and stops; the coordinator then stops the job with the reason
// (its status error), instead of workers failing one by one on refused
// pushes while the job waits for them.
#ifndef FERRY_WORKER_DIVERGENCE_H_
#define FERRY_WORKER_DIVERGENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ferry {

// The step's status when it diverged: FAILED_PRECONDITION "training
// diverged at step <step>: <why>", marked so that IsDivergence knows it.
absl::Status DivergedError(int64_t step, const std::string& why);

// Whether `status` says a step diverged: DivergedError's, or a shard's
// refusal of a pushed gradient that is not finite (INVALID_ARGUMENT
// "... is not finite", ps/ps_shard_chunks.cc).
bool IsDivergence(const absl::Status& status);

// Why the step diverged, without the "training diverged at step N: "
// prefix (DivergedError's `why`, or the shard's refusal).
std::string DivergenceReason(const absl::Status& status);

}  // namespace ferry

#endif  // FERRY_WORKER_DIVERGENCE_H_
