// ParameterLayout enforces common/peer_limits.h: tensors and elements per
// job, without overflow.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/peer_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/parameter_layout.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(ParameterLayoutLimitsTest, LayoutRefusesTooManyTensors) {
  std::vector<ParameterLayout::TensorDef> defs;
  for (int64_t i = 0; i <= kMaxTensorsPerJob; ++i)
    defs.push_back({absl::StrCat("t", i), {1}});
  const auto refused = ParameterLayout::Create(defs);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("parameter tensors is 4097"));
  defs.pop_back();
  EXPECT_TRUE(ParameterLayout::Create(defs).ok());
}

TEST(ParameterLayoutLimitsTest, LayoutRefusesTooManyElementsWithoutOverflow) {
  // One dimension product that overflows int64, and a sum over the limit.
  const auto huge =
      ParameterLayout::Create({{"w", {int64_t{1} << 40, int64_t{1} << 40}}});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  const auto sum = ParameterLayout::Create(
      {{"a", {kMaxModelElements / 2}}, {"b", {kMaxModelElements / 2 + 1}}});
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(sum.status().message()),
              HasSubstr("through tensor 'b'"));
  // A zero dimension makes any other dimension fine.
  EXPECT_TRUE(ParameterLayout::Create({{"z", {0, int64_t{1} << 62}}}).ok());
  EXPECT_TRUE(ParameterLayout::Create({{"a", {kMaxModelElements}}}).ok());
}

}  // namespace
}  // namespace ferry
