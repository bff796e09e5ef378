// Report-only calls with await_applied (NextTaskRequest): answered once the
// reported step is applied or no longer open, or at the end of the long
// poll, each answer carrying the committed steps (coordinator/
// coordinator.cc, ReportAnswer).
#include <future>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

using Answer = absl::StatusOr<v1::NextTaskResponse>;

// A ring job of 60 samples per epoch, batch 10, that waits for 2 members.
Fixture TwoMemberRing() {
  v1::JobSpec job = Job(10, 1);
  job.set_mode(v1::MODE_RING);
  return Fixture(job, 60, /*min_workers=*/2);
}

// Sends `worker`'s report of `lease` (report_only, await_applied as given)
// without waiting for the answer.
std::future<Answer> SendReport(Fixture& f, const std::string& worker,
                               const v1::NextTaskResponse& lease,
                               bool await_applied) {
  v1::NextTaskRequest request;
  request.set_worker_id(worker);
  *request.mutable_done() = Done(lease);
  request.set_report_only(true);
  request.set_await_applied(await_applied);
  auto promise = std::make_shared<std::promise<Answer>>();
  std::future<Answer> answer = promise->get_future();
  f.coordinator->NextTask(request,
                          [promise](Answer r) { promise->set_value(r); });
  return answer;
}

// A two-member ring in its step 0: both leases out, and member a's report
// of it sent with await_applied (not answered yet).
struct StepZeroReported {
  StepZeroReported() : f(TwoMemberRing()), a(f.Join()), b(f.Join()) {
    auto lease_a = NextWork(f, a);
    auto lease_b = NextWork(f, b);
    EXPECT_TRUE(lease_a.ok() && lease_b.ok())
        << lease_a.status() << lease_b.status();
    if (!lease_a.ok() || !lease_b.ok()) return;
    la = *lease_a;
    lb = *lease_b;
    EXPECT_EQ(la.step(), 0);
    first = SendReport(f, a, la, /*await_applied=*/true);
  }
  Fixture f;
  const std::string a, b;
  v1::NextTaskResponse la, lb;
  std::future<Answer> first;
};

bool Answered(std::future<Answer>& answer) {
  return answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// Blocks (up to 60 s) for an answer the coordinator's finalizer thread
// sends.
Answer AwaitAnswer(std::future<Answer>& answer) {
  if (answer.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    return absl::DeadlineExceededError("no answer in 60 s");
  }
  return answer.get();
}

TEST(CoordinatorReportCommitTest, AwaitedReportIsAnsweredOnceItsStepIsApplied) {
  StepZeroReported r;
  // The first report of step 0 waits: the step needs b's too. A call that
  // is not parked is answered inside NextTask.
  EXPECT_FALSE(Answered(r.first));
  // b's report, without await_applied, is answered at once; then step 0 is
  // applied and a hears that 1 step is committed.
  std::future<Answer> second =
      SendReport(r.f, r.b, r.lb, /*await_applied=*/false);
  ASSERT_TRUE(Answered(second));
  ASSERT_TRUE(second.get().ok());
  Answer answer = AwaitAnswer(r.first);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->action(), v1::NextTaskResponse::WAIT);
  EXPECT_EQ(answer->committed_steps(), 1);
  EXPECT_EQ(r.f.coordinator->Status().step(), 1);
  // A report of a step applied already is answered at once.
  std::future<Answer> late = SendReport(r.f, r.a, r.la, /*await_applied=*/true);
  EXPECT_TRUE(Answered(late));
}

TEST(CoordinatorReportCommitTest, AwaitedReportOfAnAbortedStepIsAnswered) {
  StepZeroReported r;
  EXPECT_FALSE(Answered(r.first));
  // b leaves before reporting: the ring's step 0 is aborted, nothing is
  // committed.
  ASSERT_TRUE(r.f.coordinator->Leave(r.b).ok());
  Answer answer = AwaitAnswer(r.first);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->action(), v1::NextTaskResponse::WAIT);
  EXPECT_EQ(answer->committed_steps(), 0);
}

TEST(CoordinatorReportCommitTest, AwaitedReportIsAnsweredWhenTheLongPollEnds) {
  StepZeroReported r;
  EXPECT_FALSE(Answered(r.first));
  // b is slow: after one long poll a is answered anyway, step 0 still open.
  r.f.clock.Advance(r.f.options.long_poll);
  r.f.coordinator->CheckTimeouts();
  ASSERT_TRUE(Answered(r.first));
  Answer answer = r.first.get();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->action(), v1::NextTaskResponse::WAIT);
  EXPECT_EQ(answer->committed_steps(), 0);
  // b's report still applies the step.
  std::future<Answer> second =
      SendReport(r.f, r.b, r.lb, /*await_applied=*/false);
  ASSERT_TRUE(AwaitAnswer(second).ok());
  ASSERT_TRUE(WaitForStatus(*r.f.coordinator, [](const v1::StatusResponse& s) {
    return s.step() == 1;
  }));
}

}  // namespace
}  // namespace ferry
