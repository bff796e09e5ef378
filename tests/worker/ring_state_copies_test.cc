// RingStateCopies on the CPU backend: which copies are kept, reused and
// freed, and what RestoreTo puts back.
#include "worker/ring_state_copies.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compute/compute_backend.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr int64_t kN = 4;

// A live state whose params and momentum say which step they are of.
class RingStateCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = *MakeBackend(DeviceChoice::kCpu, 1);
    params_ = *backend_->Allocate(kN);
    OptimizerConfig config;
    config.kind = OptimizerKind::kMomentum;
    config.lr = 0.5;
    config.momentum = 0.5;
    optimizer_ = std::make_unique<Optimizer>(
        *Optimizer::Create(config, backend_.get(), kN));
    At(0);
  }

  // The live state as after `steps` steps.
  void At(int64_t steps) {
    const float v = static_cast<float>(steps);
    for (int64_t i = 0; i < kN; ++i) {
      params_.data()[i] = v;
      for (DeviceBuffer* b : optimizer_->StateBuffers()) b->data()[i] = -v;
    }
    optimizer_->set_steps_applied(steps);
  }
  RingState State() { return {params_.data(), optimizer_.get(), &current_}; }
  // Keeps the states after steps [from, to).
  void KeepSteps(RingStateCopies& copies, int64_t from, int64_t to,
                 bool checkpoint = false) {
    for (int64_t s = from; s < to; ++s) {
      At(s);
      ASSERT_TRUE(copies.Keep(State(), checkpoint).ok());
    }
  }

  // The live params and momentum hold `steps` and -`steps`.
  void ExpectAt(int64_t steps) {
    const float v = static_cast<float>(steps);
    for (int64_t i = 0; i < kN; ++i) {
      EXPECT_EQ(params_.data()[i], v) << i;
      EXPECT_EQ(optimizer_->StateBuffers()[0]->data()[i], -v) << i;
    }
    EXPECT_EQ(optimizer_->steps_applied(), steps);
  }
  // Lends `memory_` as two spans, the first shorter than a part (params
  // and momentum, kN floats each), so a part goes on in the second.
  void Lend(RingStateCopies& copies) {
    copies.Lend({absl::MakeSpan(memory_.data(), kN - 1),
                 absl::MakeSpan(memory_.data() + kN - 1, kN + 2)});
  }
  // What the next step's backward pass does to the lent memory.
  void Overwrite() { std::fill(memory_.begin(), memory_.end(), 99.0f); }

  std::vector<float> memory_ = std::vector<float>(2 * kN + 1, -7.0f);
  std::unique_ptr<ComputeBackend> backend_;
  DeviceBuffer params_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<bool> current_;
};

TEST_F(RingStateCopiesTest, KeepsTheNewestThreeAndRestoresOne) {
  RingStateCopies copies(backend_.get(), kN, /*committed_steps_final=*/true);
  KeepSteps(copies, 0, 5);
  EXPECT_EQ(copies.rollback_copies(), RingStateCopies::kRollbackCopies);
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(1, 5)));
  EXPECT_TRUE(copies.CheckKept(2, 5).ok());

  At(5);
  ASSERT_TRUE(copies.RestoreTo(2, State()).ok());
  EXPECT_EQ(optimizer_->steps_applied(), 2);
  EXPECT_EQ(params_.data()[kN - 1], 2.0f);
  EXPECT_EQ(optimizer_->StateBuffers()[0]->data()[0], -2.0f);
  // The later states are the undone history; the restored one stays.
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(3, 2)));
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.RestoreTo(4, State())));
  EXPECT_TRUE(copies.CheckKept(2, 2).ok());
}

TEST_F(RingStateCopiesTest, CommittedStepsFreeTheirCopiesOnlyWhenFinal) {
  RingStateCopies final_steps(backend_.get(), kN, true);
  RingStateCopies not_final(backend_.get(), kN, false);
  EXPECT_EQ(final_steps.copy_bytes(), 0);
  for (RingStateCopies* copies : {&final_steps, &not_final}) {
    for (int64_t s = 0; s < 4; ++s) {
      copies->ObserveCommitted(s);  // every step committed before the next
      KeepSteps(*copies, s, s + 1);
    }
  }
  EXPECT_EQ(final_steps.committed(), 3);
  EXPECT_EQ(final_steps.rollback_copies(), 1);  // one buffer, reused
  // One copy: params and momentum.
  EXPECT_EQ(final_steps.copy_bytes(), 2 * kN * int64_t{sizeof(float)});
  EXPECT_EQ(not_final.committed(), 0);
  EXPECT_EQ(not_final.rollback_copies(), 3);

  final_steps.ObserveCommitted(2);  // older: ignored
  EXPECT_EQ(final_steps.committed(), 3);
  final_steps.ObserveCommitted(4);
  final_steps.DropCommitted();
  EXPECT_EQ(final_steps.rollback_copies(), 0);
  not_final.DropCommitted();
  EXPECT_EQ(not_final.rollback_copies(), 3);
}

TEST_F(RingStateCopiesTest, CheckpointCopiesOutliveTheRollbackCopies) {
  RingStateCopies copies(backend_.get(), kN, true);
  KeepSteps(copies, 0, 1, /*checkpoint=*/true);
  KeepSteps(copies, 1, 3);
  KeepSteps(copies, 3, 4, /*checkpoint=*/true);
  KeepSteps(copies, 4, 8);
  copies.ObserveCommitted(8);
  copies.DropCommitted();
  EXPECT_EQ(copies.rollback_copies(), 0);
  // Both checkpoint states are still there; a third replaces the older.
  EXPECT_TRUE(copies.CheckKept(0, 8).ok());
  EXPECT_TRUE(copies.CheckKept(3, 8).ok());
  KeepSteps(copies, 8, 9, /*checkpoint=*/true);
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(0, 9)));

  current_ = {true, false};
  KeepSteps(copies, 9, 10);  // the pipeline flags are kept with the state
  current_ = {false, false};
  At(10);
  ASSERT_TRUE(copies.RestoreTo(3, State()).ok());
  EXPECT_EQ(params_.data()[0], 3.0f);
  EXPECT_EQ(current_, (std::vector<bool>{false, false}));  // copy had none
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(8, 3)));
}

TEST_F(RingStateCopiesTest, RestoreBringsBackTheStageFlags) {
  RingStateCopies copies(backend_.get(), kN, true);
  current_ = {true, false};
  KeepSteps(copies, 0, 1);
  current_ = {false, true};
  At(1);
  ASSERT_TRUE(copies.RestoreTo(0, State()).ok());
  EXPECT_EQ(current_, (std::vector<bool>{true, false}));
}

TEST_F(RingStateCopiesTest, ACopyInLentMemoryNeedsNoBufferOfItsOwn) {
  RingStateCopies copies(backend_.get(), kN, true);
  Lend(copies);
  KeepSteps(copies, 2, 3);
  EXPECT_EQ(copies.rollback_copies(), 0);
  EXPECT_EQ(copies.copy_bytes(), 2 * kN * int64_t{sizeof(float)});
  EXPECT_TRUE(copies.LentCopyPending());
  // Step 2 applied, then aborted: back from the lent memory.
  At(3);
  ASSERT_TRUE(copies.RestoreTo(2, State()).ok());
  ExpectAt(2);
  // Redone and committed before the next step: nothing moves.
  copies.ObserveCommitted(3);
  EXPECT_FALSE(copies.LentCopyPending());
  ASSERT_TRUE(copies.TakeBackLent().ok());
  Overwrite();
  EXPECT_EQ(copies.spills(), 0);
  EXPECT_EQ(copies.rollback_copies(), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(2, 3)));
  // The next step's copy goes there again.
  Lend(copies);
  KeepSteps(copies, 3, 4);
  At(4);
  ASSERT_TRUE(copies.RestoreTo(3, State()).ok());
  ExpectAt(3);
  EXPECT_EQ(copies.rollback_copies(), 0);
}

TEST_F(RingStateCopiesTest, AnUncommittedCopyMovesOutBeforeTheMemoryIsWritten) {
  RingStateCopies copies(backend_.get(), kN, true);
  copies.ObserveCommitted(1);
  Lend(copies);
  KeepSteps(copies, 2, 3);
  ASSERT_TRUE(copies.TakeBackLent().ok());  // step 2 not committed yet
  Overwrite();
  EXPECT_EQ(copies.spills(), 1);
  EXPECT_EQ(copies.rollback_copies(), 1);
  EXPECT_FALSE(copies.LentCopyPending());
  At(3);
  ASSERT_TRUE(copies.RestoreTo(2, State()).ok());
  ExpectAt(2);
  // Taking back what holds nothing moves nothing.
  ASSERT_TRUE(copies.TakeBackLent().ok());
  EXPECT_EQ(copies.spills(), 1);
}

TEST_F(RingStateCopiesTest, LentMemoryTooSmallOrStillHoldingACopyIsPassedOver) {
  RingStateCopies copies(backend_.get(), kN, true);
  copies.Lend({absl::MakeSpan(memory_.data(), 2 * kN - 1)});  // 1 short
  KeepSteps(copies, 2, 3);
  EXPECT_EQ(copies.rollback_copies(), 1);
  EXPECT_FALSE(copies.LentCopyPending());
  ASSERT_TRUE(copies.TakeBackLent().ok());
  // A copy still needed in the lent memory is not overwritten by the next
  // one (no TakeBackLent in between): that one gets a buffer of its own.
  Lend(copies);
  KeepSteps(copies, 3, 4);
  EXPECT_TRUE(copies.LentCopyPending());
  KeepSteps(copies, 4, 5);
  EXPECT_TRUE(copies.CheckKept(3, 5).ok());
  EXPECT_TRUE(copies.CheckKept(4, 5).ok());
  At(5);
  ASSERT_TRUE(copies.RestoreTo(3, State()).ok());
  ExpectAt(3);
  // Forget covers the lent copy too.
  KeepSteps(copies, 3, 4);
  copies.Forget();
  EXPECT_TRUE(absl::IsFailedPrecondition(copies.CheckKept(3, 4)));
}

}  // namespace
}  // namespace ferry
