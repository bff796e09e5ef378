// `ferry status`: a one-shot view of a running job from its coordinator.
#ifndef FERRY_CLIENT_STATUS_VIEW_H_
#define FERRY_CLIENT_STATUS_VIEW_H_

#include <string>

namespace ferry {

// Prints the job's state (or a JSON dump with `json`). Returns the exit
// code: 0, or 1 when the coordinator cannot be reached.
int ShowStatus(const std::string& coordinator, bool json);

}  // namespace ferry

#endif  // FERRY_CLIENT_STATUS_VIEW_H_
