// `ferry status`: a one-shot view of a running job from its coordinator.
#ifndef FERRY_CLIENT_STATUS_VIEW_H_
#define FERRY_CLIENT_STATUS_VIEW_H_

#include <string>

#include "ferry/v1/coordinator.pb.h"

namespace ferry {

// An evaluation's scores for a progress line: "test accuracy 0.8812", or
// for a CTR model (test_auc set) "test auc 0.7919 logloss 0.4564".
std::string EvalScoresText(const v1::EvalPoint& eval);

// Prints the job's state (or a JSON dump with `json`). Returns the exit
// code: 0, or 1 when the coordinator cannot be reached.
int ShowStatus(const std::string& coordinator, bool json);

}  // namespace ferry

#endif  // FERRY_CLIENT_STATUS_VIEW_H_
