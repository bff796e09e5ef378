// MetricsLines on its own: points come out in the order queued, step
// seconds run from the previous end, and a step line's byte counts cover
// every worker once.
#include "coordinator/metrics_lines.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::ByteCounts Bytes(int64_t to_shard, int64_t to_coordinator) {
  v1::ByteCounts b;
  (*b.mutable_sent())["ps"] = to_shard;
  (*b.mutable_sent())["coordinator"] = to_coordinator;
  (*b.mutable_received())["ps"] = 2 * to_shard;
  return b;
}

v1::ByteCounts Peers(int64_t sent, int64_t calls) {
  v1::ByteCounts b;
  (*b.mutable_sent())["ps0"] = sent;
  (*b.mutable_calls())["ps0"] = calls;
  return b;
}

v1::RegisterRequest Worker(const std::string& host) {
  v1::RegisterRequest r;
  r.set_hostname(host);
  return r;
}

TEST(CoordinatorMetricsLinesTest, PointsComeOutInTheOrderQueued) {
  MetricsLines lines;
  StepMetrics step;
  step.step = 1;
  EvalMetrics eval;
  eval.step = 1;
  lines.AddStep(step);
  lines.AddEval(eval);
  step.step = 2;
  lines.AddStep(step);
  const std::vector<MetricsLines::Point> points = lines.Take();
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].first->step, 1);
  EXPECT_FALSE(points[0].second.has_value());
  EXPECT_TRUE(points[1].second.has_value());
  EXPECT_EQ(points[2].first->step, 2);
  EXPECT_TRUE(lines.Take().empty());
}

TEST(CoordinatorMetricsLinesTest, StepSecondsRunFromThePreviousEnd) {
  MetricsLines lines;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  // The first step from its own beginning.
  EXPECT_DOUBLE_EQ(lines.StepSeconds(t0, t0 + absl::Seconds(2)), 2);
  EXPECT_DOUBLE_EQ(
      lines.StepSeconds(t0 + absl::Seconds(1), t0 + absl::Seconds(5)), 3);
  // A step that ended earlier (reports out of order) keeps the later end.
  EXPECT_DOUBLE_EQ(lines.StepSeconds(t0, t0 + absl::Seconds(4)), -1);
  EXPECT_DOUBLE_EQ(
      lines.StepSeconds(t0 + absl::Seconds(5), t0 + absl::Seconds(6)), 1);
}

TEST(CoordinatorMetricsLinesTest, ByteCountsCoverEveryWorkerOnce) {
  Membership membership;
  const absl::Time now = absl::FromUnixSeconds(100);
  const std::string a = membership.Add(Worker("a"), now).id;
  const std::string b = membership.Add(Worker("b"), now).id;
  const std::string c = membership.Add(Worker("c"), now).id;
  membership.Add(Worker("silent"), now);  // nothing sent: not counted
  membership.Find(a)->bytes = Bytes(100, 10);
  membership.Find(a)->peer_bytes = Peers(100, 3);
  membership.Find(b)->bytes = Bytes(50, 5);
  membership.Find(c)->bytes = Bytes(7, 1);
  ASSERT_TRUE(membership.Remove(c));  // its counts stay

  // Worker a reported the step with its counts as of then.
  OpenStep step;
  step.reported_bytes[a] = {Bytes(60, 6), Peers(60, 2)};
  StepMetrics m;
  AddWorkerBytes(m, &step, membership);
  EXPECT_EQ(m.bytes_workers, 3);
  EXPECT_EQ(m.data_bytes_sent, 60 + 50 + 7);
  EXPECT_EQ(m.control_bytes_sent, 6 + 5 + 1);
  EXPECT_EQ(m.bytes_sent, m.data_bytes_sent + m.control_bytes_sent);
  EXPECT_EQ(m.data_bytes_received, 2 * (60 + 50 + 7));
  EXPECT_EQ(m.control_bytes_received, 0);
  EXPECT_EQ(m.peers["ps0"].sent, 60);
  EXPECT_EQ(m.peers["ps0"].calls, 2);

  StepMetrics latest;  // no step: every worker's latest counts
  AddWorkerBytes(latest, nullptr, membership);
  EXPECT_EQ(latest.data_bytes_sent, 100 + 50 + 7);
  EXPECT_EQ(latest.peers["ps0"].calls, 3);
}

}  // namespace
}  // namespace ferry
