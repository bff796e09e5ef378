// PsShard holds its slice once: the current snapshot is the slice, written
// in place when no reader holds it and copied on write when one does.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

// One sync step of worker "a" with gradient sum `g` over 2 samples.
void Step(PsShard& shard, const std::vector<float>& g) {
  const int64_t step = shard.version();
  ASSERT_TRUE(PushSlice(shard, Header("a", step, 2), g).ok());
  ASSERT_TRUE(shard.FinalizeStep("job", step, {{"a", 2}}, 0).ok());
}

// `s` is version `version` with `values`.
void ExpectSnapshot(const PsSnapshot& s, int64_t version,
                    const std::vector<float>& values) {
  EXPECT_EQ(s.version, version);
  EXPECT_EQ(s.values, values);
}

TEST(PsShardMemoryTest, AnUpdateWithoutReadersWritesTheSliceInPlace) {
  auto shard = MakeShard(TestConfig());
  const float* slice = shard->CurrentSnapshot()->values.data();
  Step(*shard, {2, 4, 6, 8});  // SGD lr 0.5 on the mean {1, 2, 3, 4}
  std::shared_ptr<const PsSnapshot> now = shard->CurrentSnapshot();
  ExpectSnapshot(*now, 1, {0.5f, 1.0f, 1.5f, 2.0f});
  EXPECT_EQ(now->values.data(), slice);
}

TEST(PsShardMemoryTest, AReaderKeepsItsVersionAndItsMemoryServesTheNextCopy) {
  auto shard = MakeShard(TestConfig());
  std::shared_ptr<const PsSnapshot> v0 = shard->CurrentSnapshot();
  const float* v0_memory = v0->values.data();
  Step(*shard, {2, 4, 6, 8});
  // The reader's version is intact; version 1 lives in new memory.
  ExpectSnapshot(*v0, 0, {1.0f, 2.0f, 3.0f, 4.0f});
  std::shared_ptr<const PsSnapshot> v1 = shard->CurrentSnapshot();
  ExpectSnapshot(*v1, 1, {0.5f, 1.0f, 1.5f, 2.0f});
  EXPECT_NE(v1->values.data(), v0_memory);

  // Version 1 is still read when step 1 applies: the copy goes into
  // version 0's memory, free now.
  v0.reset();
  Step(*shard, {2, 4, 6, 8});
  EXPECT_THAT(v1->values, ElementsAre(0.5f, 1.0f, 1.5f, 2.0f));
  std::shared_ptr<const PsSnapshot> v2 = shard->CurrentSnapshot();
  ExpectSnapshot(*v2, 2, {0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(v2->values.data(), v0_memory);
}

TEST(PsShardMemoryTest, ARestoreLeavesTheReadersVersionIntact) {
  auto shard = MakeShard(TestConfig());
  PsShardState state = *shard->ExportState();
  Step(*shard, {2, 4, 6, 8});
  std::shared_ptr<const PsSnapshot> v1 = shard->CurrentSnapshot();
  ASSERT_TRUE(shard->RestoreState(state, 1).ok());
  ExpectSnapshot(*v1, 1, {0.5f, 1.0f, 1.5f, 2.0f});
  std::shared_ptr<const PsSnapshot> now = shard->CurrentSnapshot();
  ExpectSnapshot(*now, 0, {1.0f, 2.0f, 3.0f, 4.0f});
}

TEST(PsShardMemoryTest, ThreeContributorsSumInTheNamedOrder) {
  auto shard = MakeShard(TestConfig());
  // Values whose float sum depends on the order: (1e8 + 1) - 1e8 == 0 but
  // (1e8 - 1e8) + 1 == 1. The step names b, c, a: ((1e8 + -1e8) + 1).
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 1), {1e8, 1e8, 1e8, 1e8}).ok());
  ASSERT_TRUE(
      PushSlice(*shard, Header("c", 0, 1), {-1e8, -1e8, -1e8, -1e8}).ok());
  ASSERT_TRUE(
      shard->FinalizeStep("job", 0, {{"b", 1}, {"c", 1}, {"a", 1}}, 0).ok());
  // Mean 1/3, lr 0.5.
  const float d = 0.5f * (1.0f / 3.0f);
  EXPECT_THAT(Params(*shard),
              ElementsAre(1.0f - d, 2.0f - d, 3.0f - d, 4.0f - d));
}

TEST(PsShardMemoryTest, ReadersNeverSeeAVersionChangeUnderThem) {
  // Async: every push applies at once (lr 0.5 x mean 1 = 0.5 off each
  // value), while readers hold and check snapshots: a snapshot of version v
  // must read initial - 0.5 v, however long it is held.
  auto shard = MakeShard(TestConfig(PsConsistency::kAsync));
  constexpr int kPushes = 2000;
  std::atomic<bool> done = false;
  std::atomic<int> bad = 0;
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        std::shared_ptr<const PsSnapshot> s = shard->CurrentSnapshot();
        const float off = 0.5f * static_cast<float>(s->version);
        for (int k = 0; k < 50; ++k) {
          for (int i = 0; i < 4; ++i) {
            if (s->values[i] != static_cast<float>(i + 1) - off) ++bad;
          }
        }
      }
    });
  }
  for (int step = 0; step < kPushes; ++step) {
    ASSERT_TRUE(
        PushSlice(*shard, Header("w", step, 1, 0, step), {1, 1, 1, 1}).ok());
  }
  done = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(shard->version(), kPushes);
}

}  // namespace
}  // namespace ferry
