#include "data/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/idx_reader.h"

namespace ferry {
namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Returns dir/stem.gz if it exists, else dir/stem if that exists.
absl::StatusOr<std::string> ResolveIdxPath(const std::string& dir,
                                           const std::string& stem) {
  const std::string gz_path = JoinPath(dir, stem + ".gz");
  if (PathExists(gz_path)) return gz_path;
  const std::string plain_path = JoinPath(dir, stem);
  if (PathExists(plain_path)) return plain_path;
  return absl::NotFoundError(absl::StrCat(
      gz_path,
      " not found; install Debian's dataset-fashion-mnist (scripts/setup) or "
      "pass --data-dir"));
}

// Uniform float in [-1, 1) from the top 24 bits of one draw; exact, so the
// result is the same everywhere.
float SignedUnit(std::mt19937_64& rng) {
  const float unit = static_cast<float>(rng() >> 40) * 0x1.0p-24f;
  return 2.0f * unit - 1.0f;
}

// Integer in [0, bound) from the top 32 bits of one draw (multiply-shift; the
// bias is below 2^-32 * bound, irrelevant for labels).
int32_t LabelBelow(std::mt19937_64& rng, uint32_t bound) {
  return static_cast<int32_t>(((rng() >> 32) * uint64_t{bound}) >> 32);
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(
    const std::string& dir, Split split,
    const PixelNormalization& normalization) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  ASSIGN_OR_RETURN(std::string images_path,
                   ResolveIdxPath(dir, prefix + "-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(std::string labels_path,
                   ResolveIdxPath(dir, prefix + "-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path, 3));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path, 1));

  const int64_t n = images.dims[0];
  if (labels.dims[0] != n) {
    return absl::DataLossError(absl::StrFormat(
        "image and label counts differ: %s holds %d images, %s holds %d "
        "labels",
        images_path, n, labels_path, labels.dims[0]));
  }
  const int64_t feature_dim = images.dims[1] * images.dims[2];
  if (feature_dim > std::numeric_limits<int>::max()) {
    return absl::DataLossError(
        absl::StrFormat("%s: %d x %d pixels per image is implausibly large",
                        images_path, images.dims[1], images.dims[2]));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels.data[i] >= kFashionMnistClasses) {
      return absl::DataLossError(absl::StrFormat(
          "%s: label %d of sample %d is outside [0, %d)", labels_path,
          labels.data[i], i, kFashionMnistClasses));
    }
  }

  std::array<float, 256> normalised;
  for (int x = 0; x < 256; ++x) {
    // In float, as the model's own arithmetic; scale 1/255 divides by 255
    // (bit for bit what the data layer always computed).
    const float pixel = std::abs(normalization.scale * 255.0 - 1.0) < 1e-12
                            ? static_cast<float>(x) / 255.0f
                            : static_cast<float>(x * normalization.scale);
    normalised[x] = (pixel - static_cast<float>(normalization.mean)) /
                    static_cast<float>(normalization.std);
  }
  Dataset dataset;
  dataset.num_samples = n;
  dataset.feature_dim = static_cast<int>(feature_dim);
  dataset.num_classes = kFashionMnistClasses;
  dataset.features.resize(images.data.size());
  std::transform(images.data.begin(), images.data.end(),
                 dataset.features.begin(),
                 [&normalised](uint8_t x) { return normalised[x]; });
  dataset.labels.assign(labels.data.begin(), labels.data.end());
  return dataset;
}

Dataset MakeSyntheticDataset(int64_t num_samples, int feature_dim,
                             int num_classes, uint64_t seed) {
  const int64_t n = std::max<int64_t>(num_samples, 0);
  const size_t dim = static_cast<size_t>(std::max(feature_dim, 1));
  const int classes = std::max(num_classes, 1);

  std::mt19937_64 rng(seed);
  std::vector<float> prototypes(static_cast<size_t>(classes) * dim);
  for (float& p : prototypes) p = SignedUnit(rng);

  Dataset dataset;
  dataset.num_samples = n;
  dataset.feature_dim = static_cast<int>(dim);
  dataset.num_classes = classes;
  dataset.features.resize(static_cast<size_t>(n) * dim);
  dataset.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = LabelBelow(rng, static_cast<uint32_t>(classes));
    dataset.labels[i] = label;
    const float* prototype = prototypes.data() + label * dim;
    float* row = dataset.features.data() + i * dim;
    for (size_t j = 0; j < dim; ++j) row[j] = prototype[j] + SignedUnit(rng);
  }
  return dataset;
}

Dataset SliceDataset(const Dataset& dataset, int64_t first, int64_t count) {
  const size_t dim = static_cast<size_t>(dataset.feature_dim);
  Dataset slice;
  slice.num_samples = count;
  slice.feature_dim = dataset.feature_dim;
  slice.num_classes = dataset.num_classes;
  slice.features.assign(dataset.features.begin() + first * dim,
                        dataset.features.begin() + (first + count) * dim);
  slice.labels.assign(dataset.labels.begin() + first,
                      dataset.labels.begin() + first + count);
  return slice;
}

absl::Status GatherBatch(const Dataset& dataset,
                         absl::Span<const int64_t> indices,
                         absl::Span<float> features,
                         absl::Span<int32_t> labels) {
  const size_t dim = static_cast<size_t>(std::max(dataset.feature_dim, 0));
  const size_t batch = indices.size();
  if (dataset.num_samples < 0 ||
      dataset.features.size() <
          static_cast<size_t>(dataset.num_samples) * dim ||
      dataset.labels.size() < static_cast<size_t>(dataset.num_samples)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "inconsistent dataset: %d samples x %d features, but %d floats and %d "
        "labels",
        dataset.num_samples, dim, dataset.features.size(),
        dataset.labels.size()));
  }
  if (features.size() < batch * dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "feature buffer holds %d floats, a batch of %d x %d needs %d",
        features.size(), batch, dim, batch * dim));
  }
  if (labels.size() < batch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("label buffer holds %d entries, a batch needs %d",
                        labels.size(), batch));
  }
  for (size_t i = 0; i < batch; ++i) {
    if (indices[i] < 0 || indices[i] >= dataset.num_samples) {
      return absl::OutOfRangeError(absl::StrFormat(
          "sample index %d (batch position %d) is outside [0, %d)", indices[i],
          i, dataset.num_samples));
    }
  }
  for (size_t i = 0; i < batch; ++i) {
    const size_t sample = static_cast<size_t>(indices[i]);
    std::copy_n(dataset.features.data() + sample * dim, dim,
                features.data() + i * dim);
    labels[i] = dataset.labels[sample];
  }
  return absl::OkStatus();
}

}  // namespace ferry
