// In-memory training data: Fashion-MNIST (or MNIST) loaded from IDX files, a
// deterministic synthetic data set for communication benchmarks, and batch
// gathering into caller-owned buffers.
//
// A Dataset is a plain value: it owns its vectors, is movable and copyable, and
// const access from many threads at once is safe.
#ifndef FERRY_DATA_DATASET_H_
#define FERRY_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ferry {

// Where Debian's dataset-fashion-mnist installs the files.
inline constexpr char kDefaultFashionMnistDir[] =
    "/usr/share/datasets/fashion-mnist";

// Per-pixel normalisation applied by LoadFashionMnist to x in [0, 255]:
// (x / 255 - kFashionMnistMean) / kFashionMnistStd.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr int kFashionMnistClasses = 10;

enum class Split { kTrain, kTest };

// What a model sees of a raw pixel x in [0, 255]: (x * scale - mean) / std
// (a model spec's "input"; model/model_def.h). The default is Fashion-MNIST's.
struct PixelNormalization {
  double scale = 1.0 / 255.0;
  double mean = kFashionMnistMean;
  double std = kFashionMnistStd;
};

struct Dataset {
  int64_t num_samples = 0;
  int feature_dim = 0;
  int num_classes = 0;
  std::vector<float> features;  // row-major [num_samples, feature_dim]
  std::vector<int32_t> labels;  // [num_samples], each in [0, num_classes)
};

// Samples [first, first + count) of `dataset` as a dataset of its own (same
// feature_dim and num_classes). REQUIRES: 0 <= first, 0 <= count,
// first + count <= dataset.num_samples.
Dataset SliceDataset(const Dataset& dataset, int64_t first, int64_t count);

// Loads one split of Fashion-MNIST from `dir`: train-images-idx3-ubyte.gz and
// train-labels-idx1-ubyte.gz (kTrain) or t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz (kTest); for each file the uncompressed name (no
// ".gz") is used when the .gz is absent. MNIST in the same layout loads too.
// Features are rows * cols pixels normalised by `normalization`; num_classes
// is 10.
//
// Errors:
//   NOT_FOUND  neither name exists; the message names the .gz path and says
//              how to fix it (install dataset-fashion-mnist or --data-dir);
//   DATA_LOSS  a corrupt file (see ReadIdxFile), image and label counts that
//              differ, or a label outside [0, 10);
//   others as ReadIdxFile returns them.
absl::StatusOr<Dataset> LoadFashionMnist(
    const std::string& dir, Split split,
    const PixelNormalization& normalization = {});

// Makes a learnable classification data set that depends only on the
// arguments, on every platform and compiler: each class c has a prototype
// vector p_c with entries uniform in [-1, 1); sample i draws its label y
// uniformly and its features as p_y + noise, noise uniform in [-1, 1). All
// draws come from one std::mt19937_64 seeded with `seed` (prototypes first,
// then per sample: label, then features), converted to floats by our own code.
// Cost is O(num_samples * feature_dim); use it to drive large models in
// benchmarks. Negative num_samples is treated as 0, feature_dim and num_classes
// below 1 as 1.
Dataset MakeSyntheticDataset(int64_t num_samples, int feature_dim,
                             int num_classes, uint64_t seed);

// Copies the samples `indices` of `dataset`, in order, into the first
// indices.size() * feature_dim floats of `features` and the first
// indices.size() entries of `labels`; the rest of the buffers is untouched, so
// buffers sized for the largest batch serve a shorter last batch. Allocates
// nothing. Nothing is written unless OK is returned.
//
// Errors:
//   INVALID_ARGUMENT     a buffer is too small for indices.size() samples;
//   OUT_OF_RANGE         an index is outside [0, dataset.num_samples);
//   FAILED_PRECONDITION  `dataset`'s vectors are shorter than its sizes say.
absl::Status GatherBatch(const Dataset& dataset,
                         absl::Span<const int64_t> indices,
                         absl::Span<float> features,
                         absl::Span<int32_t> labels);

}  // namespace ferry

#endif  // FERRY_DATA_DATASET_H_
