#include "common/prometheus_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

const prometheus::MetricFamily* FindFamily(
    const std::vector<prometheus::MetricFamily>& all, const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::set<std::string> LabelNames(const prometheus::MetricFamily& family) {
  std::set<std::string> names;
  for (const auto& m : family.metric) {
    for (const auto& label : m.label) names.insert(label.name);
  }
  return names;
}

// A minimal HTTP/1.0 GET on 127.0.0.1:port; returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    size_t off = 0;
    while (off < request.size()) {
      const ssize_t n = send(fd, request.data() + off, request.size() - off, 0);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    char buf[4096];
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

TEST(PrometheusMetricsTest, FamiliesHaveNamesTypesAndLabels) {
  Metrics().rejected(MetricRole::kPs, "push",
                     absl::StatusCode::kInvalidArgument);
  const std::vector<prometheus::MetricFamily> all =
      Metrics().registry()->Collect();
  struct Expected {
    std::string name;
    prometheus::MetricType type;
    std::set<std::string> labels;
  };
  const std::vector<Expected> expected = {
      {"ferry_steps_total", prometheus::MetricType::Counter, {"role"}},
      {"ferry_samples_total", prometheus::MetricType::Counter, {"role"}},
      {"ferry_bytes_total",
       prometheus::MetricType::Counter,
       {"role", "peer_role", "direction"}},
      {"ferry_rejected_inputs_total",
       prometheus::MetricType::Counter,
       {"role", "op", "reason"}},
      {"ferry_push_seconds", prometheus::MetricType::Histogram, {"role"}},
      {"ferry_pull_seconds", prometheus::MetricType::Histogram, {"role"}},
      {"ferry_allreduce_seconds", prometheus::MetricType::Histogram, {}},
      {"ferry_push_staleness_steps", prometheus::MetricType::Histogram, {}},
      {"ferry_staleness_steps", prometheus::MetricType::Gauge, {}},
      {"ferry_pending_pulls", prometheus::MetricType::Gauge, {}},
      {"ferry_members", prometheus::MetricType::Gauge, {}},
      {"ferry_train_samples_per_second", prometheus::MetricType::Gauge, {}},
      {"ferry_train_step_seconds", prometheus::MetricType::Gauge, {}},
      {"ferry_job_samples_applied", prometheus::MetricType::Gauge, {}},
      {"ferry_job_finished", prometheus::MetricType::Gauge, {}},
      {"ferry_generation", prometheus::MetricType::Gauge, {"role"}},
      {"ferry_model_version", prometheus::MetricType::Gauge, {"role"}},
      {"ferry_checkpoint_age_seconds", prometheus::MetricType::Gauge, {"role"}},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const prometheus::MetricFamily* family = FindFamily(all, e.name);
    ASSERT_NE(family, nullptr);
    EXPECT_EQ(family->type, e.type);
    EXPECT_FALSE(family->help.empty());
    EXPECT_FALSE(family->metric.empty());
    EXPECT_EQ(LabelNames(*family), e.labels);
  }
  // Bounded label values: 3 roles x 4 peer roles x 2 directions.
  EXPECT_EQ(FindFamily(all, "ferry_bytes_total")->metric.size(), 24u);
  // Buckets cover 100 us .. 60 s.
  const auto& buckets = LatencyBuckets();
  EXPECT_DOUBLE_EQ(buckets.front(), 0.0001);
  EXPECT_DOUBLE_EQ(buckets.back(), 60.0);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

TEST(PrometheusMetricsTest, LabelHelpers) {
  EXPECT_STREQ(PeerRoleLabel("coordinator"), "coordinator");
  EXPECT_STREQ(PeerRoleLabel("ps"), "ps");
  EXPECT_STREQ(PeerRoleLabel("ps12"), "ps");
  EXPECT_STREQ(PeerRoleLabel("worker"), "worker");
  EXPECT_STREQ(PeerRoleLabel("psx"), "other");
  EXPECT_STREQ(PeerRoleLabel(""), "other");
  EXPECT_EQ(ReasonLabel(absl::StatusCode::kInvalidArgument),
            "invalid_argument");
  EXPECT_EQ(ReasonLabel(absl::StatusCode::kFailedPrecondition),
            "failed_precondition");
  EXPECT_STREQ(MetricRoleName(MetricRole::kPs), "ps");
}

TEST(PrometheusMetricsTest, RejectCountsOnlyErrors) {
  prometheus::Counter& c = Metrics().rejected(
      MetricRole::kCoordinator, "test_op", absl::StatusCode::kAborted);
  const double before = c.Value();
  EXPECT_TRUE(Metrics()
                  .Reject(MetricRole::kCoordinator, "test_op", absl::OkStatus())
                  .ok());
  EXPECT_TRUE(absl::IsAborted(Metrics().Reject(
      MetricRole::kCoordinator, "test_op", absl::AbortedError("x"))));
  EXPECT_EQ(c.Value(), before + 1);
}

TEST(PrometheusMetricsTest, CumulativeBytesExportAddsDeltas) {
  prometheus::Counter& sent =
      Metrics().bytes(MetricRole::kWorker, "coordinator", true);
  prometheus::Counter& received =
      Metrics().bytes(MetricRole::kWorker, "coordinator", false);
  const double sent0 = sent.Value(), received0 = received.Value();
  CumulativeBytesExport bytes(MetricRole::kWorker);
  bytes.Update("coordinator", 100, 10);
  bytes.Update("coordinator", 150, 10);
  EXPECT_EQ(sent.Value(), sent0 + 150);
  EXPECT_EQ(received.Value(), received0 + 10);
  bytes.Update("coordinator", 20, 30);  // restarted counter
  EXPECT_EQ(sent.Value(), sent0 + 170);
  EXPECT_EQ(received.Value(), received0 + 30);
}

TEST(PrometheusMetricsTest, ScrapeHooksRunUntilDestroyed) {
  int runs = 0;
  auto hook = RegisterScrapeHook([&runs] {
    ++runs;
    Metrics().members().Set(7);
  });
  EXPECT_THAT(SerializeMetrics(), HasSubstr("ferry_members 7"));
  EXPECT_EQ(runs, 1);
  hook.reset();
  RunScrapeHooks();
  EXPECT_EQ(runs, 1);
}

TEST(PrometheusMetricsTest, ExportOnlyRoleLeavesOutTheOtherRolesSeries) {
  Metrics().checkpoint_age_seconds(MetricRole::kPs).Set(-1);
  Metrics().steps(MetricRole::kWorker).Increment();
  ExportOnlyRole(MetricRole::kWorker);
  const std::string worker_view = SerializeMetrics();
  ExportAllRolesForTesting();
  const std::string all = SerializeMetrics();
  EXPECT_NE(worker_view.find("ferry_steps_total{role=\"worker\"}"),
            std::string::npos);
  for (const char* other : {"{role=\"ps\"", ",role=\"ps\"",
                            "{role=\"coordinator\"", ",role=\"coordinator\""}) {
    EXPECT_EQ(worker_view.find(other), std::string::npos)
        << other;  // not peer_role
  }
  EXPECT_NE(worker_view.find("ferry_allreduce_seconds_count"),
            std::string::npos);
  for (const char* family :
       {"ferry_members", "ferry_pending_pulls", "ferry_staleness_steps",
        "ferry_push_staleness_steps"}) {
    EXPECT_EQ(worker_view.find(family), std::string::npos)
        << family;  // not a worker's
    EXPECT_NE(all.find(family), std::string::npos) << family;
  }
  EXPECT_NE(all.find("ferry_checkpoint_age_seconds{role=\"ps\"}"),
            std::string::npos);
}

TEST(PrometheusMetricsTest, AWorkerHostingAShardExportsBothRoles) {
  Metrics().steps(MetricRole::kWorker).Increment();
  Metrics().checkpoint_age_seconds(MetricRole::kPs).Set(3);
  ExportOnlyRole(MetricRole::kWorker);
  AlsoExportRole(MetricRole::kPs);
  const std::string view = SerializeMetrics();
  ExportAllRolesForTesting();
  Metrics().checkpoint_age_seconds(MetricRole::kPs).Set(-1);
  EXPECT_THAT(view, HasSubstr("ferry_steps_total{role=\"worker\"}"));
  EXPECT_THAT(view, HasSubstr("ferry_checkpoint_age_seconds{role=\"ps\"} 3"));
  EXPECT_THAT(view, HasSubstr("ferry_pending_pulls"));  // a ps family
  for (const char* other : {"{role=\"coordinator\"", ",role=\"coordinator\""}) {
    EXPECT_EQ(view.find(other), std::string::npos) << other;  // not peer_role
  }
  EXPECT_EQ(view.find("ferry_members"), std::string::npos);
}

TEST(PrometheusMetricsTest, ExposerServesMetricsOverHttp) {
  Metrics().steps(MetricRole::kWorker).Increment();
  int hook_runs = 0;
  auto hook = RegisterScrapeHook([&hook_runs] { ++hook_runs; });
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      StartMetricsExposerAt("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  ASSERT_NE(*exposer, nullptr);
  const int port = (*exposer)->port();
  ASSERT_GT(port, 0);
  const std::string response = HttpGet(port, "/metrics");
  EXPECT_THAT(response, HasSubstr(" 200 "));
  for (const char* name :
       {"ferry_steps_total{role=\"worker\"}", "ferry_bytes_total{",
        "ferry_push_seconds_bucket{", "ferry_allreduce_seconds_count",
        "ferry_pending_pulls", "ferry_members", "ferry_generation{",
        "ferry_checkpoint_age_seconds{role=\"ps\"} -1",
        "# TYPE ferry_pull_seconds histogram",
        "# TYPE ferry_steps_total counter"}) {
    EXPECT_THAT(response, HasSubstr(name));
  }
  EXPECT_GE(hook_runs, 1);
  EXPECT_THAT(HttpGet(port, "/other"), HasSubstr(" 404 "));
  // Still serving after a client that sent nothing and left.
  EXPECT_THAT(HttpGet(port, "/metrics?x=1"), HasSubstr("ferry_members"));
  exposer->reset();  // stops
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

// A client that connects and then sends its request a byte at a time (or
// never finishes it) neither holds the exposer past its deadline nor keeps
// the destructor from returning.
TEST(PrometheusMetricsTest, StallingClientIsDroppedAndDoesNotBlockShutdown) {
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      StartMetricsExposerAt("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(send(fd, "G", 1, 0), 1);  // and nothing more
  // The exposer took the connection and is reading its request.
  const absl::Status taken = testutil::WaitUntil(
      "the exposer to accept the stalling connection",
      [&] { return (*exposer)->connections_accepted() == 1; });
  ASSERT_TRUE(taken.ok()) << taken;
  const absl::Time start = absl::Now();
  exposer->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  close(fd);
}

TEST(PrometheusMetricsTest, PortZeroIsOffAndBadPortsAreRefused) {
  absl::StatusOr<std::unique_ptr<MetricsExposer>> off = StartMetricsExposer(0);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*off, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(StartMetricsExposer(-1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(StartMetricsExposer(70000).status()));
}

TEST(PrometheusMetricsTest, BoundPortIsUnavailable) {
  // Hold a port with a plain listening socket on every address.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      StartMetricsExposer(port);
  EXPECT_TRUE(absl::IsUnavailable(exposer.status())) << exposer.status();
  EXPECT_THAT(std::string(exposer.status().message()),
              HasSubstr(absl::StrCat(port)));
  close(fd);
}

}  // namespace
}  // namespace ferry
