// The clock readings a worker's StepReport carries
// (StepReport.began_unix_seconds / exchanged_unix_seconds): checked on
// arrival, and turned into the times the coordinator's step figures and
// throughput window use (common/throughput_window.h).
#ifndef FERRY_COORDINATOR_STEP_TIMES_H_
#define FERRY_COORDINATOR_STEP_TIMES_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

// OK when the readings are ones a clock gives: finite and >= 0 (0: not
// stamped), the end not before the beginning, and the report's
// compute_seconds and comm_seconds finite and >= 0. INVALID_ARGUMENT naming
// the values otherwise.
absl::Status CheckStepTimes(const v1::StepReport& report);

struct ReportTimes {
  absl::Time began;
  absl::Time ended;
};

// The report's beginning and end. A reading that is not stamped (0) is
// `arrival` (the coordinator's clock when the report came): an older
// worker's report still counts, timed by its arrival. REQUIRES: CheckStepTimes.
ReportTimes TimesOf(const v1::StepReport& report, absl::Time arrival);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_STEP_TIMES_H_
