// FakeShardControl: the one fake of the coordinator's ShardControl for
// every test folder (coordinator, server, integration, fuzz). It records
// finalized steps, checkpoints and restores and tracks the shards'
// versions; evaluation returns `scores` (accuracy 0.5, loss 1.0, no AUC
// unless a test sets one). Knobs, set under `mu`:
//  - versions: what Versions() answers (one entry per shard; empty: no
//    shards to watch). A finalize raises every entry to step + 1, a
//    restore sets them; tests set it to play a restarted shard.
//  - fail_next: the next n FinalizeStep calls are UNAVAILABLE;
//  - lose_next: the next n are FAILED_PRECONDITION (a shard lost the step);
//  - fail_every: every n-th call is UNAVAILABLE (a restarting shard);
//  - applied_other_next: the next n are ALREADY_EXISTS and raise the
//    versions to step + 1 (the shards finalized the step on push over
//    another contributor set);
//  - finalize_open: while false, FinalizeStep waits (a slow shard: the
//    coordinator's finalizer stands still there).
// Header-only: any test folder may include it. Thread-safe.
#ifndef FERRY_TESTS_TESTING_FAKE_SHARD_CONTROL_H_
#define FERRY_TESTS_TESTING_FAKE_SHARD_CONTROL_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "coordinator/shard_control.h"

namespace ferry {

class FakeShardControl final : public ShardControl {
 public:
  FakeShardControl() = default;
  explicit FakeShardControl(std::vector<int64_t> shard_versions)
      : versions(std::move(shard_versions)) {}

  absl::Status FinalizeStep(
      int64_t step, int64_t,
      const std::vector<v1::Contributor>& contributors) override {
    absl::MutexLock lock(&mu);
    begun.push_back(step);
    mu.Await(absl::Condition(&finalize_open));
    attempted.push_back(step);
    if (fail_every > 0 && ++calls % fail_every == 0) {
      return absl::UnavailableError("fake shard restarting");
    }
    if (fail_next > 0) {
      --fail_next;
      return absl::UnavailableError("shard down");
    }
    if (applied_other_next > 0) {
      --applied_other_next;
      for (int64_t& v : versions) v = std::max(v, step + 1);
      return absl::AlreadyExistsError(
          "step was already applied over another contributor set");
    }
    if (lose_next > 0) {
      --lose_next;
      return absl::FailedPreconditionError(
          "shard restarted: step is above its version");
    }
    finalized.push_back({step, contributors});
    for (int64_t& v : versions) v = std::max(v, step + 1);
    return absl::OkStatus();
  }
  absl::StatusOr<TestScores> Evaluate(int64_t) override {
    absl::MutexLock lock(&mu);
    return scores;
  }
  absl::Status Checkpoint(int64_t version,
                          const std::vector<int64_t>& keep) override {
    absl::MutexLock lock(&mu);
    ++checkpoint_calls;
    last_keep = keep;
    if (!checkpoint_error.ok()) return checkpoint_error;
    checkpoints.push_back(version);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> Versions() override {
    absl::MutexLock lock(&mu);
    return versions;
  }
  absl::Status RestoreTo(int64_t version, int64_t) override {
    absl::MutexLock lock(&mu);
    restores.push_back(version);
    for (int64_t& v : versions) v = version;
    return absl::OkStatus();
  }

  absl::Status Fence(int64_t generation) override {
    absl::MutexLock lock(&mu);
    if (fence_unreachable) return absl::UnavailableError("shard down");
    fences.push_back(generation);
    return absl::OkStatus();
  }

  absl::Mutex mu;
  bool fence_unreachable = false;
  // Not OK: every Checkpoint fails with it (a full or read-only disk).
  absl::Status checkpoint_error;
  int checkpoint_calls = 0;        // every Checkpoint call, failed or not
  std::vector<int64_t> last_keep;  // the last Checkpoint call's `keep`
  bool finalize_open = true;
  std::vector<int64_t> fences;  // every fence that reached the shards
  int fail_next = 0;
  int lose_next = 0;
  int applied_other_next = 0;
  int fail_every = 0;
  int64_t calls = 0;
  std::vector<std::pair<int64_t, std::vector<v1::Contributor>>> finalized;
  // FinalizeStep calls begun, before the finalize_open wait.
  std::vector<int64_t> begun;
  std::vector<int64_t> attempted;  // every finalize
  std::vector<int64_t> checkpoints;
  std::vector<int64_t> restores;
  std::vector<int64_t> versions;
  TestScores scores{.accuracy = 0.5, .loss = 1.0};  // what Evaluate answers
};

}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_FAKE_SHARD_CONTROL_H_
