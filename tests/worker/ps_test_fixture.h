// One in-memory parameter server for tests of the worker loop in PS mode:
// the coordinator's ShardControl (it finalizes sync steps over the exact
// contributor set: sum of their pushes / their samples, then the job's
// optimizer, version = step + 1) and a ParameterClientFactory whose clients
// pull (waiting for a version) and push into it. No gRPC, no thread of its
// own. Thread-safe.
#ifndef FERRY_TESTS_WORKER_PS_TEST_FIXTURE_H_
#define FERRY_TESTS_WORKER_PS_TEST_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "coordinator/coordinator.h"
#include "worker/worker_deps.h"

namespace ferry::testing {

class InMemoryPs final : public ShardControl {
 public:
  // Starts at `initial` (the job's initial parameters), version 0.
  InMemoryPs(const OptimizerConfig& optimizer, std::vector<float> initial);

  // Clients of this server (not owned by it; it must outlive them).
  ParameterClientFactory ClientFactory();

  // FAILED_PRECONDITION when a contributor did not push the step.
  absl::Status FinalizeStep(
      int64_t step, int64_t generation,
      const std::vector<v1::Contributor>& contributors) override;
  absl::StatusOr<TestScores> Evaluate(int64_t) override {
    return TestScores{.accuracy = 0.5, .loss = 1.0};
  }
  absl::Status Checkpoint(int64_t, const std::vector<int64_t>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> Versions() override;
  absl::Status RestoreTo(int64_t, int64_t) override {
    return absl::UnimplementedError("no checkpoints in memory");
  }
  // No generations in memory: nothing to fence.
  absl::Status Fence(int64_t) override { return absl::OkStatus(); }

  // Waits (up to `timeout`) for version >= min_version, then copies the
  // weights. DEADLINE_EXCEEDED when it does not come.
  absl::StatusOr<int64_t> Pull(int64_t min_version, float* out,
                               absl::Duration timeout);
  // A whole push of `worker_id` for `step`.
  void Push(int64_t step, const std::string& worker_id, int64_t num_samples,
            std::vector<float> grads);
  int64_t num_elements() const { return n_; }
  int64_t version() const;
  // Pushes that arrived for a step already finalized (must stay 0).
  int64_t late_pushes() const;

 private:
  struct Pushed {
    int64_t num_samples = 0;
    std::vector<float> grads;
  };
  const int64_t n_;
  std::unique_ptr<ComputeBackend> backend_;
  mutable absl::Mutex mu_;
  DeviceBuffer params_ ABSL_GUARDED_BY(mu_);
  DeviceBuffer grads_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t late_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int64_t, std::string>, Pushed> pushes_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_WORKER_PS_TEST_FIXTURE_H_
