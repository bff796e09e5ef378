#include "tests/ring/ring_test_fixture.h"

#include <thread>

namespace ferry::testing {

std::vector<absl::Status> RunOnAllRanks(
    int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&statuses, &fn, r] { statuses[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace ferry::testing
