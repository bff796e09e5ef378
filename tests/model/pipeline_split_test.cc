#include "model/pipeline_split.h"

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_presets.h"

namespace ferry {
namespace {

// Linear 0, ReLU 1, Conv 2 ... : the ConvNet preset's allowed starts.
TEST(PipelineSplitTest, StagesStartOnlyAtLayersWithParameters) {
  const std::vector<bool> allowed = StageStartAllowed(ConvNetModelDef());
  std::vector<int> starts;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i]) starts.push_back(static_cast<int>(i));
  }
  EXPECT_EQ(starts, (std::vector<int>{0, 2, 7, 10}));
}

// A model that opens with layers without parameters: stage 0 takes them
// with the first layer that has some, balanced or by explicit starts.
TEST(PipelineSplitTest, TheFirstStageHoldsParametersToo) {
  ModelDef def = *ResolveModelSpec("784-16-16-10");
  def.input.shape = {1, 28, 28};
  LayerDef flatten;
  flatten.type = LayerType::kFlatten;
  def.layers.insert(def.layers.begin(), flatten);
  const std::vector<bool> allowed = StageStartAllowed(def);
  EXPECT_FALSE(allowed[1]);  // Linear 1 would leave Flatten alone
  auto split = SplitModel(def, 3, {}, StageBalance::kParams);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ((*split)[0].first_layer, 0);
  EXPECT_GE((*split)[0].end_layer, 2);
  EXPECT_EQ(SplitModel(def, 2, {1}, StageBalance::kParams).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitModel(def, 4, {}, StageBalance::kParams).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineSplitTest, ConvNetSplitsWhereComputeOrParametersBalance) {
  const ModelDef def = ConvNetModelDef();
  // Parameters: the Linear(9216, 128) holds 98 % of them, so it is a stage
  // of its own with the small Linear after it.
  auto by_params = SplitModel(def, 2, {}, StageBalance::kParams);
  ASSERT_TRUE(by_params.ok()) << by_params.status();
  EXPECT_EQ(*by_params, (std::vector<StageRange>{{0, 7}, {7, 11}}));
  // Compute: the second convolution dominates; three stages put it alone.
  auto by_compute = SplitModel(def, 3, {}, StageBalance::kCompute);
  ASSERT_TRUE(by_compute.ok()) << by_compute.status();
  EXPECT_EQ(*by_compute, (std::vector<StageRange>{{0, 2}, {2, 7}, {7, 11}}));
  EXPECT_EQ(StageRangesString(*by_compute), "0-1,2-6,7-10");
  // Every stage a layer with parameters: four at most.
  EXPECT_TRUE(SplitModel(def, 4, {}, StageBalance::kCompute).ok());
  auto five = SplitModel(def, 5, {}, StageBalance::kCompute);
  EXPECT_EQ(five.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(five.status().message().find("4 layers with parameters"),
            std::string::npos)
      << five.status();
}

TEST(PipelineSplitTest, ExplicitStartsAreCheckedAndUsed) {
  const ModelDef def = ConvNetModelDef();
  auto split = SplitModel(def, 3, {2, 10}, StageBalance::kCompute);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(*split, (std::vector<StageRange>{{0, 2}, {2, 10}, {10, 11}}));
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{
           {3, 10}, {10, 2}, {2, 11}, {0, 7}, {7, 7}}) {
    auto refused = SplitModel(def, 3, bad, StageBalance::kCompute);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad[0] << "," << bad[1];
  }
  auto ReLU_start = SplitModel(def, 2, {3}, StageBalance::kCompute);
  EXPECT_NE(ReLU_start.status().message().find("layer 3, which has no"),
            std::string::npos)
      << ReLU_start.status();
  EXPECT_EQ(SplitModel(def, 3, {7}, StageBalance::kCompute).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineSplitTest, ParsesStartsAndBalanceNames) {
  EXPECT_EQ(*ParseStageStarts("3,7"), (std::vector<int>{3, 7}));
  EXPECT_EQ(ParseStageStarts("3,x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStageStarts("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseStageBalance("params"), StageBalance::kParams);
  EXPECT_EQ(*ParseStageBalance("compute"), StageBalance::kCompute);
  EXPECT_EQ(ParseStageBalance("flops").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The largest stage of the best split, by trying every split.
double BruteForceMax(const std::vector<double>& costs,
                     const std::vector<bool>& allowed, int stages) {
  const int n = static_cast<int>(costs.size());
  double best = 1e300;
  std::vector<int> starts;
  std::function<void(int, int)> pick = [&](int from, int left) {
    if (left == 0) {
      double worst = 0.0;
      int first = 0;
      std::vector<int> ends = starts;
      ends.push_back(n);
      for (int end : ends) {
        double sum = 0.0;
        for (int i = first; i < end; ++i) sum += costs[i];
        worst = std::max(worst, sum);
        first = end;
      }
      best = std::min(best, worst);
      return;
    }
    for (int i = from; i < n; ++i) {
      if (!allowed[i]) continue;
      starts.push_back(i);
      pick(i + 1, left - 1);
      starts.pop_back();
    }
  };
  pick(1, stages - 1);
  return best;
}

TEST(PipelineSplitTest, BalancedSplitIsOptimalOnEverySmallCase) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> cost(0, 9);
  for (int n : {1, 2, 3, 5, 7, 8}) {
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<double> costs(n);
      std::vector<bool> allowed(n);
      for (int i = 0; i < n; ++i) {
        costs[i] = cost(rng);
        allowed[i] = i == 0 || rng() % 3 != 0;
      }
      const int starts =
          static_cast<int>(std::count(allowed.begin(), allowed.end(), true));
      for (int stages = 1; stages <= starts; ++stages) {
        auto split = BalanceStages(costs, allowed, stages);
        ASSERT_TRUE(split.ok()) << split.status();
        ASSERT_EQ(static_cast<int>(split->size()), stages);
        double worst = 0.0;
        int expect_first = 0;
        for (const StageRange& s : *split) {
          ASSERT_EQ(s.first_layer, expect_first);
          ASSERT_LT(s.first_layer, s.end_layer);
          ASSERT_TRUE(allowed[s.first_layer]);
          double sum = 0.0;
          for (int i = s.first_layer; i < s.end_layer; ++i) sum += costs[i];
          worst = std::max(worst, sum);
          expect_first = s.end_layer;
        }
        EXPECT_EQ(expect_first, n);
        EXPECT_EQ(worst, BruteForceMax(costs, allowed, stages))
            << "n=" << n << " stages=" << stages;
      }
      EXPECT_EQ(BalanceStages(costs, allowed, starts + 1).status().code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(PipelineSplitTest, TiesGoToTheCutThatSendsFewerActivations) {
  // Layers 1 and 2 both give a largest stage of 2; a cut before layer 2
  // sends 5 elements per sample, before layer 1 sends 9.
  const std::vector<double> costs = {2, 0, 0, 2};
  const std::vector<bool> allowed = {true, true, true, false};
  auto split = BalanceStages(costs, allowed, 2, {0, 9, 5, 1});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(*split, (std::vector<StageRange>{{0, 2}, {2, 4}}));
  // Without the tie-breaker the earliest cut wins.
  EXPECT_EQ(*BalanceStages(costs, allowed, 2),
            (std::vector<StageRange>{{0, 1}, {1, 4}}));
  EXPECT_EQ(BalanceStages(costs, allowed, 2, {1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
