#include "data/data_source.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<TrainTestData> LoadTrainTest(const std::string& name,
                                            const std::string& data_dir,
                                            int input_dim, int num_classes,
                                            uint64_t seed) {
  TrainTestData data;
  if (name == "fashion-mnist" || name == "mnist") {
    const std::string dir =
        data_dir.empty() ? kDefaultFashionMnistDir : data_dir;
    ASSIGN_OR_RETURN(data.train, LoadFashionMnist(dir, Split::kTrain));
    ASSIGN_OR_RETURN(data.test, LoadFashionMnist(dir, Split::kTest));
  } else if (absl::StartsWith(name, "synthetic:")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(name.substr(10), &n) || n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset '", name, "': expected synthetic:N with N > 0"));
    }
    data.train = MakeSyntheticDataset(n, input_dim, num_classes, seed);
    data.test = MakeSyntheticDataset(std::max<int64_t>(1, n / 6), input_dim,
                                     num_classes, seed + 1);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dataset '", name,
                     "': expected fashion-mnist, mnist or synthetic:N"));
  }
  if (data.train.feature_dim != input_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", name, "' has ", data.train.feature_dim,
        " features per sample but the model's input size is ", input_dim));
  }
  if (data.train.num_classes > num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", name, "' has ", data.train.num_classes,
                     " classes but the model's output size is ", num_classes));
  }
  return data;
}

}  // namespace ferry
