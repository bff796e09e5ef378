#include "tests/coordinator/coordinator_fixture.h"

#include <future>
#include <memory>

#include "absl/time/clock.h"
#include "tests/testing/wait_until.h"

namespace ferry {

bool WaitForShards(FakeShardControl& shards,
                   const std::function<bool(FakeShardControl&)>& done) {
  struct Arg {
    FakeShardControl* shards;
    const std::function<bool(FakeShardControl&)>* done;
  } arg{&shards, &done};
  absl::MutexLock lock(&shards.mu);
  return shards.mu.AwaitWithTimeout(
      absl::Condition(
          +[](Arg* a) { return (*a->done)(*a->shards); }, &arg),
      absl::Seconds(3));
}

bool HasEvent(const v1::StatusResponse& s, const std::string& kind) {
  for (const v1::JobEvent& e : s.events()) {
    if (e.kind() == kind) return true;
  }
  return false;
}

void WaitForFinalize(FakeShardControl& shards, size_t n) {
  WaitForShards(shards,
                [n](FakeShardControl& s) { return s.finalized.size() >= n; });
}

bool WaitForStatus(Coordinator& c,
                   const std::function<bool(const v1::StatusResponse&)>& done) {
  return testutil::WaitUntil("the coordinator's status to match",
                             [&] { return done(c.Status()); })
      .ok();
}

v1::JobSpec Job(int batch, int epochs, v1::Consistency consistency) {
  v1::JobSpec job;
  job.set_job_id("job");
  job.set_global_batch(batch);
  job.set_epochs(epochs);
  job.set_consistency(consistency);
  return job;
}

int CountJobEvents(const v1::StatusResponse& s, const std::string& kind) {
  int n = 0;
  for (const v1::JobEvent& e : s.events()) n += e.kind() == kind ? 1 : 0;
  return n;
}

Polled::Polled(Fixture& f)
    : coordinator(f.coordinator.get()),
      clock(&f.clock),
      long_poll(f.options.long_poll) {}

absl::StatusOr<v1::NextTaskResponse> Call(Polled c,
                                          const v1::NextTaskRequest& request) {
  auto promise =
      std::make_shared<std::promise<absl::StatusOr<v1::NextTaskResponse>>>();
  std::future<absl::StatusOr<v1::NextTaskResponse>> answer =
      promise->get_future();
  c.coordinator->NextTask(request,
                          [promise](absl::StatusOr<v1::NextTaskResponse> r) {
                            promise->set_value(std::move(r));
                          });
  if (c.clock == nullptr) return answer.get();
  for (int polls = 0; polls < 1000; ++polls) {
    if (answer.wait_for(absl::ToChronoMilliseconds(kSettle)) ==
        std::future_status::ready) {
      return answer.get();
    }
    c.clock->Advance(c.long_poll);
    c.coordinator->CheckTimeouts();
  }
  return absl::DeadlineExceededError("NextTask unanswered after 1000 polls");
}

absl::StatusOr<v1::NextTaskResponse> Next(Polled c, const std::string& worker,
                                          const v1::StepReport* done) {
  v1::NextTaskRequest request;
  request.set_worker_id(worker);
  if (done) *request.mutable_done() = *done;
  return Call(c, request);
}

absl::StatusOr<v1::NextTaskResponse> NextWork(Polled c,
                                              const std::string& worker,
                                              const v1::StepReport* done) {
  auto r = Next(c, worker, done);
  for (int i = 0;
       i < 100 && r.ok() && r->action() == v1::NextTaskResponse::WAIT; ++i) {
    r = Next(c, worker);
  }
  return r;
}

v1::StepReport Done(const v1::NextTaskResponse& r) {
  v1::StepReport report;
  report.set_step(r.step());
  report.set_fence(r.fence());
  int64_t n = 0;
  for (const auto& t : r.tasks()) n += t.end() - t.begin();
  report.set_num_samples(n);
  report.set_loss_sum(n * 0.5);
  return report;
}

Fixture::Fixture(v1::JobSpec job, int64_t epoch_size, int min_workers,
                 std::string state_dir, int64_t checkpoint_every) {
  options.job = std::move(job);
  options.epoch_size = epoch_size;
  options.long_poll = absl::Milliseconds(50);
  options.min_workers = min_workers;
  options.heartbeat_timeout = kHeartbeatTimeout;
  options.state_dir = std::move(state_dir);
  options.file_system = &fs;
  options.checkpoint_every = checkpoint_every;
  options.clock = &clock;
  options.shard_retry = absl::Milliseconds(1);
  coordinator = *Coordinator::Create(options, &shards);
}

absl::StatusOr<std::unique_ptr<Coordinator>> Fixture::Restart() {
  return Coordinator::Create(options, &shards);
}

std::string Fixture::Join() {
  v1::RegisterRequest request;
  return coordinator->Register(request)->worker_id();
}

}  // namespace ferry
