// RingExchange in ring pipelines (one ring per stage), several ranks in one
// process over in-memory rings: a stage member all-reduces and applies only
// its stage's range, a member training alone every stage's; a new ring
// generation and the end of the job gather every stage from a member that
// holds it current, so every member ends with the single-process weights.
// Digests and what is published name the current ranges only.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "tests/worker/ring_exchange_fixture.h"
#include "tests/worker/worker_test_fixture.h"
#include "worker/pipeline_lease_trainer.h"
#include "worker/ring_exchange.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::Pointwise;

using testing::kRingN;
using testing::kSamplesPerMember;
using testing::RingGrad;
using Member = testing::RingMember;
using Reference = testing::RingReference;
constexpr int kStages = 2;
// Stage 0 holds tensor 0, stage 1 tensors 1 and 2.
const std::vector<FlatRange> kStageRanges = {{0, 7}, {7, 15}};

// Each ring (the whole one or a stage's) gets its own in-memory hub: the
// key mixes the generation with its members.
int64_t HubKey(const v1::NextTaskResponse& lease) {
  std::string members;
  for (const v1::RingMember& m : lease.ring()) members += m.worker_id() + ",";
  return lease.ring_generation() * 1000 +
         static_cast<int64_t>(std::hash<std::string>()(members) % 997);
}

std::unique_ptr<Member> MakeMember(const std::string& id, int seed,
                                   testing::RingHubs* hubs,
                                   const std::vector<float>& init) {
  return testing::MakeRingMember(
      id, seed,
      [hubs](const v1::NextTaskResponse& lease) {
        return hubs->Connect(HubKey(lease), lease.ring_size(), lease.rank());
      },
      init, /*digest_every=*/1);
}

std::vector<float> Range(const Member& m, int stage) {
  return m.Params(kStageRanges[stage].begin, kStageRanges[stage].end);
}
std::vector<float> Range(const Reference& ref, int stage) {
  return ref.Params(kStageRanges[stage].begin, kStageRanges[stage].end);
}

// One pipeline step of rank `rank`: a stage member writes its replica's
// gradient (its members' samples) on its stage's range and zeros elsewhere,
// a member alone its own gradient everywhere.
absl::Status PipelineStep(Member& m, const std::vector<Member*>& ring, int rank,
                          int64_t step, int64_t generation,
                          v1::StepReport* report) {
  const v1::NextTaskResponse lease =
      testing::RingLease(step, generation, /*fence=*/0, ring, rank);
  const int size = static_cast<int>(ring.size());
  const PipelineRole role = PipelineRoleOf(rank, size, kStages);
  ExchangeStep es = ExchangeStep::Of(&lease, generation, kSamplesPerMember);
  es.stage_ranges = kStageRanges;
  es.stage_rings = StageRingsOf(rank, size, kStages);
  RETURN_IF_ERROR(m.exchange->BeginStep(es));
  for (int64_t i = 0; i < kRingN; ++i) {
    float g = 0.0f;
    if (role.stages == 1) {
      g = RingGrad(m.seed, step, i);
    } else if (i >= kStageRanges[role.stage].begin &&
               i < kStageRanges[role.stage].end) {
      for (int s = 0; s < role.stages; ++s) {
        g += RingGrad(ring[role.first_rank + s]->seed, step, i);
      }
    }
    m.grads.data()[i] = g;
  }
  RETURN_IF_ERROR(m.exchange->Ready(0, kRingN));
  RETURN_IF_ERROR(m.exchange->FinishStep());
  return m.exchange->AddToReport(*report);
}

// Runs `step` on every member of `ring` at once; returns their reports.
std::vector<v1::StepReport> RunStep(const std::vector<Member*>& ring,
                                    int64_t step, int64_t generation) {
  std::vector<absl::Status> statuses(ring.size());
  std::vector<v1::StepReport> reports(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = PipelineStep(*ring[r], ring, static_cast<int>(r), step,
                                 generation, &reports[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ring.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << "step " << step << " rank " << r << ": " << statuses[r];
  }
  return reports;
}

std::vector<std::pair<int64_t, int64_t>> DigestRanges(
    const v1::StepReport& report) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const v1::RangeDigest& d : report.range_digests()) {
    ranges.emplace_back(d.begin(), d.end());
  }
  return ranges;
}

// Each stage's range is its layers' tensors, the stages back to back.
TEST(StageRingsTest, StageParamRangesAreTheStagesLayers) {
  const auto def = ResolveModelSpec("64-32-16-10");
  ASSERT_TRUE(def.ok()) << def.status();
  const auto layout = ModelParameterLayout(*def);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // Linear 64-32 | ReLU, Linear 32-16, ReLU, Linear 16-10.
  const std::vector<FlatRange> ranges =
      StageParamRanges(*def, *layout, {{0, 2}, {2, 5}});
  EXPECT_THAT(ranges,
              ElementsAre(FlatRange{0, 64 * 32 + 32},
                          FlatRange{64 * 32 + 32, layout->total_elements()}));
  EXPECT_EQ(layout->total_elements(),
            64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10);
}

TEST(StageRingsTest, OneRingPerStageWithTheMembersAlone) {
  // 3 members, 2 stages: ranks 0 and 1 are a replica, rank 2 is alone.
  const auto rank0 = StageRingsOf(0, 3, 2);
  ASSERT_EQ(rank0.size(), 1u);
  EXPECT_EQ(rank0[0].stage, 0);
  EXPECT_THAT(rank0[0].ranks, ElementsAre(0, 2));
  const auto rank1 = StageRingsOf(1, 3, 2);
  ASSERT_EQ(rank1.size(), 1u);
  EXPECT_THAT(rank1[0].ranks, ElementsAre(1, 2));
  const auto alone = StageRingsOf(2, 3, 2);
  ASSERT_EQ(alone.size(), 2u);
  EXPECT_THAT(alone[1].ranks, ElementsAre(1, 2));
  // Two replicas of three stages: rank 4 is stage 1 of replica 1.
  const auto deep = StageRingsOf(4, 6, 3);
  ASSERT_EQ(deep.size(), 1u);
  EXPECT_EQ(deep[0].stage, 1);
  EXPECT_THAT(deep[0].ranks, ElementsAre(1, 4));
  // One replica, or fewer members than stages: the whole ring.
  EXPECT_TRUE(StageRingsOf(1, 2, 2).empty());
  EXPECT_TRUE(StageRingsOf(0, 1, 2).empty());
  EXPECT_TRUE(StageRingsOf(0, 4, 1).empty());
  // BatchNorm's state: one more ring, index `stages`, of every member;
  // none without stage rings.
  const auto with_state = StageRingsOf(1, 3, 2, /*state_ring=*/true);
  ASSERT_EQ(with_state.size(), 2u);
  EXPECT_EQ(with_state[0].stage, 1);
  EXPECT_EQ(with_state[1].stage, 2);
  EXPECT_THAT(with_state[1].ranks, ElementsAre(0, 1, 2));
  EXPECT_TRUE(StageRingsOf(1, 2, 2, /*state_ring=*/true).empty());
}

TEST(StageRingsTest, HoldersAreEachStagesRingOrEveryMember) {
  // 3 members, 2 stages: stage 0 held by 0 and 2 (alone), stage 1 by 1 and
  // 2; the state range by everyone.
  EXPECT_THAT(
      StageHoldersOf(3, 2, /*state_ring=*/true),
      ElementsAre(ElementsAre(0, 2), ElementsAre(1, 2), ElementsAre(0, 1, 2)));
  // One replica: the whole buffer is all-reduced, every member holds all.
  EXPECT_THAT(StageHoldersOf(2, 2),
              ElementsAre(ElementsAre(0, 1), ElementsAre(0, 1)));
  // Two replicas of three stages.
  EXPECT_THAT(
      StageHoldersOf(6, 3),
      ElementsAre(ElementsAre(0, 3), ElementsAre(1, 4), ElementsAre(2, 5)));
}

// BatchNorm's state after the stages' parameters: the buffers of a PS stage
// hold its parameters and its state back to back.
TEST(ExchangeBuffersTest, SegmentsMapFlatRangesToTheirIndex) {
  ExchangeBuffers whole;
  whole.num_elements = 10;
  EXPECT_EQ(whole.IndexOf(3, 7), 3);
  EXPECT_EQ(whole.IndexOf(3, 8), -1);
  EXPECT_EQ(whole.IndexOf(-1, 1), -1);
  ExchangeBuffers stage;
  stage.segments = {{4, 9}, {20, 23}};
  stage.num_elements = 8;
  EXPECT_EQ(stage.IndexOf(4, 5), 0);
  EXPECT_EQ(stage.IndexOf(6, 2), 2);
  EXPECT_EQ(stage.IndexOf(20, 3), 5);
  EXPECT_EQ(stage.IndexOf(22, 1), 7);
  EXPECT_EQ(stage.IndexOf(8, 2), -1);   // past its segment
  EXPECT_EQ(stage.IndexOf(10, 1), -1);  // not held
  EXPECT_EQ(stage.IndexOf(4, -1), -1);
}

TEST(RingExchangeStagesTest, StagesAllReduceTheirRangesAndGatherOnChange) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned;
  for (int r = 0; r < 3; ++r) {
    owned.push_back(
        MakeMember("w" + std::to_string(r), r, &hubs, testing::RingInitial()));
  }
  Reference ref;
  // Generation 1: w0 and w1 are a replica, w2 trains alone: one ring per
  // stage.
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  std::vector<v1::StepReport> reports;
  for (int64_t step = 0; step < 3; ++step) {
    reports = RunStep(ring, step, 1);
    ref.Step(step, testing::RingSeeds(ring));
  }
  EXPECT_THAT(Range(*owned[0], 0), Pointwise(FloatEq(), Range(ref, 0)));
  EXPECT_THAT(Range(*owned[1], 1), Pointwise(FloatEq(), Range(ref, 1)));
  EXPECT_THAT(owned[2]->Params(), Pointwise(FloatEq(), ref.Params()));
  // A stage member's other stage is stale: it was never all-reduced there.
  EXPECT_NE(Range(*owned[0], 1), Range(ref, 1));
  // Digests per current range, equal between the holders of a range.
  EXPECT_FALSE(reports[0].has_weights_digest());
  EXPECT_THAT(DigestRanges(reports[0]), ElementsAre(std::make_pair(0, 7)));
  EXPECT_THAT(DigestRanges(reports[1]), ElementsAre(std::make_pair(7, 15)));
  ASSERT_EQ(reports[2].range_digests_size(), 2);
  EXPECT_EQ(reports[0].range_digests(0).digest(),
            reports[2].range_digests(0).digest());
  EXPECT_EQ(reports[1].range_digests(0).digest(),
            reports[2].range_digests(1).digest());
  // What a stage member publishes is its current range only.
  EXPECT_FALSE(owned[0]->publisher.Get(3).ok());  // wanted: not yet published
  owned[0]->exchange->BetweenSteps();
  auto snapshot = owned[0]->publisher.Get(3);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_THAT((*snapshot)->ranges, ElementsAre(kStageRanges[0]));

  // Generation 2: w2 left; one replica holds each stage once, so the whole
  // buffer is all-reduced again, after every stage was gathered from its
  // holder.
  ring = {owned[0].get(), owned[1].get()};
  for (int64_t step = 3; step < 5; ++step) {
    reports = RunStep(ring, step, 2);
    ref.Step(step, testing::RingSeeds(ring));
  }
  for (Member* m : ring) {
    EXPECT_THAT(m->Params(), Pointwise(FloatEq(), ref.Params())) << m->id;
    EXPECT_EQ(m->exchange->steps_applied(), 5) << m->id;
  }
  EXPECT_EQ(reports[0].range_digests_size(), 2);

  // Generation 3: w3 joins with nothing and trains alone: it gets every
  // stage gathered from the replica, then stage rings again.
  owned.push_back(MakeMember("w3", 3, &hubs, std::vector<float>(kRingN, 9.0f)));
  ring = {owned[0].get(), owned[1].get(), owned[3].get()};
  for (int64_t step = 5; step < 7; ++step) {
    RunStep(ring, step, 3);
    ref.Step(step, testing::RingSeeds(ring));
  }
  EXPECT_THAT(owned[3]->Params(), Pointwise(FloatEq(), ref.Params()));
  EXPECT_NE(Range(*owned[1], 0), Range(ref, 0));

  // The end of the job: every member gathers every stage.
  std::vector<absl::Status> ended(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back(
        [&, r] { ended[r] = ring[r]->exchange->EndOfTraining(); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ring.size(); ++r) {
    EXPECT_TRUE(ended[r].ok()) << ended[r];
    EXPECT_THAT(ring[r]->Params(), Pointwise(FloatEq(), ref.Params()))
        << ring[r]->id;
    EXPECT_EQ(ring[r]->exchange->steps_applied(), 7);
  }
}

// Both holders of stage 1 gone at once: the new ring resumes that stage
// from rank 0's older copy (with a warning), and every member agrees.
TEST(RingExchangeStagesTest, StageWithoutHoldersResumesFromRankZerosCopy) {
  testing::RingHubs hubs;
  std::vector<std::unique_ptr<Member>> owned;
  for (int r = 0; r < 3; ++r) {
    owned.push_back(
        MakeMember("w" + std::to_string(r), r, &hubs, testing::RingInitial()));
  }
  std::vector<Member*> ring = {owned[0].get(), owned[1].get(), owned[2].get()};
  for (int64_t step = 0; step < 2; ++step) RunStep(ring, step, 1);
  // w1 (stage 1) and w2 (alone, both stages) are gone; w3 joins.
  owned.push_back(MakeMember("w3", 3, &hubs, std::vector<float>(kRingN, 9)));
  ring = {owned[0].get(), owned[3].get()};
  std::vector<v1::StepReport> reports = RunStep(ring, 2, 2);
  EXPECT_EQ(owned[0]->Params(), owned[3]->Params());
  ASSERT_EQ(reports[0].range_digests_size(), 2);
  ASSERT_EQ(reports[1].range_digests_size(), 2);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(reports[0].range_digests(s).digest(),
              reports[1].range_digests(s).digest());
  }
  EXPECT_EQ(owned[3]->exchange->steps_applied(), 3);
  // Stage 0 has its whole history; stage 1 went on from w0's copy, the
  // initial values with no momentum, so only step 2 moved it.
  Reference full;
  for (int64_t step = 0; step < 2; ++step) full.Step(step, {0, 1, 2});
  full.Step(2, {0, 3});
  Reference from_initial;
  from_initial.Step(2, {0, 3});
  EXPECT_THAT(Range(*owned[0], 0), Pointwise(FloatEq(), Range(full, 0)));
  EXPECT_THAT(Range(*owned[0], 1),
              Pointwise(FloatEq(), Range(from_initial, 1)));
}

}  // namespace
}  // namespace ferry
