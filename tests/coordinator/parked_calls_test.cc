// ParkedCalls on its own: answers in arrival order, expiry by the given
// time, the per-worker count, and failing every call at shutdown.
#include "coordinator/parked_calls.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::NextTaskRequest Request(const std::string& worker_id) {
  v1::NextTaskRequest r;
  r.set_worker_id(worker_id);
  return r;
}

v1::NextTaskResponse Response(v1::NextTaskResponse::Action action) {
  v1::NextTaskResponse r;
  r.set_action(action);
  return r;
}

// A callback that records the action it was answered with ("error" for a
// status).
ParkedCalls::Callback Record(std::vector<std::string>& log,
                             const std::string& name) {
  return [&log, name](absl::StatusOr<v1::NextTaskResponse> r) {
    log.push_back(name + ":" +
                  (r.ok() ? v1::NextTaskResponse::Action_Name(r->action())
                          : std::string("error")));
  };
}

const ParkedCalls::Assign kNothing = [](const v1::NextTaskRequest&)
    -> std::optional<absl::StatusOr<v1::NextTaskResponse>> {
  return std::nullopt;
};

TEST(CoordinatorParkedCallsTest, CountsPerWorkerAndKeepsNoReport) {
  ParkedCalls parked;
  std::vector<std::string> log;
  v1::NextTaskRequest with_report = Request("w0");
  with_report.mutable_done()->set_step(3);
  parked.Park(with_report, Record(log, "a"), absl::UnixEpoch());
  parked.Park(Request("w0"), Record(log, "b"), absl::UnixEpoch());
  parked.Park(Request("w1"), Record(log, "c"), absl::UnixEpoch());
  EXPECT_EQ(parked.Count("w0"), 2);
  EXPECT_EQ(parked.Count("w1"), 1);
  EXPECT_EQ(parked.Count("w2"), 0);
  EXPECT_EQ(parked.size(), 3);
  std::vector<bool> had_report;
  std::vector<ParkedCalls::Reply> replies;
  parked.Serve(
      absl::UnixEpoch(), false,
      [&](const v1::NextTaskRequest& r)
          -> std::optional<absl::StatusOr<v1::NextTaskResponse>> {
        had_report.push_back(r.has_done());
        return std::nullopt;
      },
      Response(v1::NextTaskResponse::WAIT), replies);
  EXPECT_EQ(had_report, (std::vector<bool>{false, false, false}));
  EXPECT_TRUE(replies.empty());
}

TEST(CoordinatorParkedCallsTest, AnswersWhatCanBeAnsweredInArrivalOrder) {
  ParkedCalls parked;
  std::vector<std::string> log;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  parked.Park(Request("w0"), Record(log, "a"), t0 + absl::Seconds(1));
  parked.Park(Request("w1"), Record(log, "b"), t0 + absl::Seconds(1));
  parked.Park(Request("w0"), Record(log, "c"), t0 + absl::Seconds(1));
  std::vector<ParkedCalls::Reply> replies;
  parked.Serve(
      t0, /*expire_due=*/true,
      [](const v1::NextTaskRequest& r)
          -> std::optional<absl::StatusOr<v1::NextTaskResponse>> {
        if (r.worker_id() != "w0") return std::nullopt;
        return absl::StatusOr<v1::NextTaskResponse>(
            Response(v1::NextTaskResponse::TRAIN));
      },
      Response(v1::NextTaskResponse::WAIT), replies);
  ParkedCalls::Send(replies);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(log, (std::vector<std::string>{"a:TRAIN", "c:TRAIN"}));
  EXPECT_EQ(parked.size(), 1);
  EXPECT_EQ(parked.Count("w1"), 1);
}

TEST(CoordinatorParkedCallsTest, ExpiresOnlyWhenAskedAndDue) {
  ParkedCalls parked;
  std::vector<std::string> log;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  parked.Park(Request("w0"), Record(log, "a"), t0 + absl::Seconds(1));
  parked.Park(Request("w1"), Record(log, "b"), t0 + absl::Seconds(2));
  std::vector<ParkedCalls::Reply> replies;
  const v1::NextTaskResponse wait = Response(v1::NextTaskResponse::WAIT);
  parked.Serve(t0 + absl::Seconds(5), /*expire_due=*/false, kNothing, wait,
               replies);
  EXPECT_TRUE(replies.empty());
  parked.Serve(t0 + absl::Seconds(1), /*expire_due=*/true, kNothing, wait,
               replies);
  ParkedCalls::Send(replies);
  EXPECT_EQ(log, (std::vector<std::string>{"a:WAIT"}));
  parked.Serve(t0 + absl::Seconds(2), /*expire_due=*/true, kNothing, wait,
               replies);
  ParkedCalls::Send(replies);
  EXPECT_EQ(log, (std::vector<std::string>{"a:WAIT", "b:WAIT"}));
  EXPECT_EQ(parked.size(), 0);
}

TEST(CoordinatorParkedCallsTest, FailAllAnswersEveryCall) {
  ParkedCalls parked;
  std::vector<std::string> log;
  parked.Park(Request("w0"), Record(log, "a"), absl::UnixEpoch());
  parked.Park(Request("w1"), Record(log, "b"), absl::UnixEpoch());
  std::vector<ParkedCalls::Reply> replies;
  parked.FailAll(absl::UnavailableError("stopping"), replies);
  EXPECT_EQ(parked.size(), 0);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].second.status().code(), absl::StatusCode::kUnavailable);
  ParkedCalls::Send(replies);
  EXPECT_EQ(log, (std::vector<std::string>{"a:error", "b:error"}));
}

}  // namespace
}  // namespace ferry
