#include "ps/call_rounds.h"

namespace ferry {

absl::Status RetryRounds(int num_shards, const RetryPolicy& retry,
                         const std::function<std::vector<absl::Status>(
                             const std::vector<int>&, int)>& run_round) {
  std::vector<int> pending(num_shards);
  for (int s = 0; s < num_shards; ++s) pending[s] = s;
  Backoff backoff(retry);
  for (int round = 0;; ++round) {
    const std::vector<absl::Status> statuses = run_round(pending, round);
    std::vector<int> unavailable;
    absl::Status error;
    for (size_t i = 0; i < statuses.size(); ++i) {
      const absl::Status& s = statuses[i];
      if (s.ok()) continue;
      if (absl::IsUnavailable(s)) unavailable.push_back(pending[i]);
      // Prefer a cause over UNAVAILABLE and over the cancellations it caused.
      if (error.ok() ||
          ((absl::IsUnavailable(error) || absl::IsCancelled(error)) &&
           !absl::IsUnavailable(s) && !absl::IsCancelled(s))) {
        error = s;
      }
    }
    if (unavailable.empty() || !absl::IsUnavailable(error)) return error;
    if (!backoff.Wait()) return error;
    pending = std::move(unavailable);
  }
}

}  // namespace ferry
