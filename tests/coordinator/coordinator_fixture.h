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

// Whether the job's events hold one of `kind`.
bool HasEvent(const v1::StatusResponse& s, const std::string& kind);

// Waits (bounded: 3 s of real time) until the fake shards saw `n`
// finalizes; no sleeping, it waits on the fake's mutex.
void WaitForFinalize(FakeShardControl& shards, size_t n = 1);
// Waits (bounded: 3 s) until `done` holds under shards.mu; false on timeout.
bool WaitForShards(FakeShardControl& shards,
                   const std::function<bool(FakeShardControl&)>& done);

// Waits (bounded: 3 s of real time) until `done` holds for the coordinator's
// Status(): the finalizer thread applies a step after the shards finalized
// it. False on timeout.
bool WaitForStatus(Coordinator& c,
                   const std::function<bool(const v1::StatusResponse&)>& done);

v1::JobSpec Job(int batch, int epochs,
                v1::Consistency consistency = v1::CONSISTENCY_SYNC);

struct Fixture;

// The coordinator a NextTask helper calls, and the FakeClock it reads (null:
// the real clock). With a fake clock a parked long poll is answered by
// advancing the clock past its deadline and calling CheckTimeouts(), never
// by waiting for the long poll in real time.
struct Polled {
  Polled(Coordinator& c) : coordinator(&c) {}  // NOLINT: implicit on purpose
  Polled(Fixture& f);                          // NOLINT: implicit on purpose
  Polled(Coordinator& c, FakeClock* clock, absl::Duration long_poll)
      : coordinator(&c), clock(clock), long_poll(long_poll) {}

  Coordinator* coordinator;
  FakeClock* clock = nullptr;
  absl::Duration long_poll;
};

// NextTask, answered. Under a fake clock, a call still unanswered after
// kSettle of real time (the coordinator's own threads may still answer it:
// a finalize) is parked; the clock then moves one long poll at a time.
inline constexpr absl::Duration kSettle = absl::Milliseconds(20);
absl::StatusOr<v1::NextTaskResponse> Call(Polled c,
                                          const v1::NextTaskRequest& request);
absl::StatusOr<v1::NextTaskResponse> Next(Polled c, const std::string& worker,
                                          const v1::StepReport* done = nullptr);
// Like a worker: reports once, then asks again while told to WAIT.
absl::StatusOr<v1::NextTaskResponse> NextWork(
    Polled c, const std::string& worker, const v1::StepReport* done = nullptr);
// A successful report of the lease `r`.
v1::StepReport Done(const v1::NextTaskResponse& r);
// The job events of `kind` in a status.
int CountJobEvents(const v1::StatusResponse& s, const std::string& kind);

struct Fixture {
  // The coordinator reads `clock`: heartbeats and long polls expire only
  // when a test (or a NextTask helper, see Polled) advances it. Heartbeats
  // time out after kHeartbeatTimeout of that clock.
  static constexpr absl::Duration kHeartbeatTimeout = absl::Minutes(10);
  explicit Fixture(v1::JobSpec job, int64_t epoch_size, int min_workers = 1,
                   std::string state_dir = "", int64_t checkpoint_every = 0);
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
