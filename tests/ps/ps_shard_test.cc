#include "ps/ps_shard.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/cpu_backend.h"
#include "compute/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PsShardTest, CreateValidatesConfig) {
  EXPECT_TRUE(PsShard::Create(TestConfig()).ok());
  PsShardConfig bad = TestConfig();
  bad.initial_slice = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(PsShard::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = TestConfig();
  bad.shard_id = 2;
  EXPECT_EQ(PsShard::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = TestConfig();
  bad.optimizer.lr = -1;
  EXPECT_EQ(PsShard::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = TestConfig();
  bad.job_id.clear();
  EXPECT_EQ(PsShard::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = TestConfig();
  bad.initial_slice[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(PsShard::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PsShardTest, InfoDescribesTheSlice) {
  auto shard = MakeShard(TestConfig());
  shard->RecordBytes("worker", 10, 20);
  shard->RecordBytes("worker", 1, 2);
  const PsShardInfo info = shard->Info();
  EXPECT_EQ(info.job_id, "job");
  EXPECT_EQ(info.shard_id, 1);
  EXPECT_EQ(info.num_shards, 2);
  EXPECT_EQ(info.version, 0);
  EXPECT_EQ(info.num_elements, 4);
  EXPECT_THAT(info.chunk_ids, ElementsAre(2, 3, 4));
  EXPECT_EQ(info.bytes_sent.at("worker"), 11);
  EXPECT_EQ(info.bytes_received.at("worker"), 22);
  EXPECT_EQ(shard->range().begin, 4);
  EXPECT_EQ(shard->range().end, 8);
}

TEST(PsShardTest, SyncFinalizeAveragesExactlyTheNamedContributors) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 3), {3, 1, 4, 2}).ok());
  // c pushes too but is not in the final set: its buffer is discarded.
  ASSERT_TRUE(PushSlice(*shard, Header("c", 0, 1), {100, 100, 100, 100}).ok());
  EXPECT_EQ(shard->version(), 0);  // nothing applied on arrival

  auto version = shard->FinalizeStep("job", 0, {{"a", 2}, {"b", 3}}, 0);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  // mean = (a + b) / 5 = {1, 1, 2, 2}; SGD lr 0.5.
  EXPECT_THAT(Params(*shard), ElementsAre(0.5f, 1.5f, 2.0f, 3.0f));

  // c's step-0 buffer is gone: step 0 is closed, step 1 starts empty.
  EXPECT_EQ(PushSlice(*shard, Header("c", 0, 1), {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->FinalizeStep("job", 1, {{"c", 1}}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(PushSlice(*shard, Header("c", 1, 1), {1, 1, 1, 1}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 1, {{"c", 1}}, 0).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 1.0f, 1.5f, 2.5f));
}

TEST(PsShardTest, SyncUpdateEqualsOptimizerApplyOnTheMean) {
  PsShardConfig config = TestConfig();
  config.optimizer.kind = OptimizerKind::kAdamW;
  config.optimizer.lr = 0.01;
  config.optimizer.weight_decay = 0.1;
  auto shard = MakeShard(config);
  auto backend = MakeCpuBackend(1);
  auto reference = Optimizer::Create(config.optimizer, backend.get(), 4);
  ASSERT_TRUE(reference.ok());
  std::vector<float> expected = config.initial_slice;
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<float> a = {0.5f, -1.0f, 0.25f, 3.0f + step};
    const std::vector<float> b = {1.5f, 2.0f, -0.75f, 1.0f};
    ASSERT_TRUE(PushSlice(*shard, Header("a", step, 3), a).ok());
    ASSERT_TRUE(PushSlice(*shard, Header("b", step, 4), b).ok());
    ASSERT_TRUE(shard->FinalizeStep("job", step, {{"a", 3}, {"b", 4}}, 0).ok());
    std::vector<float> mean(4);
    for (int i = 0; i < 4; ++i) mean[i] = (a[i] + b[i]) / 7.0f;
    ASSERT_TRUE(reference->Apply(mean.data(), expected.data()).ok());
  }
  EXPECT_EQ(shard->version(), 3);
  EXPECT_EQ(Params(*shard), expected);
}

// The model's last 2 elements are state (BatchNorm running statistics):
// shard 1's slice [4, 8) holds parameters 4, 5 and state 6, 7. A step moves
// the state by the contributors' sample-weighted mean change, with no
// learning rate, while the parameters get the optimizer.
TEST(PsShardTest, StateElementsAreMovedByTheMeanChange) {
  PsShardConfig config = TestConfig();
  config.state_elements = 2;
  auto shard = MakeShard(config);
  // Pushes carry SUMs over samples: a's 2 samples changed the state by
  // {1, -1} each, b's 3 samples by {2, 4}.
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 2, -2}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 3), {3, 1, 6, 12}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}, {"b", 3}}, 0).ok());
  // Parameters: mean {1, 1}, SGD lr 0.5. State: {3 + 8/5, 4 + 10/5}.
  EXPECT_THAT(Params(*shard), ElementsAre(0.5f, 1.5f, 4.6f, 6.0f));

  config.state_elements = 9;
  EXPECT_EQ(PsShard::Create(config).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PsShardTest, FinalizeWithAnUnpushedContributorChangesNothing) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  const std::vector<float> before = Params(*shard);
  auto result = shard->FinalizeStep("job", 0, {{"a", 2}, {"ghost", 1}}, 0);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("ghost"));
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), before);
  // a's buffer survived: finalizing over the real set works.
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 0).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.5f, 1.0f, 1.5f, 2.0f));
}

TEST(PsShardTest, FinalizeRejectsBadRequests) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  EXPECT_EQ(shard->FinalizeStep("other", 0, {{"a", 2}}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status ahead =
      shard->FinalizeStep("job", 1, {{"a", 2}}, 0).status();
  EXPECT_EQ(ahead.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ahead.message()), HasSubstr("at version 0"));
  EXPECT_EQ(shard->FinalizeStep("job", 0, {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      shard->FinalizeStep("job", 0, {{"a", 2}, {"a", 2}}, 0).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->FinalizeStep("job", 0, {{"a", 5}}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), TestConfig().initial_slice);
}

TEST(PsShardTest, RefinalizeIsIdempotent) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  ASSERT_EQ(*shard->FinalizeStep("job", 0, {{"a", 2}}, 0), 1);
  const std::vector<float> after = Params(*shard);
  auto again = shard->FinalizeStep("job", 0, {{"a", 2}}, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 1);
  EXPECT_EQ(Params(*shard), after);
}

// A push naming the step's whole contributor set: the commit of the last
// one applies the step, exactly as FinalizeStep over that set would.
PsPushHeader WithSet(PsPushHeader header, std::vector<PsContributor> set) {
  header.step_contributors = std::move(set);
  return header;
}

TEST(PsShardTest, FinalizeOnPushAppliesTheStepOnItsLastPush) {
  auto on_push = MakeShard(TestConfig());
  auto by_coordinator = MakeShard(TestConfig());
  const std::vector<PsContributor> set = {{"b", 3}, {"a", 2}};
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<float> a = {2, 4, 6, 8.0f + step};
    const std::vector<float> b = {3, 1, 4, 2};
    ASSERT_EQ(*PushSlice(*on_push, WithSet(Header("a", step, 2, step), set), a),
              step);  // not complete yet: nothing applied
    ASSERT_EQ(*PushSlice(*on_push, WithSet(Header("b", step, 3, step), set), b),
              step + 1);  // the last contributor's commit applied it
    ASSERT_TRUE(PushSlice(*by_coordinator, Header("a", step, 2), a).ok());
    ASSERT_TRUE(PushSlice(*by_coordinator, Header("b", step, 3), b).ok());
    ASSERT_TRUE(by_coordinator->FinalizeStep("job", step, set, 0).ok());
    EXPECT_EQ(Params(*on_push), Params(*by_coordinator)) << "step " << step;
    // The coordinator's later finalize over the same set (any order) only
    // confirms it.
    auto confirmed =
        on_push->FinalizeStep("job", step, {{"a", 2}, {"b", 3}}, step);
    ASSERT_TRUE(confirmed.ok()) << confirmed.status();
    EXPECT_EQ(*confirmed, step + 1);
    // ...and raises the fence to its generation, as one that applies does.
    EXPECT_EQ(on_push->Info().max_generation, step);
  }
  EXPECT_EQ(on_push->Info().steps_finalized_on_push, 3);
  // A worker retrying a push this shard already applied (its pushes to
  // other shards failed) is told ALREADY_EXISTS (accepted), not that the
  // step is over; a worker not in that step's set still is.
  EXPECT_EQ(
      PushSlice(*on_push, WithSet(Header("a", 2, 2, 2), set), {1, 1, 1, 1})
          .status()
          .code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      PushSlice(*on_push, Header("c", 2, 2, 2), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(on_push->version(), 3);
  EXPECT_EQ(by_coordinator->Info().steps_finalized_on_push, 0);
}

TEST(PsShardTest, FinalizeOnPushWaitsForEveryNamedWorker) {
  auto shard = MakeShard(TestConfig());
  const std::vector<PsContributor> set = {{"a", 2}, {"b", 3}};
  ASSERT_TRUE(
      PushSlice(*shard, WithSet(Header("a", 0, 2), set), {2, 4, 6, 8}).ok());
  // b pushes without the set (an older lease): no finalize on push.
  ASSERT_EQ(*PushSlice(*shard, Header("b", 0, 3), {3, 1, 4, 2}), 0);
  // c is not in the set: its push changes nothing of the set's progress.
  ASSERT_EQ(*PushSlice(*shard, Header("c", 0, 1), {9, 9, 9, 9}), 0);
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(shard->Info().steps_finalized_on_push, 0);
  // The coordinator closes it.
  ASSERT_TRUE(shard->FinalizeStep("job", 0, set, 0).ok());
  EXPECT_EQ(shard->version(), 1);
}

TEST(PsShardTest, FinalizeOfAStepAppliedOnPushOverAnotherSetIsRefused) {
  auto shard = MakeShard(TestConfig());
  const std::vector<PsContributor> set = {{"a", 2}, {"b", 3}};
  ASSERT_TRUE(
      PushSlice(*shard, WithSet(Header("a", 0, 2), set), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(
      PushSlice(*shard, WithSet(Header("b", 0, 3), set), {3, 1, 4, 2}).ok());
  ASSERT_EQ(shard->version(), 1);
  const std::vector<float> after = Params(*shard);
  // The coordinator dropped b (it died after pushing here): the shard holds
  // an update the job did not decide.
  const absl::Status other =
      shard->FinalizeStep("job", 0, {{"a", 2}}, 0).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.message()), HasSubstr("a:2, b:3"));
  EXPECT_EQ(shard->version(), 1);
  EXPECT_EQ(Params(*shard), after);
  // A rollback to version 0 forgets it: step 0 is open again.
  ASSERT_TRUE(shard
                  ->RestoreState({.version = 0,
                                  .optimizer_steps = 0,
                                  .params = TestConfig().initial_slice,
                                  .optimizer_state = {},
                                  .tables = {}},
                                 1)
                  .ok());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2, 1), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 1).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.5f, 1.0f, 1.5f, 2.0f));
}

TEST(PsShardTest, PushesWithABadContributorSetAreRefused) {
  auto shard = MakeShard(TestConfig());
  auto code = [&](PsPushHeader header) {
    return PushSlice(*shard, header, {1, 1, 1, 1}).status().code();
  };
  // The set does not name the pusher, or not with its samples.
  EXPECT_EQ(code(WithSet(Header("a", 0, 2), {{"b", 2}})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(WithSet(Header("a", 0, 2), {{"a", 3}})),
            absl::StatusCode::kInvalidArgument);
  // Repeated worker, no samples, empty id.
  EXPECT_EQ(code(WithSet(Header("a", 0, 2), {{"a", 2}, {"a", 2}})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(WithSet(Header("a", 0, 2), {{"a", 2}, {"b", -1}})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(WithSet(Header("a", 0, 2), {{"a", 2}, {"", 1}})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->Info().rejected_pushes, 5);
  EXPECT_EQ(shard->version(), 0);
  // Async shards take no set.
  auto async = MakeShard(TestConfig(PsConsistency::kAsync));
  EXPECT_EQ(
      PushSlice(*async, WithSet(Header("a", 0, 2), {{"a", 2}}), {1, 1, 1, 1})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(PsShardTest, GenerationFencing) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(
      PushSlice(*shard, Header("a", 0, 2, /*generation=*/1), {2, 4, 6, 8})
          .ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 3).ok());
  EXPECT_EQ(shard->Info().max_generation, 3);
  const std::vector<float> before = Params(*shard);
  EXPECT_EQ(
      PushSlice(*shard, Header("a", 1, 2, 2), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kAborted);
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 2, 3), {1, 1, 1, 1}).ok());
  EXPECT_EQ(shard->FinalizeStep("job", 1, {{"a", 2}}, 2).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(shard->version(), 1);
  EXPECT_EQ(Params(*shard), before);
}

// Every malformed push is refused with its documented code and leaves the
// version, the parameters and the open step untouched.
TEST(PsShardTest, BadPushesChangeNothing) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 1).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 2, 1), {2, 4, 6, 8}).ok());
  const std::vector<float> before = Params(*shard);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float one[] = {1.0f};
  const float two[] = {1.0f, 1.0f};
  const float three[] = {1.0f, 1.0f, 1.0f};

  struct Case {
    const char* name;
    PsPushHeader header;
    std::function<absl::Status(PsShard&, PsPushStaging&)> chunks;
    absl::StatusCode code;
  };
  const auto full = [&](PsShard& s, PsPushStaging& st) {
    absl::Status status = s.AddChunk(st, 2, one);
    if (status.ok()) status = s.AddChunk(st, 3, two);
    if (status.ok()) status = s.AddChunk(st, 4, one);
    return status;
  };
  PsPushHeader wrong_job = Header("b", 1, 1, 1);
  wrong_job.job_id = "other";
  const std::vector<Case> cases = {
      {"wrong job", wrong_job, full, absl::StatusCode::kFailedPrecondition},
      {"no worker id", Header("", 1, 1, 1), full,
       absl::StatusCode::kInvalidArgument},
      {"negative samples", Header("b", 1, -1, 1), full,
       absl::StatusCode::kInvalidArgument},
      {"stale step", Header("b", 0, 1, 1), full,
       absl::StatusCode::kFailedPrecondition},
      {"future step", Header("b", 2, 1, 1), full,
       absl::StatusCode::kFailedPrecondition},
      {"older generation", Header("b", 1, 1, 0), full,
       absl::StatusCode::kAborted},
      {"duplicate push", Header("a", 1, 2, 1), full,
       absl::StatusCode::kAlreadyExists},
      {"unknown chunk", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) { return s.AddChunk(st, 99, one); },
       absl::StatusCode::kInvalidArgument},
      {"other shard's chunk", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) { return s.AddChunk(st, 0, two); },
       absl::StatusCode::kInvalidArgument},
      {"duplicate chunk", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) {
         absl::Status status = full(s, st);
         return status.ok() ? s.AddChunk(st, 3, two) : status;
       },
       absl::StatusCode::kInvalidArgument},
      {"missing chunk", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) {
         absl::Status status = s.AddChunk(st, 2, one);
         return status.ok() ? s.AddChunk(st, 4, one) : status;
       },
       absl::StatusCode::kInvalidArgument},
      {"wrong length", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) {
         absl::Status status = s.AddChunk(st, 2, one);
         if (status.ok()) status = s.AddChunk(st, 3, three);
         return status;
       },
       absl::StatusCode::kInvalidArgument},
      {"nan", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) {
         const float bad[] = {1.0f, nan};
         absl::Status status = s.AddChunk(st, 2, one);
         if (status.ok()) status = s.AddChunk(st, 3, bad);
         return status.ok() ? s.AddChunk(st, 4, one) : status;
       },
       absl::StatusCode::kInvalidArgument},
      {"inf", Header("b", 1, 1, 1),
       [&](PsShard& s, PsPushStaging& st) {
         const float bad[] = {-inf};
         absl::Status status = s.AddChunk(st, 2, bad);
         if (status.ok()) status = s.AddChunk(st, 3, two);
         return status.ok() ? s.AddChunk(st, 4, one) : status;
       },
       absl::StatusCode::kInvalidArgument},
  };
  int64_t rejected = shard->Info().rejected_pushes;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::Status status;
    auto staging = shard->BeginPush(c.header);
    if (!staging.ok()) {
      status = staging.status();
    } else {
      status = c.chunks(*shard, **staging);
      absl::StatusOr<int64_t> committed =
          shard->CommitPush(std::move(staging).value());
      if (status.ok()) status = committed.status();
      if (!status.ok()) {
        EXPECT_EQ(committed.status(), status);
      }
    }
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_EQ(shard->Info().rejected_pushes, ++rejected);
    EXPECT_EQ(shard->version(), 1);
    EXPECT_EQ(Params(*shard), before);
  }
  // Only a's push is open: finalizing {a} works, {a, b} does not.
  EXPECT_EQ(
      shard->FinalizeStep("job", 1, {{"a", 2}, {"b", 1}}, 1).status().code(),
      absl::StatusCode::kFailedPrecondition);
  // A worker whose push was rejected may push again.
  ASSERT_TRUE(PushSlice(*shard, Header("b", 1, 2, 1), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 1, {{"a", 2}, {"b", 2}}, 1).ok());
  EXPECT_EQ(shard->Info().accepted_pushes, 3);
}

TEST(PsShardTest, CommitRechecksTheStateAtCommitTime) {
  auto shard = MakeShard(TestConfig());
  auto early = shard->BeginPush(Header("b", 0, 1));
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 0).ok());
  const std::vector<float> ones = {1, 1, 1, 1};
  ASSERT_TRUE(shard->AddChunk(**early, 2, absl::MakeSpan(&ones[0], 1)).ok());
  ASSERT_TRUE(shard->AddChunk(**early, 3, absl::MakeSpan(&ones[1], 2)).ok());
  ASSERT_TRUE(shard->AddChunk(**early, 4, absl::MakeSpan(&ones[3], 1)).ok());
  EXPECT_EQ(shard->CommitPush(std::move(early).value()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PsShardTest, AsyncAppliesOnArrivalAndRecordsStaleness) {
  auto shard = MakeShard(TestConfig(PsConsistency::kAsync));
  auto v =
      PushSlice(*shard, Header("a", 0, 2, 0, /*base_version=*/0), {2, 2, 2, 2});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  EXPECT_THAT(Params(*shard), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f));
  // b computed on version 0 while the shard is at 1: staleness 1.
  v = PushSlice(*shard, Header("b", 0, 1, 0, 0), {1, 1, 1, 1});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 2);
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 1.0f, 2.0f, 3.0f));
  PsShardInfo info = shard->Info();
  EXPECT_EQ(info.max_staleness, 1);
  EXPECT_EQ(info.sum_staleness, 1);
  EXPECT_EQ(info.accepted_pushes, 2);
  // Replayed clock, future base version, finalize in async mode.
  EXPECT_EQ(
      PushSlice(*shard, Header("a", 0, 1, 0, 2), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      PushSlice(*shard, Header("a", 1, 1, 0, 3), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->FinalizeStep("job", 0, {{"a", 2}}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->version(), 2);
}

TEST(PsShardTest, AsyncAppliesAPushWithItsShareOfTheGlobalBatchsRate) {
  PsShardConfig config = TestConfig(PsConsistency::kAsync);
  config.global_batch = 8;
  auto shard = MakeShard(config);
  // 2 of the batch's 8 samples, mean gradient 1: a quarter of lr 0.5.
  auto v = PushSlice(*shard, Header("a", 0, 2, 0, 0), {2, 2, 2, 2});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(Params(*shard), ElementsAre(0.875f, 1.875f, 2.875f, 3.875f));
  // The whole batch from one worker: the full rate.
  v = PushSlice(*shard, Header("b", 0, 8, 0, 1), {8, 8, 8, 8});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(Params(*shard), ElementsAre(0.375f, 1.375f, 2.375f, 3.375f));
}

TEST(PsShardTest, AsyncConcurrentPushesAllApply) {
  auto shard = MakeShard(TestConfig(PsConsistency::kAsync));
  constexpr int kWorkers = 4;
  constexpr int kSteps = 25;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int step = 0; step < kSteps; ++step) {
        auto v = PushSlice(*shard, Header(absl::StrCat("w", w), step, 4, 0, 0),
                           {0.5f, 0.5f, 0.5f, 0.5f});
        EXPECT_TRUE(v.ok()) << v.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(shard->version(), kWorkers * kSteps);
  // Each update subtracts 0.5 * 0.5 / 4 = 1/16 exactly.
  const float d = kWorkers * kSteps / 16.0f;
  EXPECT_THAT(Params(*shard),
              ElementsAre(1.0f - d, 2.0f - d, 3.0f - d, 4.0f - d));
}

TEST(PsShardTest, WaitForVersionCallsBackWhenTheVersionArrives) {
  auto shard = MakeShard(TestConfig());
  std::shared_ptr<const PsSnapshot> now;
  auto id = shard->WaitForVersion("job", 0, [&](auto s) { now = *s; });
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, kNoPullWait);
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(now->version, 0);

  std::atomic<int> calls = 0;
  std::shared_ptr<const PsSnapshot> later;
  id = shard->WaitForVersion("job", 1, [&](auto s) {
    later = *s;
    ++calls;
  });
  ASSERT_TRUE(id.ok());
  EXPECT_NE(*id, kNoPullWait);
  auto cancelled = shard->WaitForVersion("job", 1, [&](auto) { ++calls; });
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(shard->Info().pending_pulls, 2);
  EXPECT_TRUE(shard->CancelWait(*cancelled));
  EXPECT_EQ(calls, 0);

  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 2), {2, 4, 6, 8}).ok());
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 2}}, 0).ok());
  EXPECT_EQ(calls, 1);
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(later->version, 1);
  EXPECT_EQ(later->values, Params(*shard));
  EXPECT_EQ(later, shard->CurrentSnapshot());  // one copy per version
  EXPECT_EQ(now->version, 0);                  // old snapshots stay intact
  EXPECT_EQ(now->values, TestConfig().initial_slice);
  EXPECT_FALSE(shard->CancelWait(*id));
  EXPECT_EQ(shard->Info().pending_pulls, 0);

  EXPECT_EQ(
      shard->WaitForVersion("other", 0, [&](auto) { ++calls; }).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(calls, 1);
}

TEST(PsShardTest, WaitsOfAFencedGenerationAreRefusedNotParked) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(shard->RaiseFence("job", 3).ok());
  int calls = 0;
  const auto count = [&](auto) { ++calls; };
  // A lease of generation 2 waits for a version its own (refused) push
  // would make: ABORTED at once, nothing parked.
  const auto refused = shard->WaitForVersion("job", 1, count, 2);
  EXPECT_TRUE(absl::IsAborted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("generation 3"));
  EXPECT_EQ(shard->Info().pending_pulls, 0);
  // A version already there is served whatever the generation.
  ASSERT_TRUE(shard->WaitForVersion("job", 0, count, 2).ok());
  EXPECT_EQ(calls, 1);
  // The fence's generation, a newer one, and 0 (unfenced) wait.
  ASSERT_TRUE(shard->WaitForVersion("job", 1, count, 3).ok());
  ASSERT_TRUE(shard->WaitForVersion("job", 1, count, 4).ok());
  ASSERT_TRUE(shard->WaitForVersion("job", 1, count).ok());
  EXPECT_EQ(shard->Info().pending_pulls, 3);
  EXPECT_EQ(calls, 1);
}

TEST(PsShardTest, ShutdownReleasesWaitsWithUnavailable) {
  auto shard = MakeShard(TestConfig());
  int unavailable = 0;
  const auto count = [&](absl::StatusOr<std::shared_ptr<const PsSnapshot>> s) {
    unavailable += absl::IsUnavailable(s.status());
  };
  ASSERT_TRUE(shard->WaitForVersion("job", 5, count).ok());
  shard->Shutdown();
  EXPECT_EQ(unavailable, 1);
  ASSERT_TRUE(shard->WaitForVersion("job", 0, count).ok());
  EXPECT_EQ(unavailable, 2);
  EXPECT_EQ(shard->Info().pending_pulls, 0);
}

}  // namespace
}  // namespace ferry
