// The limits of common/peer_limits.h on the coordinator: members, identifier
// lengths, byte-count maps in reports and parked lease requests. Each
// refusal is RESOURCE_EXHAUSTED naming the limit and changes nothing.
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

void ExpectLimit(const absl::Status& status, const std::string& what) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  EXPECT_THAT(std::string(status.message()), HasSubstr("the limit is"));
}

TEST(CoordinatorLimitsTest, MembersAreBoundedByDefault) {
  EXPECT_EQ(CoordinatorOptions().max_workers, kDefaultMaxWorkers);
  Fixture f(Job(4, 1), 64);
  f.options.max_workers = 2;
  f.coordinator = *f.Restart();
  f.Join();
  f.Join();
  const auto refused = f.coordinator->Register(v1::RegisterRequest());
  ExpectLimit(refused.status(), "workers (--max-workers) is 3; the limit is 2");
  EXPECT_EQ(f.coordinator->Status().members_size(), 2);
}

TEST(CoordinatorLimitsTest, OverlongRegistrationFieldsAreRefused) {
  Fixture f(Job(4, 1), 64);
  const int64_t generation = f.coordinator->Status().generation();
  const std::string too_long(kMaxIdBytes + 1, 'x');
  v1::RegisterRequest request;
  request.set_hostname(too_long);
  ExpectLimit(f.coordinator->Register(request).status(),
              "hostname in bytes is 257");
  request.set_hostname("host");
  request.set_peer_address(too_long);
  ExpectLimit(f.coordinator->Register(request).status(), "peer_address");
  request.set_peer_address("");
  request.set_job_id(too_long);
  ExpectLimit(f.coordinator->Register(request).status(), "job_id");
  EXPECT_EQ(f.coordinator->Status().members_size(), 0);
  EXPECT_EQ(f.coordinator->Status().generation(), generation);
}

TEST(CoordinatorLimitsTest, ReportsWithTooManyPeersAreRefused) {
  Fixture f(Job(4, 1), 64);
  const std::string w = f.Join();
  auto lease = NextWork(f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  v1::StepReport done = Done(*lease);
  for (int i = 0; i <= kMaxByteCountEntries; ++i) {
    (*done.mutable_peer_bytes()->mutable_sent())[absl::StrCat("ps", i)] = 1;
  }
  ExpectLimit(Next(f, w, &done).status(),
              "peers in the report's peer_bytes is 257");

  v1::StepReport long_key = Done(*lease);
  (*long_key.mutable_bytes()
        ->mutable_received())[std::string(kMaxIdBytes + 1, 'p')] = 1;
  ExpectLimit(Next(f, w, &long_key).status(),
              "peer name in the report's bytes");

  // The step was not reported by either: the right report still goes in.
  EXPECT_EQ(f.coordinator->Status().step(), 0);
  const v1::StepReport right = Done(*lease);
  EXPECT_TRUE(NextWork(f, w, &right).ok());
}

TEST(CoordinatorLimitsTest, ParkedLeaseRequestsPerWorkerAreBounded) {
  // Two members are needed to form a step, so a lone member's calls park.
  Fixture f(Job(4, 1), 64, /*min_workers=*/2);
  f.options.long_poll = absl::Seconds(5);
  f.options.heartbeat_timeout = absl::Seconds(30);
  f.coordinator = *f.Restart();
  const std::string w = f.Join();
  absl::Mutex mu;
  std::vector<absl::Status> answered;
  v1::NextTaskRequest request;
  request.set_worker_id(w);
  for (int64_t i = 0; i <= kMaxParkedLeasesPerWorker; ++i) {
    f.coordinator->NextTask(request,
                            [&](absl::StatusOr<v1::NextTaskResponse> r) {
                              absl::MutexLock lock(&mu);
                              answered.push_back(r.status());
                            });
  }
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(answered.size(), 1u);  // the one over the limit, at once
    ExpectLimit(answered[0], "waiting lease requests of worker");
  }
  f.coordinator.reset();  // answers the parked calls (shutting down)
  absl::MutexLock lock(&mu);
  EXPECT_EQ(answered.size(),
            static_cast<size_t>(kMaxParkedLeasesPerWorker + 1));
}

}  // namespace
}  // namespace ferry
