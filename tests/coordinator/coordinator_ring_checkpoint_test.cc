// Ring checkpoints at the coordinator: which leases ask for one, when one is
// recorded, and how a ring none of whose members holds the job's state goes
// back (coordinator/coordinator_ring_checkpoints.cc, coordinator/
// ring_resume.h).
#include <memory>
#include <string>
#include <vector>

#include "coordinator/ring_resume.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

// A ring job of 60 samples per epoch, batch 10 (6 steps), checkpointed every
// 2 steps into /ckpt.
Fixture RingFixture(int epochs) {
  v1::JobSpec job = Job(10, epochs);
  job.set_mode(v1::MODE_RING);
  job.set_ring_checkpoint_dir("/ckpt");
  return Fixture(job, 60, 1, "", /*checkpoint_every=*/2);
}

// Every member in `members` takes the next step's lease and reports it
// applied, its checkpoint part written when the lease asked and
// `written`. Returns the leases (rank order of `members`).
std::vector<v1::NextTaskResponse> Step(Fixture& f,
                                       const std::vector<std::string>& members,
                                       bool written = true) {
  std::vector<v1::NextTaskResponse> leases;
  for (const std::string& m : members) {
    auto lease = NextWork(f, m);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) return leases;
    leases.push_back(*lease);
  }
  for (size_t i = 0; i < members.size(); ++i) {
    v1::NextTaskRequest report;
    report.set_worker_id(members[i]);
    *report.mutable_done() = Done(leases[i]);
    if (leases[i].checkpoint()) {
      report.mutable_done()->set_checkpoint_written(written);
      if (!written) report.mutable_done()->set_checkpoint_error("disk full");
    }
    report.set_report_only(true);
    EXPECT_TRUE(Call(f, report).ok());
  }
  return leases;
}

// Waits until the coordinator applied `steps` steps (its finalizer thread
// applies them after the last report).
void AwaitRingApplied(Fixture& f, int64_t steps) {
  ASSERT_TRUE(WaitForStatus(
      *f.coordinator,
      [steps](const v1::StatusResponse& s) { return s.step() >= steps; }));
}

int64_t FirstSample(const v1::NextTaskResponse& lease) {
  return lease.tasks_size() == 0 ? -1 : lease.tasks(0).begin();
}

// The next leases of `a` and `c` resume from the ring checkpoint at 2
// (step 2 again, its samples first).
void ExpectNextLeasesRestoreTheCheckpointAt2(Fixture& f, const std::string& a,
                                             const std::string& c) {
  auto la = NextWork(f, a);
  auto lc = NextWork(f, c);
  ASSERT_TRUE(la.ok() && lc.ok()) << la.status() << lc.status();
  EXPECT_EQ(la->step(), 2);
  ASSERT_TRUE(la->has_restore_checkpoint());
  EXPECT_EQ(la->restore_checkpoint(), 2);
  EXPECT_EQ(lc->restore_checkpoint(), 2);
  EXPECT_EQ(FirstSample(*la), 20);  // the undone step's samples first
}

// ExpectNextLeasesRestoreTheCheckpointAt2, with one ring_resumed event
// whose detail names `why`.
void ExpectBothResumeFromTheCheckpointAt2(Fixture& f, const std::string& a,
                                          const std::string& c,
                                          const std::string& why) {
  ExpectNextLeasesRestoreTheCheckpointAt2(f, a, c);
  if (::testing::Test::HasFatalFailure()) return;
  const v1::StatusResponse s = f.coordinator->Status();
  ASSERT_EQ(CountJobEvents(s, "ring_resumed"), 1);
  for (const v1::JobEvent& e : s.events()) {
    if (e.kind() == "ring_resumed") {
      EXPECT_NE(e.detail().find(why), std::string::npos) << e.detail();
    }
  }
}

TEST(CoordinatorRingCheckpointTest,
     EveryNthStepAndTheEpochsLastAreCheckpointed) {
  Fixture f = RingFixture(1);
  const std::string a = f.Join(), b = f.Join();
  std::vector<bool> asked;
  for (int step = 0; step < 6; ++step) {
    asked.push_back(Step(f, {a, b}).at(0).checkpoint());
  }
  // Versions 2, 4 and 6 (6: the epoch's and the job's end).
  EXPECT_EQ(asked, (std::vector<bool>{false, true, false, true, false, true}));
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return CountJobEvents(s, "ring_checkpoint") == 3;
  }));
}

// Two members train 3 steps (a ring checkpoint at 2) and leave; two new
// ones join and take their first leases.
struct NewRing {
  std::string c, d;
  v1::NextTaskResponse lc, ld;
};
NewRing ReplaceEveryMemberAfterThreeSteps(Fixture& f) {
  NewRing ring;
  const std::string a = f.Join(), b = f.Join();
  for (int step = 0; step < 3; ++step) Step(f, {a, b});
  AwaitRingApplied(f, 3);
  EXPECT_TRUE(f.coordinator->Leave(a).ok());
  EXPECT_TRUE(f.coordinator->Leave(b).ok());
  ring.c = f.Join();
  ring.d = f.Join();
  auto lc = NextWork(f, ring.c);
  auto ld = NextWork(f, ring.d);
  if (!lc.ok() || !ld.ok()) {
    ADD_FAILURE() << lc.status() << ld.status();
    return ring;
  }
  ring.lc = *lc;
  ring.ld = *ld;
  return ring;
}

TEST(CoordinatorRingCheckpointTest, RingThatLostEveryHolderResumesFromIt) {
  Fixture f = RingFixture(1);
  const NewRing ring = ReplaceEveryMemberAfterThreeSteps(f);
  if (::testing::Test::HasFailure()) return;
  const v1::NextTaskResponse *lc = &ring.lc, *ld = &ring.ld;
  // Step 2 again, from the checkpoint at version 2: the samples of the
  // undone step 2 first.
  EXPECT_EQ(lc->step(), 2);
  EXPECT_EQ(lc->committed_steps(), 2);
  ASSERT_TRUE(lc->has_restore_checkpoint());
  EXPECT_EQ(lc->restore_checkpoint(), 2);
  EXPECT_EQ(ld->restore_checkpoint(), 2);
  EXPECT_EQ(FirstSample(*lc), 20);
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(CountJobEvents(s, "ring_resumed"), 1);
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_TRUE(s.error().empty()) << s.error();
}

// A resumed ring whose first step aborts (here a member leaves before it
// reported) has still applied nothing: the next ring resumes from the same
// checkpoint again, without undoing more or counting a second rollback.
TEST(CoordinatorRingCheckpointTest, ResumeWhoseFirstStepAbortsResumesAgain) {
  Fixture f = RingFixture(1);
  const NewRing ring = ReplaceEveryMemberAfterThreeSteps(f);
  if (::testing::Test::HasFailure()) return;
  ASSERT_EQ(ring.lc.restore_checkpoint(), 2);
  ASSERT_TRUE(f.coordinator->Leave(ring.c).ok());  // before its report
  ExpectNextLeasesRestoreTheCheckpointAt2(f, ring.d, f.Join());
  if (::testing::Test::HasFatalFailure()) return;
  const v1::StatusResponse s = f.coordinator->Status();
  std::vector<int64_t> resumed_at;
  for (const v1::JobEvent& ev : s.events()) {
    if (ev.kind() == "ring_resumed") resumed_at.push_back(ev.step());
  }
  EXPECT_EQ(resumed_at, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_TRUE(s.error().empty()) << s.error();
}

TEST(CoordinatorRingCheckpointTest, IncompleteCheckpointIsNotResumedFrom) {
  Fixture f = RingFixture(1);
  const std::string a = f.Join(), b = f.Join();
  Step(f, {a, b});
  Step(f, {a, b}, /*written=*/false);  // version 2: a part failed
  Step(f, {a, b});
  AwaitRingApplied(f, 3);
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  const std::string c = f.Join();
  auto lc = NextWork(f, c);
  ASSERT_TRUE(lc.ok()) << lc.status();
  // First epoch, no complete checkpoint: back to the start, no restore.
  EXPECT_EQ(lc->step(), 0);
  EXPECT_FALSE(lc->has_restore_checkpoint());
  EXPECT_EQ(FirstSample(*lc), 0);
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(CountJobEvents(s, "ring_checkpoint"), 0);
  EXPECT_GE(CountJobEvents(s, "ring_checkpoint_failed"), 1);
}

TEST(CoordinatorRingCheckpointTest, CheckpointRank0CannotLoadIsDropped) {
  Fixture f = RingFixture(1);
  const std::string a = f.Join();
  for (int step = 0; step < 5; ++step) Step(f, {a});  // checkpoints 2, 4
  AwaitRingApplied(f, 5);
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  const std::string c = f.Join();
  auto lc = NextWork(f, c);
  ASSERT_TRUE(lc.ok()) << lc.status();
  ASSERT_EQ(lc->restore_checkpoint(), 4);
  v1::NextTaskRequest failed;
  failed.set_worker_id(c);
  failed.mutable_done()->set_step(lc->step());
  failed.mutable_done()->set_fence(lc->fence());
  failed.mutable_done()->set_failed(true);
  failed.mutable_done()->set_restore_error("DATA_LOSS: checksum mismatch");
  failed.set_report_only(true);
  ASSERT_TRUE(Call(f, failed).ok());
  auto again = NextWork(f, c);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->step(), 2);
  EXPECT_EQ(again->restore_checkpoint(), 2);
  EXPECT_EQ(FirstSample(*again), 20);
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "ring_restore_failed"), 1);
}

TEST(CoordinatorRingCheckpointTest, MemberThatHeldTheStateKeepsTheRingGoing) {
  Fixture f = RingFixture(1);
  const std::string a = f.Join(), b = f.Join();
  for (int step = 0; step < 3; ++step) Step(f, {a, b});
  AwaitRingApplied(f, 3);
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  const std::string c = f.Join();
  auto lb = NextWork(f, b);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->step(), 3);  // b holds the state: nothing goes back
  EXPECT_FALSE(lb->has_restore_checkpoint());
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "ring_resumed"), 0);
}

// A hybrid job of the same shape: a ring beside shards, both halves
// checkpointed every 2 steps. Call HybridShardsAtZero before its first
// lease.
Fixture HybridFixture() {
  v1::JobSpec job = Job(10, 1);
  job.set_mode(v1::MODE_HYBRID);
  job.set_ring_checkpoint_dir("/ckpt");
  return Fixture(job, 60, 1, "", /*checkpoint_every=*/2);
}
void HybridShardsAtZero(Fixture& f) {
  absl::MutexLock lock(&f.shards.mu);
  f.shards.versions = {0, 0};
}

TEST(CoordinatorRingCheckpointTest,
     HybridRingThatLostEveryHolderGoesBackWithTheShards) {
  Fixture f = HybridFixture();
  HybridShardsAtZero(f);
  const std::string a = f.Join(), b = f.Join();
  for (int step = 0; step < 3; ++step) Step(f, {a, b});  // both halves at 2
  AwaitRingApplied(f, 3);
  ASSERT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return s.versions == std::vector<int64_t>{3, 3};
  }));
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  const std::string c = f.Join();
  auto lc = NextWork(f, c);
  ASSERT_TRUE(lc.ok()) << lc.status();
  // The shards went back to 2 first, then the ring restores its dense
  // layers from the checkpoint at 2 and redoes step 2's samples.
  EXPECT_EQ(lc->step(), 2);
  EXPECT_EQ(lc->restore_checkpoint(), 2);
  EXPECT_EQ(FirstSample(*lc), 20);
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.restores, std::vector<int64_t>{2});
    EXPECT_EQ(f.shards.versions, (std::vector<int64_t>{2, 2}));
  }
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(CountJobEvents(s, "ring_resumed"), 1);
  EXPECT_TRUE(s.error().empty()) << s.error();
}

TEST(CoordinatorRingCheckpointTest,
     HybridWithoutTheRingsHalfGoesBackToTheStart) {
  Fixture f = HybridFixture();
  HybridShardsAtZero(f);
  const std::string a = f.Join();
  Step(f, {a});
  Step(f, {a}, /*written=*/false);  // the shards' checkpoint at 2 only
  Step(f, {a});
  AwaitRingApplied(f, 3);
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  const std::string c = f.Join();
  auto lc = NextWork(f, c);
  ASSERT_TRUE(lc.ok()) << lc.status();
  // First epoch, no version both halves hold: the job's start, where the
  // newcomers' initial dense layers are the job's.
  EXPECT_EQ(lc->step(), 0);
  EXPECT_FALSE(lc->has_restore_checkpoint());
  EXPECT_EQ(FirstSample(*lc), 0);
  absl::MutexLock lock(&f.shards.mu);
  EXPECT_EQ(f.shards.restores, std::vector<int64_t>{0});
}

TEST(RingResumeTest, NewestCheckpointTheLogReachesElseTheStart) {
  // Newest at or below the applied steps and within the log.
  EXPECT_EQ(RingResumeTarget({2, 4, 6}, 7, 0)->version, 6);
  EXPECT_TRUE(RingResumeTarget({2, 4, 6}, 7, 0)->from_checkpoint);
  EXPECT_EQ(RingResumeTarget({2, 4, 6}, 5, 0)->version, 4);
  // The log starts at this epoch's first step (6): 6 is there.
  EXPECT_EQ(RingResumeTarget({2, 4, 6}, 9, 6)->version, 6);
  // Checkpoints before the log: nowhere, unless the log starts at 0.
  EXPECT_FALSE(RingResumeTarget({2, 4}, 9, 6).has_value());
  EXPECT_FALSE(RingResumeTarget({}, 9, 6).has_value());
  const auto start = RingResumeTarget({}, 3, 0);
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(start->version, 0);
  EXPECT_FALSE(start->from_checkpoint);
}

// A ring pipeline of 2 stages and 4 members: ranks 0 and 2 train stage 0,
// 1 and 3 stage 1 (pipeline/ring_pipeline_roles.h). Applies steps 0..2
// (a checkpoint at 2), then the members in `leaving` leave.
v1::JobSpec PipelineRingJob() {
  v1::JobSpec job = Job(10, 1);
  job.set_mode(v1::MODE_RING);
  job.set_pipeline_stages(2);
  job.set_ring_checkpoint_dir("/ckpt");
  return job;
}
struct PipelineRing {
  explicit PipelineRing(const std::vector<int>& leaving)
      : f(PipelineRingJob(), 60, 1, "", /*checkpoint_every=*/2) {
    for (int i = 0; i < 4; ++i) members.push_back(f.Join());
    for (int step = 0; step < 3; ++step) Step(f, members);
    AwaitRingApplied(f, 3);
    for (int i : leaving) EXPECT_TRUE(f.coordinator->Leave(members[i]).ok());
  }
  Fixture f;
  std::vector<std::string> members;
};
std::unique_ptr<PipelineRing> PipelineRingAfter3Steps(
    const std::vector<int>& leaving) {
  return std::make_unique<PipelineRing>(leaving);
}

TEST(CoordinatorRingCheckpointTest,
     PipelineThatLostEveryHolderOfOneStageResumesFromTheCheckpoint) {
  // Ranks 1 and 3, stage 1's only current copies, leave; 0 and 2 live on.
  auto ring = PipelineRingAfter3Steps({1, 3});
  Fixture& f = ring->f;
  ExpectBothResumeFromTheCheckpointAt2(f, ring->members[0], ring->members[2],
                                       "pipeline stage");
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_TRUE(s.error().empty()) << s.error();
  // The resumed ring holds every stage: the next step is no new resume.
  Step(f, {ring->members[0], ring->members[2]});
  AwaitRingApplied(f, 3);
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "ring_resumed"), 1);
}

TEST(CoordinatorRingCheckpointTest, PipelineKeepingAHolderOfEachStageGoesOn) {
  // Ranks 1 and 2 leave: rank 0 holds stage 0, rank 3 stage 1.
  auto ring = PipelineRingAfter3Steps({1, 2});
  Fixture& f = ring->f;
  auto la = NextWork(f, ring->members[0]);
  ASSERT_TRUE(la.ok()) << la.status();
  EXPECT_EQ(la->step(), 3);
  EXPECT_FALSE(la->has_restore_checkpoint());
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(CountJobEvents(s, "ring_resumed"), 0);
  EXPECT_EQ(s.rollbacks(), 0);
}

TEST(RingResumeTest, APipelineRangeIsLostWhenNoMemberHoldsIt) {
  Membership::Member stage0, stage1, both;
  stage0.held_ranges = {0};
  stage1.held_ranges = {1};
  both.held_ranges = {0, 1};
  EXPECT_FALSE(RingLostAHeldRange({&stage0, &stage1}, 2, 5));
  EXPECT_TRUE(RingLostAHeldRange({&stage0, &stage0}, 2, 5));
  EXPECT_FALSE(RingLostAHeldRange({&both}, 2, 5));
  // A BatchNorm state range (index 2) nobody holds.
  EXPECT_TRUE(RingLostAHeldRange({&both}, 3, 5));
  EXPECT_FALSE(RingLostAHeldRange({&stage0}, 2, 0));  // nothing applied
}

TEST(RingResumeTest, LostOnlyWhenStepsWereAppliedAndNoMemberTookPart) {
  Membership::Member fresh, veteran;
  veteran.applied_any = true;
  EXPECT_FALSE(RingLostTheJobState({&fresh}, 0));
  EXPECT_TRUE(RingLostTheJobState({&fresh, &fresh}, 5));
  EXPECT_FALSE(RingLostTheJobState({&fresh, &veteran}, 5));
  EXPECT_FALSE(RingLostTheJobState({}, 5));
}

// RingFixture's job with the optimizer state sharded across the members.
Fixture ShardedRingFixture() {
  v1::JobSpec job = Job(10, 1);
  job.set_mode(v1::MODE_RING);
  job.set_ring_checkpoint_dir("/ckpt");
  job.set_ring_shard_optimizer_state(true);
  return Fixture(job, 60, 1, "", /*checkpoint_every=*/2);
}

TEST(CoordinatorShardedRingTest, LosingAnyMemberGoesBackToTheCheckpoint) {
  Fixture f = ShardedRingFixture();
  const std::string a = f.Join(), b = f.Join(), c = f.Join();
  // The first step is checkpointed too (a slice lost after it has one).
  std::vector<bool> asked;
  for (int step = 0; step < 3; ++step) {
    asked.push_back(Step(f, {a, b, c}).at(0).checkpoint());
  }
  EXPECT_EQ(asked, (std::vector<bool>{true, true, false}));
  AwaitRingApplied(f, 3);
  // b held slice 1 of 3: a and c hold the rest of the state, not all.
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  ExpectBothResumeFromTheCheckpointAt2(f, a, c, "sharded optimizer state");
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_TRUE(s.error().empty()) << s.error();
  // The two now hold the state's two slices: the next step goes on.
  Step(f, {a, c});
  AwaitRingApplied(f, 3);
  auto next = NextWork(f, a);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->step(), 3);
  EXPECT_FALSE(next->has_restore_checkpoint());
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "ring_resumed"), 1);
}

TEST(CoordinatorShardedRingTest, AGrowingRingKeepsEverySliceAndGoesOn) {
  Fixture f = ShardedRingFixture();
  const std::string a = f.Join(), b = f.Join();
  for (int step = 0; step < 3; ++step) Step(f, {a, b});
  AwaitRingApplied(f, 3);
  const std::string c = f.Join();
  auto la = NextWork(f, a);
  ASSERT_TRUE(la.ok()) << la.status();
  EXPECT_EQ(la->step(), 3);
  EXPECT_FALSE(la->has_restore_checkpoint());
  EXPECT_EQ(la->ring_size(), 3);
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "ring_resumed"), 0);
}

}  // namespace
}  // namespace ferry
