#include "data/data_source.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/ctr_dataset.h"
#include "model/shape_inference.h"

namespace ferry {

absl::StatusOr<TrainTestData> LoadTrainTest(
    const std::string& name, const std::string& data_dir, int input_dim,
    int num_classes, uint64_t seed, const PixelNormalization& normalization) {
  TrainTestData data;
  if (name == "fashion-mnist" || name == "mnist") {
    const std::string dir =
        data_dir.empty() ? kDefaultFashionMnistDir : data_dir;
    ASSIGN_OR_RETURN(data.train,
                     LoadFashionMnist(dir, Split::kTrain, normalization));
    ASSIGN_OR_RETURN(data.test,
                     LoadFashionMnist(dir, Split::kTest, normalization));
  } else if (absl::StartsWith(name, "synthetic:")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(name.substr(10), &n) || n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset '", name, "': expected synthetic:N with N > 0"));
    }
    // One draw split in two, so that train and test share the class
    // prototypes (the first n samples are the same as a draw of n alone).
    const int64_t test_n = std::max<int64_t>(1, n / 6);
    Dataset all =
        MakeSyntheticDataset(n + test_n, input_dim, num_classes, seed);
    data.test = SliceDataset(all, n, test_n);
    data.train = SliceDataset(all, 0, n);
  } else if (IsCtrDatasetSpec(name)) {
    // CTR examples feed DLRM models (data/ctr_dataset.h loads them), never
    // the layer-stack models loaded here.
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", name,
        "' holds CTR examples (13 integer and 26 categorical features) for "
        "sparse models; the dense-model trainers cannot train on it"));
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

absl::StatusOr<TrainTestData> LoadTrainTest(const std::string& name,
                                            const std::string& data_dir,
                                            const ModelDef& model,
                                            uint64_t seed) {
  const int64_t input_dim = ShapeElements(model.input.shape);
  if (input_dim <= 0 || input_dim > std::numeric_limits<int>::max() ||
      model.classes <= 0 || model.classes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's input ", ShapeString(model.input.shape), " or its ",
        model.classes, " classes cannot be a dataset's"));
  }
  PixelNormalization normalization;
  normalization.scale = model.input.scale;
  normalization.mean = model.input.mean;
  normalization.std = model.input.std;
  return LoadTrainTest(name, data_dir, static_cast<int>(input_dim),
                       static_cast<int>(model.classes), seed, normalization);
}

absl::Status CheckModelFitsDataset(const ModelDef& model,
                                   const std::string& name,
                                   const std::string& data_dir) {
  return LoadTrainTest(name, data_dir, model, /*seed=*/1).status();
}

absl::StatusOr<int64_t> ParseExternalDatasetSpec(const std::string& name) {
  constexpr absl::string_view kPrefix = "external:";
  int64_t n = 0;
  if (!absl::StartsWith(name, kPrefix) ||
      !absl::SimpleAtoi(absl::string_view(name).substr(kPrefix.size()), &n) ||
      n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model external trains on the script's own data: --dataset "
        "external:N (N samples an epoch, the script's len(dataset)), not '",
        name, "'"));
  }
  return n;
}

}  // namespace ferry
