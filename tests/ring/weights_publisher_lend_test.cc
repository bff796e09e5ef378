// WeightsPublisher's lent snapshots: readers read the lender's buffer
// itself until the lender takes it back; then a snapshot no reader has
// finished with becomes a copy (a reader in the middle goes on from it) and
// one already read is dropped.
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "ring/weights_publisher.h"

namespace ferry {
namespace {

// The snapshot's values [0, n) as floats (ReadValues).
std::vector<float> LentValues(const WeightsSnapshot& snapshot, int64_t n) {
  std::string bytes;
  snapshot.ReadValues(0, n, &bytes);
  std::vector<float> values(static_cast<size_t>(n));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

TEST(WeightsPublisherLendTest, ReadersReadTheLentBufferUntilItIsTakenBack) {
  WeightsPublisher publisher;
  std::vector<float> live = {1, 2, 3};
  EXPECT_TRUE(absl::IsUnavailable(publisher.Get(4).status()));
  publisher.Lend(4, live.data(), 3, "tables");
  EXPECT_FALSE(publisher.wanted());
  EXPECT_TRUE(publisher.lent());
  auto snapshot = publisher.Get(4);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ((*snapshot)->steps_applied, 4);
  EXPECT_EQ((*snapshot)->total_elements, 3);
  EXPECT_EQ((*snapshot)->tables, "tables");
  EXPECT_TRUE((*snapshot)->values.empty());  // no copy
  live[1] = 20;  // (the lender would not, while lent)
  EXPECT_EQ(LentValues(**snapshot, 3), std::vector<float>({1, 20, 3}));

  // Taken back while the reader holds it: copied, and the reader goes on
  // from the copy while the lender writes.
  publisher.TakeBack();
  EXPECT_FALSE(publisher.lent());
  live = {7, 8, 9};
  EXPECT_EQ(LentValues(**snapshot, 3), std::vector<float>({1, 20, 3}));
  EXPECT_EQ((*publisher.Get(4))->values, std::vector<float>({1, 20, 3}));
  publisher.TakeBack();  // no lent snapshot: nothing changes
  EXPECT_TRUE(publisher.Get(4).ok());
}

TEST(WeightsPublisherLendTest, ASnapshotNobodyReadIsCopiedOneReadIsDropped) {
  WeightsPublisher publisher;
  std::vector<float> live = {1, 2};
  publisher.Lend(5, live.data(), 2);
  publisher.TakeBack();  // not read yet: a reader may still come
  live = {0, 0};
  auto kept = publisher.Get(5);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)->values, std::vector<float>({1, 2}));
  kept = absl::UnavailableError("let go");

  publisher.Lend(6, live.data(), 2);
  {
    auto read = publisher.Get(6);  // read, then let go
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(LentValues(**read, 2), std::vector<float>({0, 0}));
  }
  publisher.TakeBack();
  EXPECT_FALSE(publisher.lent());
  // Dropped: a reader of that step marks a newer snapshot wanted.
  EXPECT_TRUE(absl::IsUnavailable(publisher.Get(6).status()));
  EXPECT_TRUE(publisher.wanted());
}

// A reader still streaming a lent snapshot when a newer one replaces it
// goes on from a copy: the lender takes back only the newest.
TEST(WeightsPublisherLendTest, AReplacedLentSnapshotStillBeingReadIsCopied) {
  WeightsPublisher publisher;
  std::vector<float> live = {1, 2, 3};
  publisher.Lend(5, live.data(), 3);
  auto first = publisher.Get(5);  // a reader in the middle of it
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(absl::IsUnavailable(publisher.Get(6).status()));
  publisher.Lend(6, live.data(), 3);  // another reader wanted step 6
  publisher.TakeBack();
  live = {9, 9, 9};
  EXPECT_EQ(LentValues(**first, 3), std::vector<float>({1, 2, 3}));
  // A copy too when the replacement is a copy.
  publisher.Lend(7, live.data(), 3);
  auto second = publisher.Get(7);
  ASSERT_TRUE(second.ok());
  publisher.Publish(8, {4, 5, 6});
  live = {0, 0, 0};
  EXPECT_EQ(LentValues(**second, 3), std::vector<float>({9, 9, 9}));
}

}  // namespace
}  // namespace ferry
