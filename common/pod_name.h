// A process's pod name and the StatefulSet ordinal in it: a pod of
// StatefulSet ferry-ps is named ferry-ps-0, ferry-ps-1, ..., and its
// hostname is that name, so a pod can find its own index in it.
#ifndef FERRY_COMMON_POD_NAME_H_
#define FERRY_COMMON_POD_NAME_H_

#include <string>

#include "absl/status/statusor.h"

namespace ferry {

// $HOSTNAME (set to the pod's name in a pod), else gethostname().
std::string PodName();

// The ordinal N at the end of `hostname` ("ferry-ps-2" -> 2; up to 6
// digits after a '-' that follows at least one character). INVALID_ARGUMENT
// naming the hostname otherwise.
absl::StatusOr<int> StatefulSetOrdinal(const std::string& hostname);

}  // namespace ferry

#endif  // FERRY_COMMON_POD_NAME_H_
