// Helpers for the coordinator's tests (the fake shards are
// tests/testing/fake_shard_control.h): job specs, NextTask
// calls that behave like a worker's, and a fixture owning a coordinator.
#ifndef FERRY_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_
#define FERRY_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "coordinator/coordinator.h"
#include "tests/testing/fake_shard_control.h"

namespace ferry {

// Waits (bounded: 3 s of real time) until the fake shards saw `n`
// finalizes; no sleeping, it waits on the fake's mutex.
void WaitForFinalize(FakeShardControl& shards, size_t n = 1);
// Waits (bounded: 3 s) until `done` holds under shards.mu; false on timeout.
bool WaitForShards(FakeShardControl& shards,
                   const std::function<bool(FakeShardControl&)>& done);

v1::JobSpec Job(int batch, int epochs,
                v1::Consistency consistency = v1::CONSISTENCY_SYNC);

// NextTask, waited for.
absl::StatusOr<v1::NextTaskResponse> Call(Coordinator& c,
                                          const v1::NextTaskRequest& request);
absl::StatusOr<v1::NextTaskResponse> Next(Coordinator& c,
                                          const std::string& worker,
                                          const v1::StepReport* done = nullptr);
// Like a worker: reports once, then asks again while told to WAIT.
absl::StatusOr<v1::NextTaskResponse> NextWork(
    Coordinator& c, const std::string& worker,
    const v1::StepReport* done = nullptr);
// A successful report of the lease `r`.
v1::StepReport Done(const v1::NextTaskResponse& r);

struct Fixture {
  // `fake_clock`: the coordinator reads `clock` (heartbeats and long polls
  // expire only when a test advances it and calls CheckTimeouts()).
  explicit Fixture(v1::JobSpec job, int64_t epoch_size, int min_workers = 1,
                   std::string state_dir = "", int64_t checkpoint_every = 0,
                   bool fake_clock = false);
  // A coordinator over the same shards and options (a restart).
  absl::StatusOr<std::unique_ptr<Coordinator>> Restart();
  std::string Join();

  FakeClock clock;
  InMemoryFileSystem fs;  // where state_dir is (options.file_system)
  CoordinatorOptions options;
  FakeShardControl shards;
  std::unique_ptr<Coordinator> coordinator;
};

}  // namespace ferry

#endif  // FERRY_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_
