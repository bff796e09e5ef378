// PsService's Pull over real gRPC on a loopback port chosen by the OS:
// waits for the version, deadlines, ranges, other jobs, malformed requests.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps/ps_service_fixture.h"
#include "tests/testing/raw_stream_call.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Header;
using testing::PsServiceTest;
using testing::PullResult;
using testing::Slice;

// A pipeline stage's pull: only the owned chunks that intersect the range;
// a range without any is an empty stream once the version is there, and an
// empty or negative range is refused.
TEST_F(PsServiceTest, PullOfARangeSendsOnlyTheChunksInIt) {
  Step(0, {2, 4, 6, 8});
  PullResult second = Pull(1, absl::Seconds(5), "job", {5, 8});
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_THAT(second.chunk_ids, ElementsAre(3, 4));
  EXPECT_EQ(second.version, 1);

  PullResult cut = Pull(1, absl::Seconds(5), "job", {6, 7});  // inside chunk 3
  ASSERT_TRUE(cut.status.ok()) << cut.status.error_message();
  EXPECT_THAT(cut.chunk_ids, ElementsAre(3));

  PullResult none = Pull(1, absl::Seconds(5), "job", {0, 4});  // shard 0's
  ASSERT_TRUE(none.status.ok()) << none.status.error_message();
  EXPECT_TRUE(none.chunk_ids.empty());

  PullResult later = Pull(2, absl::Milliseconds(200), "job", {0, 4});
  EXPECT_EQ(later.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << "a pull of no chunk still waits for its version";

  for (const FlatRange bad :
       {FlatRange{5, 5}, FlatRange{7, 3}, FlatRange{-1, 4}}) {
    PullResult refused = Pull(1, absl::Seconds(5), "job", bad);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << bad.begin << ".." << bad.end;
    EXPECT_THAT(refused.status.error_message(), HasSubstr("pull range"));
    EXPECT_TRUE(refused.chunk_ids.empty());
  }
}

// A Pull request that does not parse is the caller's fault, answered at
// once and without a wait; a canonical one streams the chunks.
TEST_F(PsServiceTest, UnparsablePullRequestIsInvalidArgument) {
  const testutil::RawCallResult bad =
      testutil::RawStreamCall(server_.port, "/ferry.v1.ParameterServer/Pull",
                              {std::string("\x0a\x10"
                                           "abc",
                                           5)});
  EXPECT_EQ(bad.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(bad.status.error_message(), "pull message 1 does not parse");
  EXPECT_TRUE(bad.responses.empty());
  EXPECT_EQ(Info().pending_pulls(), 0);
  v1::PullRequest request;
  request.set_job_id("job");
  const testutil::RawCallResult good =
      testutil::RawStreamCall(server_.port, "/ferry.v1.ParameterServer/Pull",
                              {request.SerializeAsString()});
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_FALSE(good.responses.empty());
}

TEST_F(PsServiceTest, PullWaitsUntilTheVersionArrives) {
  std::atomic<bool> done = false;
  PullResult result;
  std::thread puller([&] {
    result = Pull(1, absl::Seconds(10));
    done = true;
  });
  ASSERT_TRUE(WaitForPendingPulls(1));
  EXPECT_FALSE(done);
  const v1::PushHeader a = Header("a", 0, 2);
  ASSERT_TRUE(Push(&a, Slice({2, 4, 6, 8})).ok());
  // A push alone makes no version: the server still holds the pull.
  EXPECT_EQ(Info().pending_pulls(), 1);
  EXPECT_FALSE(done);
  ASSERT_TRUE(Finalize(0, {{"a", 2}}).ok());
  puller.join();
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.version, 1);
  EXPECT_THAT(result.values, ElementsAre(0.5f, 1.0f, 1.5f, 2.0f));
}

TEST_F(PsServiceTest, PullDeadlineExpiresAndTheServerKeepsServing) {
  const absl::Time start = absl::Now();
  PullResult late = Pull(5, absl::Milliseconds(200));
  EXPECT_EQ(late.status.error_code(), grpc::DEADLINE_EXCEEDED);
  EXPECT_TRUE(late.values.empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(WaitForPendingPulls(0));  // the wait was cancelled

  const v1::PushHeader a = Header("a", 0, 2);
  ASSERT_TRUE(Push(&a, Slice({2, 4, 6, 8})).ok());
  ASSERT_TRUE(Finalize(0, {{"a", 2}}).ok());
  PullResult ok = Pull(1, absl::Seconds(5));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.version, 1);
}

// Pulls whose deadlines fall around the finalize race OnCancel against the
// ready callback; each must end cleanly one way or the other.
TEST_F(PsServiceTest, ManyPullsRacingDeadlinesAndFinalize) {
  constexpr int kPullers = 16;
  std::vector<PullResult> results(kPullers);
  std::vector<std::thread> threads;
  std::atomic<int> ended = 0;
  for (int i = 0; i < kPullers; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Pull(1, absl::Milliseconds(60 + 10 * i));
      ++ended;
    });
  }
  const v1::PushHeader a = Header("a", 0, 2);
  ASSERT_TRUE(Push(&a, Slice({2, 4, 6, 8})).ok());
  // Finalize once the first deadlines have expired, while later ones are
  // still pending.
  const absl::Status expired = testutil::WaitUntil(
      "the first pull to end by its deadline", [&] { return ended > 0; });
  ASSERT_TRUE(expired.ok()) << expired;
  ASSERT_TRUE(Finalize(0, {{"a", 2}}).ok());
  for (std::thread& t : threads) t.join();
  for (const PullResult& r : results) {
    if (r.status.ok()) {
      EXPECT_EQ(r.version, 1);
      EXPECT_EQ(r.chunk_ids.size(), 3u);
    } else {
      EXPECT_EQ(r.status.error_code(), grpc::DEADLINE_EXCEEDED);
    }
  }
  EXPECT_TRUE(WaitForPendingPulls(0));
  EXPECT_TRUE(Pull(1, absl::Seconds(5)).status.ok());
}

TEST_F(PsServiceTest, PullForAnotherJobFails) {
  EXPECT_EQ(Pull(0, absl::Seconds(5), "other").status.error_code(),
            grpc::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace ferry
