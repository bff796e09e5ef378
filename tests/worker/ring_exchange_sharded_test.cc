// RingExchange with the optimizer state sharded across the ring (ZeRO
// stage 1): every member's weights equal the single-process reference
// while each holds only its slice of the optimizer state, through rings
// that grow, an aborted step rolled back, a ring that lost a slice (refused)
// and its resume from the ring checkpoint.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/file_system.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/ring_exchange_fixture.h"
#include "tests/worker/worker_test_fixture.h"
#include "worker/ring_exchange.h"

namespace ferry {
namespace {

using ::testing::FloatEq;
using ::testing::HasSubstr;
using testing::kRingN;
using testing::kSamplesPerMember;
using ::testing::Pointwise;
using testing::RingMember;
using testing::RingReference;

class ShardedRingTest : public ::testing::Test {
 protected:
  RingMember* Add(
      const std::string& id, int seed,
      const std::vector<float>& init = testing::RingInitial(),
      const std::function<void(RingExchangeOptions&)>& edit = nullptr) {
    members_.push_back(testing::MakeRingMember(
        id, seed,
        [this](const v1::NextTaskResponse& lease) {
          return hubs_.Connect(lease.ring_generation(), lease.ring_size(),
                               lease.rank());
        },
        init, 0, &fs_, "/ck", false, /*shard_optimizer_state=*/true,
        /*agree_on_absent=*/false, edit));
    return members_.back().get();
  }

  // One member's whole step; `edit` may change its lease.
  static absl::Status Step(
      RingMember& m, v1::NextTaskResponse lease, v1::StepReport* report,
      const std::function<void(v1::NextTaskResponse&)>& edit) {
    if (edit) edit(lease);
    ExchangeStep step;
    step.lease = &lease;
    step.num_samples = kSamplesPerMember;
    RETURN_IF_ERROR(m.exchange->BeginStep(step));
    for (int64_t i = 0; i < kRingN; ++i) {
      m.grads.data()[i] = testing::RingGrad(m.seed, lease.step(), i);
    }
    int64_t end = kRingN;
    for (auto it = testing::kRingTensors.rbegin();
         it != testing::kRingTensors.rend(); ++it) {
      end -= *it;
      RETURN_IF_ERROR(m.exchange->Ready(end, *it));
    }
    RETURN_IF_ERROR(m.exchange->FinishStep());
    return report == nullptr ? absl::OkStatus()
                             : m.exchange->AddToReport(*report);
  }

  // `step` on every member of `ring` at once; the statuses by rank.
  std::vector<absl::Status> TryStep(
      const std::vector<RingMember*>& ring, int64_t step, int64_t generation,
      const std::function<void(v1::NextTaskResponse&)>& edit = nullptr,
      std::vector<v1::StepReport>* reports = nullptr) {
    std::vector<absl::Status> statuses(ring.size());
    if (reports != nullptr) reports->assign(ring.size(), v1::StepReport());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < ring.size(); ++r) {
      threads.emplace_back([&, r] {
        statuses[r] =
            Step(*ring[r], testing::RingLease(step, generation, 0, ring, r),
                 reports == nullptr ? nullptr : &(*reports)[r], edit);
      });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }

  void RunSteps(const std::vector<RingMember*>& ring, int64_t from, int64_t to,
                int64_t generation) {
    for (int64_t step = from; step < to; ++step) {
      for (const absl::Status& s : TryStep(ring, step, generation)) {
        ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
      }
      ref_.Step(step, testing::RingSeeds(ring));
    }
  }

  void ExpectReference(const std::vector<RingMember*>& ring, int64_t steps) {
    for (const RingMember* m : ring) {
      EXPECT_THAT(m->Params(), Pointwise(FloatEq(), ref_.Params())) << m->id;
      EXPECT_EQ(m->exchange->steps_applied(), steps) << m->id;
    }
  }

  testing::RingHubs hubs_;
  InMemoryFileSystem fs_;
  std::vector<std::unique_ptr<RingMember>> members_;
  RingReference ref_;
};

TEST_F(ShardedRingTest, EachMemberHoldsItsSliceAndTheWeightsMatch) {
  for (int size : {2, 3, 4}) {
    SCOPED_TRACE(size);
    members_.clear();
    ref_ = RingReference();
    std::vector<RingMember*> ring;
    for (int r = 0; r < size; ++r) {
      ring.push_back(Add("w" + std::to_string(r), r));
      // Nothing is held before the first ring.
      EXPECT_EQ(ring.back()->exchange->optimizer_state_elements(), 0);
    }
    RunSteps(ring, 0, 4, /*generation=*/size);
    ExpectReference(ring, 4);
    // Momentum: one buffer, the member's ShardRange slice of it.
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(ring[r]->exchange->optimizer_state_elements(),
                ShardRange(kRingN, size, r).size());
    }
  }
  EXPECT_NE(ref_.Params(), testing::RingInitial());
}

TEST_F(ShardedRingTest, AGrowingRingHandsEachNewMemberItsSlice) {
  std::vector<RingMember*> ring = {Add("w0", 0), Add("w1", 1)};
  RunSteps(ring, 0, 3, 1);
  // w2 joins with other weights and no state: the slices are redrawn for
  // three members and the momentum moves with them.
  ring.push_back(Add("w2", 2, std::vector<float>(kRingN, 9.0f)));
  RunSteps(ring, 3, 6, 2);
  ExpectReference(ring, 6);
  // A new generation of the same members (a restarted coordinator).
  RunSteps(ring, 6, 8, 3);
  ExpectReference(ring, 8);
}

TEST_F(ShardedRingTest, AnAbortedStepGoesBackToEachMembersCopy) {
  std::vector<RingMember*> ring = {Add("w0", 0), Add("w1", 1), Add("w2", 2)};
  RunSteps(ring, 0, 2, 1);
  // Step 2 is applied by every member, then the coordinator aborts it (its
  // record was lost): the next ring starts from the state after 2 steps.
  for (const absl::Status& s : TryStep(ring, 2, 1)) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ring[0]->exchange->steps_applied(), 3);
  RunSteps(ring, 2, 4, 2);
  ExpectReference(ring, 4);
}

TEST_F(ShardedRingTest, ALostSliceIsRefusedThenResumedFromTheCheckpoint) {
  std::vector<RingMember*> ring = {Add("w0", 0), Add("w1", 1), Add("w2", 2)};
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<v1::StepReport> reports;
    for (const absl::Status& s : TryStep(
             ring, step, 1,
             [step](v1::NextTaskResponse& l) { l.set_checkpoint(step == 2); },
             &reports)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (const v1::StepReport& report : reports) {
      EXPECT_EQ(report.checkpoint_written(), step == 2)
          << report.checkpoint_error();
    }
    ref_.Step(step, testing::RingSeeds(ring));
  }
  RunSteps(ring, 3, 4, 1);  // after the checkpoint
  // w1 is lost: slice 1 of 3 of the state after 4 steps is gone.
  ring = {ring[0], ring[2]};
  for (const absl::Status& s : TryStep(ring, 4, 2)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("slice(s) 1 of 3"));
  }
  // The coordinator takes the job back to the checkpoint after 3 steps:
  // every member loads its new slice; step 3 is redone by the two.
  ref_ = RingReference();
  for (int64_t step = 0; step < 3; ++step) ref_.Step(step, {0, 1, 2});
  for (const absl::Status& s : TryStep(ring, 3, 3, [](v1::NextTaskResponse& l) {
         l.set_restore_checkpoint(3);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ref_.Step(3, testing::RingSeeds(ring));
  RunSteps(ring, 4, 6, 3);
  ExpectReference(ring, 6);
}

// The trainer leaves the gradients alone between steps: each member's
// rollback copy lies in its gradient buffer outside its slice. None
// allocates one while every step is committed before the next begins; an
// aborted step goes back to it; a step not committed by then has its copy
// moved out first, and that copy takes the ring back after the next
// step's gradients were written over the old place.
TEST_F(ShardedRingTest, TheRollbackCopyLiesInTheGradientsOutsideTheSlice) {
  const auto lend = [](RingExchangeOptions& o) {
    o.grads_idle_between_steps = true;
    o.prompt_commit_min_bytes = 0;
  };
  const std::vector<float> init = testing::RingInitial();
  std::vector<RingMember*> ring = {Add("w0", 0, init, lend),
                                   Add("w1", 1, init, lend),
                                   Add("w2", 2, init, lend)};
  // Step `step` of ring `generation`, the first `committed` steps known
  // to be committed when it begins.
  const auto step = [&](int64_t step, int64_t generation, int64_t committed) {
    for (const absl::Status& s :
         TryStep(ring, step, generation, [committed](v1::NextTaskResponse& l) {
           l.set_committed_steps(committed);
         })) {
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    }
  };
  for (int64_t s = 0; s < 4; ++s) {
    step(s, 1, s);
    ref_.Step(s, testing::RingSeeds(ring));
  }
  step(4, 1, 4);  // applied, then aborted
  for (int64_t s = 4; s < 6; ++s) {
    step(s, 2, s);
    ref_.Step(s, testing::RingSeeds(ring));
  }
  ExpectReference(ring, 6);
  for (const RingMember* m : ring) {
    EXPECT_EQ(m->exchange->rollback_copies(), 0) << m->id;
    EXPECT_EQ(m->exchange->undo_state_moves(), 0) << m->id;
  }
  // Step 6 is not known to be committed when step 7 begins; both are
  // aborted.
  step(6, 2, 6);
  step(7, 2, 6);
  for (const RingMember* m : ring) {
    EXPECT_EQ(m->exchange->rollback_copies(), 1) << m->id;
    EXPECT_EQ(m->exchange->undo_state_moves(), 1) << m->id;
  }
  for (int64_t s = 6; s < 8; ++s) {
    step(s, 3, 6);
    ref_.Step(s, testing::RingSeeds(ring));
  }
  ExpectReference(ring, 8);
}

TEST(ShardedRingOptionsTest, RefusesWhatItCannotShard) {
  std::unique_ptr<ComputeBackend> backend = *MakeBackend(DeviceChoice::kCpu, 1);
  std::vector<float> params(kRingN), grads(kRingN);
  const auto options = [&](bool rank0, GradientEncoding encoding) {
    RingExchangeOptions o;
    o.backend = backend.get();
    o.connect = [](const v1::NextTaskResponse&)
        -> absl::StatusOr<std::unique_ptr<RingTransport>> {
      return absl::UnavailableError("unused");
    };
    o.tensor_sizes = testing::kRingTensors;
    o.bucket_elements = 8;
    o.optimizer = testing::RingMomentum();
    o.params = params.data();
    o.grads = o.host_grads = grads.data();
    o.shard_optimizer_state = true;
    o.checkpoint_from_rank0 = rank0;
    o.compression.encoding = encoding;
    return o;
  };
  EXPECT_THAT(RingExchange::Create(options(true, GradientEncoding::kFp32))
                  .status()
                  .message(),
              HasSubstr("rank-0 checkpoints"));
  EXPECT_THAT(RingExchange::Create(options(false, GradientEncoding::kFp16))
                  .status()
                  .message(),
              HasSubstr("gradient compression"));
  EXPECT_TRUE(
      RingExchange::Create(options(false, GradientEncoding::kFp32)).ok());
}

}  // namespace
}  // namespace ferry
