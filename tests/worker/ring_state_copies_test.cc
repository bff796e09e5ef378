// RingStateCopies on the CPU backend: which copies are kept, reused and
// freed, and what RestoreTo puts back.
#include "worker/ring_state_copies.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
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

}  // namespace
}  // namespace ferry
