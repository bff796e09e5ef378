#include "common/range_sets.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ranges = std::vector<FlatRange>;

TEST(RangeSetsTest, CheckAcceptsOnlySortedDisjointNonEmptyRangesInside) {
  EXPECT_TRUE(CheckRangeSet({}, 0, "none").ok());
  EXPECT_TRUE(CheckRangeSet(Ranges{{0, 2}, {3, 5}, {9, 10}}, 10, "ok").ok());
  for (const Ranges& bad :
       std::vector<Ranges>{{{2, 2}},             // empty
                           {{3, 1}},             // reversed
                           {{-1, 2}},            // before 0
                           {{8, 11}},            // past the limit
                           {{0, 2}, {2, 4}},     // adjacent: one range
                           {{0, 3}, {2, 4}},     // overlapping
                           {{5, 6}, {1, 2}}}) {  // unsorted
    const absl::Status s = CheckRangeSet(bad, 10, "the ranges");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("the ranges: range ["));
  }
}

TEST(RangeSetsTest, NormalizeSortsMergesAndDropsEmptyRanges) {
  EXPECT_EQ(NormalizeRanges({{7, 9}, {0, 2}, {2, 3}, {5, 5}, {1, 2}, {8, 12}}),
            (Ranges{{0, 3}, {7, 12}}));
  EXPECT_TRUE(NormalizeRanges({}).empty());
}

TEST(RangeSetsTest, IntersectKeepsTheElementsInBoth) {
  const Ranges a = {{0, 4}, {6, 10}, {12, 14}};
  const Ranges b = {{2, 7}, {9, 13}};
  EXPECT_EQ(IntersectRangeSets(a, b),
            (Ranges{{2, 4}, {6, 7}, {9, 10}, {12, 13}}));
  EXPECT_EQ(IntersectRangeSets(b, a), IntersectRangeSets(a, b));
  EXPECT_TRUE(IntersectRangeSets(a, {}).empty());
  EXPECT_TRUE(IntersectRangeSets(Ranges{{0, 2}}, Ranges{{2, 4}}).empty());
}

TEST(RangeSetsTest, ComplementAndClipStayInsideTheirBounds) {
  const Ranges set = {{2, 4}, {6, 8}};
  EXPECT_EQ(ComplementRangeSet(set, 0, 10), (Ranges{{0, 2}, {4, 6}, {8, 10}}));
  EXPECT_EQ(ComplementRangeSet(set, 3, 7), (Ranges{{4, 6}}));
  EXPECT_EQ(ComplementRangeSet({}, 0, 5), (Ranges{{0, 5}}));
  EXPECT_TRUE(ComplementRangeSet(Ranges{{0, 5}}, 0, 5).empty());
  EXPECT_EQ(ClipRangeSet(set, 3, 7), (Ranges{{0, 1}, {3, 4}}));
  EXPECT_TRUE(ClipRangeSet(set, 4, 6).empty());
}

TEST(RangeSetsTest, PairsRoundTripAndMalformedPairsAreRefused) {
  const Ranges set = {{1, 3}, {5, 6}};
  EXPECT_THAT(ToRangePairs(set), ElementsAre(1, 3, 5, 6));
  Ranges back;
  ASSERT_TRUE(FromRangePairs(ToRangePairs(set), 6, "pairs", &back).ok());
  EXPECT_EQ(back, set);
  Ranges untouched = {{0, 1}};
  const std::vector<int64_t> odd = {1, 3, 5};
  EXPECT_THAT(FromRangePairs(odd, 6, "pairs", &untouched).message(),
              HasSubstr("not pairs"));
  const std::vector<int64_t> outside = {1, 3, 5, 7};
  EXPECT_EQ(FromRangePairs(outside, 6, "pairs", &untouched).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(untouched, (Ranges{{0, 1}}));
}

}  // namespace
}  // namespace ferry
