// RingExchange with several ranks in one process over in-memory rings
// (tests/worker/worker_test_fixture.h): every rank's weights must equal a
// reference computed here with the same optimizer code, through ring
// generation changes (a member leaves, a member joins with nothing), a
// rollback of a step the coordinator aborted after some ranks applied it,
// and a failed collective that is given up and redone.
#include "worker/ring_exchange.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "common/ring_checkpoint.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/ring_exchange_fixture.h"
#include "tests/worker/worker_test_fixture.h"

namespace ferry {
namespace {

using ::testing::FloatEq;
using ::testing::Pointwise;

using testing::kRingN;
using testing::kSamplesPerMember;
using Member = testing::RingMember;
using Reference = testing::RingReference;
constexpr int64_t kN = kRingN;
constexpr int64_t kSamplesPerRank = kSamplesPerMember;
const std::vector<int64_t>& kTensors = testing::kRingTensors;

float Grad(int seed, int64_t step, int64_t i) {
  return testing::RingGrad(seed, step, i);
}
std::vector<float> Initial() { return testing::RingInitial(); }

std::unique_ptr<Member> MakeMember(const std::string& id, int seed,
                                   testing::RingHubs* hubs,
                                   const std::vector<float>& init) {
  return testing::MakeRingMember(
      id, seed,
      [hubs](const v1::NextTaskResponse& lease) {
        return hubs->Connect(lease.ring_generation(), lease.ring_size(),
                             lease.rank());
      },
      init);
}

// Members w0..w{n-1} (seeds 0..n-1) from the initial weights.
std::vector<std::unique_ptr<Member>> MakeMembers(int n,
                                                 testing::RingHubs* hubs) {
  std::vector<std::unique_ptr<Member>> owned;
  for (int r = 0; r < n; ++r) {
    owned.push_back(MakeMember("w" + std::to_string(r), r, hubs, Initial()));
  }
  return owned;
}

v1::NextTaskResponse Lease(int64_t step, int64_t ring_generation, int64_t fence,
                           const std::vector<Member*>& ring, int rank) {
  return testing::RingLease(step, ring_generation, fence, ring, rank);
}

// One rank's step up to the last Ready (tensors declared last to first,
// like the backward pass).
absl::Status BeginAndReduce(Member& m, const v1::NextTaskResponse& lease,
                            int seed_offset = 0) {
  ExchangeStep step;
  step.lease = &lease;
  step.num_samples = kSamplesPerRank;
  RETURN_IF_ERROR(m.exchange->BeginStep(step));
  for (int64_t i = 0; i < kN; ++i) {
    m.grads.data()[i] = Grad(m.seed + seed_offset, lease.step(), i);
  }
  int64_t end = kN;
  for (auto it = kTensors.rbegin(); it != kTensors.rend(); ++it) {
    end -= *it;
    RETURN_IF_ERROR(m.exchange->Ready(end, *it));
  }
  return absl::OkStatus();
}

absl::Status FullStep(Member& m, const v1::NextTaskResponse& lease,
                      int seed_offset = 0) {
  RETURN_IF_ERROR(BeginAndReduce(m, lease, seed_offset));
  return m.exchange->FinishStep();
}

// Runs `step` on every member of `ring` at once; `keep_state` sets the
// leases' keep_state, `seed_offset` shifts the members' gradients.
void RunStep(const std::vector<Member*>& ring, int64_t step,
             int64_t ring_generation, int64_t fence = 0,
             bool keep_state = false, int seed_offset = 0) {
  std::vector<absl::Status> statuses(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back([&, r] {
      v1::NextTaskResponse lease = Lease(step, ring_generation, fence, ring, r);
      lease.set_keep_state(keep_state);
      statuses[r] = FullStep(*ring[r], lease, seed_offset);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ring.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << "step " << step << " rank " << r << ": " << statuses[r];
  }
}

// Runs `step` on every member of `ring` at once, each lease edited by
// `edit`, and returns the members' reports (rank order).
std::vector<v1::StepReport> RunReportedStep(
    const std::vector<Member*>& ring, int64_t step, int64_t ring_generation,
    const std::function<void(v1::NextTaskResponse&)>& edit) {
  std::vector<absl::Status> statuses(ring.size());
  std::vector<v1::StepReport> reports(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back([&, r] {
      v1::NextTaskResponse lease = Lease(step, ring_generation, 0, ring, r);
      edit(lease);
      statuses[r] = FullStep(*ring[r], lease);
      if (statuses[r].ok())
        statuses[r] = ring[r]->exchange->AddToReport(reports[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ring.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << "step " << step << " rank " << r << ": " << statuses[r];
  }
  return reports;
}

std::vector<int> Seeds(const std::vector<Member*>& ring) {
  return testing::RingSeeds(ring);
}

void ExpectAllEqual(const std::vector<Member*>& ring, const Reference& ref,
                    int64_t steps) {
  for (const Member* m : ring) {
    EXPECT_THAT(m->Params(), Pointwise(FloatEq(), ref.Params())) << m->id;
    EXPECT_EQ(m->exchange->steps_applied(), steps) << m->id;
  }
}

// A ring without tables: end-of-training work and committed-step tracking,
// no rows, no partial buffers (a step that brings its own is refused).
TEST(RingExchangeTest, CapabilitiesWithoutTables) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(1, &hubs);
  RingExchange* ring = owned[0]->exchange.get();
  GradientExchange& exchange = *ring;
  EXPECT_EQ(exchange.capability<EndOfTrainingExchange>(),
            static_cast<EndOfTrainingExchange*>(ring));
  EXPECT_EQ(exchange.capability<CommittedStepsObserver>(),
            static_cast<CommittedStepsObserver*>(ring));
  EXPECT_EQ(exchange.capability<EmbeddingRowExchange>(), nullptr);
  EXPECT_EQ(exchange.capability<PartialBufferExchange>(), nullptr);
  const absl::StatusOr<EmbeddingRowExchange*> rows =
      exchange.RequireCapability<EmbeddingRowExchange>();
  EXPECT_TRUE(absl::IsInvalidArgument(rows.status()));
  EXPECT_THAT(std::string(rows.status().message()),
              ::testing::HasSubstr("ring exchange has no embedding tables"));
  // Without a step the end of training has nothing to gather.
  EXPECT_TRUE(
      exchange.capability<EndOfTrainingExchange>()->EndOfTraining().ok());
}

TEST(RingExchangeTest, ThreeRanksMatchTheReference) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(3, &hubs);
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  Reference ref;
  for (int64_t step = 0; step < 4; ++step) {
    RunStep(ring, step, /*ring_generation=*/1);
    ref.Step(step, Seeds(ring));
  }
  ExpectAllEqual(ring, ref, 4);
  EXPECT_NE(ref.Params(), Initial());  // the steps moved the weights
}

TEST(RingExchangeTest, MembersLeaveAndJoinAcrossRingGenerations) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(3, &hubs);
  Reference ref;
  // Generation 1: w0 w1 w2.
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  for (int64_t step = 0; step < 3; ++step) {
    RunStep(ring, step, 1);
    ref.Step(step, Seeds(ring));
  }
  // Generation 2: w2 left.
  ring = {owned[0].get(), owned[1].get()};
  for (int64_t step = 3; step < 5; ++step) {
    RunStep(ring, step, 2);
    ref.Step(step, Seeds(ring));
  }
  // Generation 3: w3 joins with other weights and no optimizer state; rank
  // 0's weights, momentum and step count are broadcast to it.
  owned.push_back(MakeMember("w3", 3, &hubs, std::vector<float>(kN, 9.0f)));
  ring = {owned[0].get(), owned[1].get(), owned[3].get()};
  for (int64_t step = 5; step < 8; ++step) {
    RunStep(ring, step, 3);
    ref.Step(step, Seeds(ring));
  }
  ExpectAllEqual(ring, ref, 8);
  EXPECT_THAT(hubs.generations(), ::testing::ElementsAre(1, 2, 3));
  // w2 kept the weights of generation 1's end.
  EXPECT_EQ(owned[2]->exchange->steps_applied(), 3);
}

TEST(RingExchangeTest, AbortedStepIsRolledBackAndAppliedOnce) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(3, &hubs);
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  Reference ref;
  for (int64_t step = 0; step < 2; ++step) {
    RunStep(ring, step, 1);
    ref.Step(step, Seeds(ring));
  }
  // Step 2: ranks 0 and 2 apply it; rank 1 reduces its buckets but fails
  // before applying. The coordinator aborts the step.
  absl::Status reduced1;
  std::thread rank1(
      [&] { reduced1 = BeginAndReduce(*ring[1], Lease(2, 1, 0, ring, 1)); });
  absl::Status applied0, applied2;
  std::thread rank0(
      [&] { applied0 = FullStep(*ring[0], Lease(2, 1, 0, ring, 0)); });
  std::thread rank2(
      [&] { applied2 = FullStep(*ring[2], Lease(2, 1, 0, ring, 2)); });
  rank0.join();
  rank2.join();
  rank1.join();
  ASSERT_TRUE(reduced1.ok()) << reduced1;
  ASSERT_TRUE(applied0.ok()) << applied0;
  ASSERT_TRUE(applied2.ok()) << applied2;
  ring[1]->exchange->AbandonStep();
  EXPECT_EQ(ring[0]->exchange->steps_applied(), 3);
  EXPECT_EQ(ring[1]->exchange->steps_applied(), 2);
  // Re-formed under a new ring generation from the state after 2 steps,
  // with other gradients (the step's samples are leased again).
  std::vector<absl::Status> statuses(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = FullStep(*ring[r], Lease(2, 2, 1, ring, r), 100);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  ref.Step(2, {100, 101, 102});
  RunStep(ring, 3, 2, 1);
  ref.Step(3, Seeds(ring));
  ExpectAllEqual(ring, ref, 4);
}

TEST(RingExchangeTest, KeptStatesRollBackToEitherOfTheTwoNewestCheckpoints) {
  // Hybrid mode: the shards are restored to a checkpoint version, steps
  // later; the ring must restart from its dense state then. A shard killed
  // while it wrote its checkpoint of version 4 comes back from version 2:
  // the ring must still hold its state after 2 steps (beyond the recent
  // copies), though a newer keep_state lease (step 4) came since.
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(2, &hubs);
  std::vector<Member*> ring = {owned[0].get(), owned[1].get()};
  Reference ref;
  for (int64_t step = 0; step < 7; ++step) {
    RunStep(ring, step, 1, /*fence=*/0, /*keep=*/step == 2 || step == 4, 0);
    if (step < 2) ref.Step(step, Seeds(ring));
  }
  // Back to 2; the replay (other samples) keeps step 4's state anew: the
  // old copy of 4 belonged to the undone history.
  for (int64_t step = 2; step < 6; ++step) {
    RunStep(ring, step, 2, /*fence=*/0, /*keep=*/step == 4, 100);
    ref.Step(step, {100, 101});
  }
  ExpectAllEqual(ring, ref, 6);
  for (int64_t step = 4; step < 5; ++step) {
    RunStep(ring, step, 3, /*fence=*/0, false, 200);
  }
  Reference again;
  for (int64_t step = 0; step < 2; ++step) again.Step(step, Seeds(ring));
  for (int64_t step = 2; step < 4; ++step) again.Step(step, {100, 101});
  again.Step(4, {200, 201});
  ExpectAllEqual(ring, again, 5);
}

// Hybrid: the shards went back to a checkpoint (step 2) that no member of
// the new ring holds a copy of: w2 joined at step 3, and the members that
// kept the copy are gone. The ring must not stall: rank 0 goes on from its
// own state (with a warning) and the others take it.
TEST(RingExchangeTest, ARingWhoseMembersAllJoinedAfterTheCheckpointGoesOn) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(3, &hubs);
  Reference ref;
  std::vector<Member*> ring = {owned[0].get(), owned[1].get()};
  for (int64_t step = 0; step < 3; ++step) {
    RunStep(ring, step, 1, /*fence=*/0, /*keep_state=*/step == 2);
    ref.Step(step, Seeds(ring));
  }
  ring = {owned[0].get(), owned[1].get(), owned[2].get()};  // w2 joins
  for (int64_t step = 3; step < 6; ++step) {
    RunStep(ring, step, 2);
    ref.Step(step, Seeds(ring));
  }
  // w0 and w1 leave; a new member w3 joins; the job goes back to step 2.
  owned.push_back(MakeMember("w3", 3, &hubs, std::vector<float>(kN, 9.0f)));
  ring = {owned[2].get(), owned[3].get()};
  RunStep(ring, 2, 3);
  ref.Step(2, Seeds(ring));  // applied on top of w2's state after 6 steps
  for (const Member* m : ring) {
    EXPECT_THAT(m->Params(), Pointwise(FloatEq(), ref.Params())) << m->id;
    EXPECT_EQ(m->exchange->steps_applied(), 7) << m->id;
  }
}

TEST(RingExchangeTest, FailedCollectiveIsGivenUpAndRedoneInANewRing) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(3, &hubs);
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  Reference ref;
  RunStep(ring, 0, 1);
  ref.Step(0, Seeds(ring));
  // Step 1: rank 1's link breaks; nobody can finish. Rank 1 fails on its
  // own; the others are cancelled by the newer fence (what the heartbeat
  // thread does once the coordinator aborted the step).
  hubs.FailNextSend(1, 1);
  std::vector<absl::Status> statuses(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back(
        [&, r] { statuses[r] = FullStep(*ring[r], Lease(1, 1, 0, ring, r)); });
  }
  threads[1].join();
  EXPECT_TRUE(absl::IsUnavailable(statuses[1])) << statuses[1];
  ring[0]->exchange->CancelIfOlder(1);
  ring[2]->exchange->CancelIfOlder(1);
  threads[0].join();
  threads[2].join();
  EXPECT_TRUE(absl::IsCancelled(statuses[0])) << statuses[0];
  EXPECT_TRUE(absl::IsCancelled(statuses[2])) << statuses[2];
  for (Member* m : ring) {
    m->exchange->AbandonStep();
    EXPECT_EQ(m->exchange->steps_applied(), 1) << m->id;
  }
  for (int64_t step = 1; step < 3; ++step) {
    RunStep(ring, step, 2, 1);
    ref.Step(step, Seeds(ring));
  }
  ExpectAllEqual(ring, ref, 3);
}

TEST(RingExchangeTest, CommittedStepsBoundTheRollbackCopies) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned;
  for (int r = 0; r < 4; ++r) {
    owned.push_back(
        MakeMember("w" + std::to_string(r), r % 2, &hubs, Initial()));
  }
  // Told of the committed steps (the coordinator applied every step before
  // the next one), and not told: one copy against three.
  std::vector<Member*> told = {owned[0].get(), owned[1].get()};
  std::vector<Member*> untold = {owned[2].get(), owned[3].get()};
  Reference ref;
  for (int64_t step = 0; step < 6; ++step) {
    for (Member* m : told) m->exchange->ObserveCommitted(step);
    RunStep(told, step, 1);
    RunStep(untold, step, 101);
    ref.Step(step, Seeds(told));
  }
  for (Member* m : told) EXPECT_EQ(m->exchange->rollback_copies(), 1) << m->id;
  for (Member* m : untold) {
    EXPECT_EQ(m->exchange->rollback_copies(), 3) << m->id;
  }
  ExpectAllEqual(told, ref, 6);
  ExpectAllEqual(untold, ref, 6);

  // Step 5 (not committed) is aborted: the one copy is the state after 5
  // steps, and the ring re-forms from it.
  Reference redo;
  for (int64_t step = 0; step < 5; ++step) redo.Step(step, Seeds(told));
  RunStep(told, 5, 2, /*fence=*/1, /*keep_state=*/false, 100);
  redo.Step(5, {100, 101});
  ExpectAllEqual(told, redo, 6);
  for (Member* m : told) EXPECT_EQ(m->exchange->rollback_copies(), 1) << m->id;

  // An evaluation asks for the weights after 6 steps (it asks only for
  // committed ones): the copy of the state after 5 goes before the
  // snapshot is taken, also on a member never told of commits.
  for (Member* m : {told[0], untold[0]}) {
    EXPECT_FALSE(m->publisher.Get(6).ok());  // not yet published: wanted
    m->exchange->BetweenSteps();
    EXPECT_EQ(m->exchange->rollback_copies(), 0) << m->id;
    auto snapshot = m->publisher.Get(6);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    // Lent: the params themselves, no copy, until the next step writes them.
    EXPECT_TRUE(m->publisher.lent());
    const std::vector<float> params = m->Params();
    std::string bytes;
    (*snapshot)->ReadValues(0, static_cast<int64_t>(params.size()), &bytes);
    ASSERT_EQ(bytes.size(), params.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(bytes.data(), params.data(), bytes.size()), 0)
        << m->id;
  }
  // The next step takes the snapshot back before it writes the params: it
  // was read, so it goes.
  RunStep(told, 6, 2);
  EXPECT_FALSE(told[0]->publisher.lent());
  EXPECT_TRUE(absl::IsUnavailable(told[0]->publisher.Get(6).status()));
}

// Ring checkpoints: the members write their parts when a lease asks (each
// its 1/w, or rank 0 the whole state as one part); a ring of newcomers
// (every member that held the state is gone) resumes from that checkpoint
// and goes on exactly as the single process does.
void ExpectNewcomersResumeFromTheCheckpoint(bool from_rank0) {
  testing::RingHubs hubs;
  InMemoryFileSystem fs;
  auto make = [&](const std::string& id, int seed, std::vector<float> init) {
    return testing::MakeRingMember(
        id, seed,
        [&hubs](const v1::NextTaskResponse& lease) {
          return hubs.Connect(lease.ring_generation(), lease.ring_size(),
                              lease.rank());
        },
        init, 0, &fs, "/ck", from_rank0);
  };
  std::vector<std::unique_ptr<Member>> owned;
  owned.push_back(make("w0", 0, Initial()));
  owned.push_back(make("w1", 1, Initial()));
  std::vector<Member*> ring = {owned[0].get(), owned[1].get()};
  Reference ref;
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<v1::StepReport> reports = RunReportedStep(
        ring, step, 1,
        [step](v1::NextTaskResponse& l) { l.set_checkpoint(step == 2); });
    ref.Step(step, Seeds(ring));
    for (const v1::StepReport& report : reports) {
      EXPECT_EQ(report.checkpoint_written(), step == 2);
      EXPECT_EQ(report.checkpoint_error(), "");
    }
  }
  // Rank 0 wrote one part of the whole state, or each member one of two.
  EXPECT_TRUE(fs.ReadFile(CheckpointPath("/ck", 0, 3)).ok());
  EXPECT_EQ(fs.ReadFile(CheckpointPath("/ck", 1, 3)).ok(), !from_rank0);
  absl::StatusOr<RingCheckpoint> read =
      LoadRingCheckpoint(&fs, "/ck", "job", 3, kN, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  // Step 3 is applied, then every member is lost before the job records it.
  RunStep(ring, 3, 1);
  owned.push_back(make("w2", 2, std::vector<float>(kN, 9.0f)));
  owned.push_back(make("w3", 3, std::vector<float>(kN, -1.0f)));
  ring = {owned[2].get(), owned[3].get()};
  RunReportedStep(ring, 3, 2,
                  [](v1::NextTaskResponse& l) { l.set_restore_checkpoint(3); });
  ref.Step(3, Seeds(ring));
  ExpectAllEqual(ring, ref, 4);
}

TEST(RingExchangeTest, RingOfNewcomersResumesFromTheMembersCheckpoint) {
  ExpectNewcomersResumeFromTheCheckpoint(/*from_rank0=*/false);
}

TEST(RingExchangeTest, RingOfNewcomersResumesFromRankZerosWholeCheckpoint) {
  ExpectNewcomersResumeFromTheCheckpoint(/*from_rank0=*/true);
}

TEST(RingExchangeTest, CheckpointThatCannotBeLoadedFailsTheStepAndSaysWhy) {
  testing::RingHubs hubs;
  InMemoryFileSystem fs;
  std::unique_ptr<Member> m = testing::MakeRingMember(
      "w0", 0,
      [&hubs](const v1::NextTaskResponse& lease) {
        return hubs.Connect(lease.ring_generation(), lease.ring_size(),
                            lease.rank());
      },
      Initial(), 0, &fs, "/ck");
  v1::NextTaskResponse lease = Lease(5, 1, 0, {m.get()}, 0);
  lease.set_restore_checkpoint(5);  // never written
  const absl::Status begun = BeginAndReduce(*m, lease);
  EXPECT_TRUE(absl::IsAborted(begun)) << begun;
  m->exchange->AbandonStep();
  v1::StepReport failed;
  m->exchange->AddToFailedReport(failed);
  EXPECT_THAT(failed.restore_error(), ::testing::HasSubstr("NOT_FOUND"));
  EXPECT_EQ(m->exchange->steps_applied(), 0);  // nothing changed
  EXPECT_THAT(m->Params(), Pointwise(FloatEq(), Initial()));
}

TEST(RingExchangeTest, CheckpointAskedWithoutADirectoryIsReportedNotWritten) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned = MakeMembers(1, &hubs);
  const std::vector<v1::StepReport> reports =
      RunReportedStep({owned[0].get()}, 0, 1,
                      [](v1::NextTaskResponse& l) { l.set_checkpoint(true); });
  EXPECT_FALSE(reports[0].checkpoint_written());
  EXPECT_THAT(reports[0].checkpoint_error(),
              ::testing::HasSubstr("no ring checkpoint directory"));
  EXPECT_EQ(owned[0]->exchange->steps_applied(), 1);  // the step stands
}

}  // namespace
}  // namespace ferry
