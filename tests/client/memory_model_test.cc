// client/memory_model.h: the training state each role holds, term by term.
#include "client/memory_model.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryModelTest, EachRoleHoldsWhatItAllocates) {
  // 100M parameters (400 MB), momentum, 4 workers, 4 shards.
  const int64_t n = 100'000'000;
  const MemoryPrediction m = PredictMemory(
      {.params = n, .optimizer_state_buffers = 1, .workers = 4, .shards = 4});
  EXPECT_EQ(m.ps_worker, 2 * n * 4);
  // Slice + momentum + one staged slice per worker.
  EXPECT_EQ(m.ps_shard, (n / 4) * (1 + 1 + 4) * 4);
  // Params, gradients, momentum, a copy of params and momentum.
  EXPECT_EQ(m.ring_member, 5 * n * 4);
  // Params, gradients, a quarter of momentum; the copy of that quarter and
  // of the quarter of the params lies in the gradients: 2.25x the model.
  EXPECT_EQ(m.sharded_ring_member, (2 * n + n / 4) * 4);
  // PyTorch workers keep the copy apart: 2.75x.
  const MemoryPrediction torch =
      PredictMemory({.params = n,
                     .optimizer_state_buffers = 1,
                     .workers = 4,
                     .grads_idle_between_steps = false});
  EXPECT_EQ(torch.sharded_ring_member, (2 * n + 3 * (n / 4)) * 4);
  // Under 16 MiB the copy keeps a buffer of its own.
  const int64_t small = 4 * kMiB;
  const MemoryPrediction little = PredictMemory(
      {.params = small, .optimizer_state_buffers = 1, .workers = 4});
  EXPECT_EQ(little.sharded_ring_member, (2 * small + 3 * (small / 4)) * 4);
}

TEST(MemoryModelTest, SumOnArrivalAndAdamAndUnevenSlices) {
  const MemoryPrediction adam = PredictMemory({.params = 10 * kMiB,
                                               .optimizer_state_buffers = 2,
                                               .workers = 3,
                                               .shards = 2,
                                               .sum_on_arrival = true});
  EXPECT_EQ(adam.ps_shard, 5 * kMiB * (1 + 2 + 1) * 4);
  EXPECT_EQ(adam.ring_member, 7 * 10 * kMiB * 4);
  // The largest of three slices of 10 Mi elements; its copy (params and
  // two Adam buffers) does not fit in the other two thirds of the
  // gradients.
  const int64_t slice = (10 * kMiB + 2) / 3;
  EXPECT_EQ(adam.sharded_ring_member, (2 * 10 * kMiB + 5 * slice) * 4);
  // One worker: sharding changes nothing but the copy's size.
  const MemoryPrediction alone =
      PredictMemory({.params = 8, .optimizer_state_buffers = 1});
  EXPECT_EQ(alone.sharded_ring_member, alone.ring_member);
}

}  // namespace
}  // namespace ferry
