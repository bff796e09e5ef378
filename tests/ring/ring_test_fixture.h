// Helpers shared by the ring tests.
#ifndef FERRY_TESTS_RING_RING_TEST_FIXTURE_H_
#define FERRY_TESTS_RING_RING_TEST_FIXTURE_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace ferry::testing {

// Runs fn(rank) on one thread per rank and returns the statuses by rank.
std::vector<absl::Status> RunOnAllRanks(
    int n, const std::function<absl::Status(int)>& fn);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_RING_RING_TEST_FIXTURE_H_
