#include "data/dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "data/data_source.h"
#include "data/idx_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------------------
// Real Fashion-MNIST (installed by scripts/setup).

bool HaveFashionMnist() {
  return std::filesystem::exists(std::string(kDefaultFashionMnistDir) +
                                 "/train-images-idx3-ubyte.gz");
}

class FashionMnistDatasetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFashionMnist()) return;
    absl::StatusOr<Dataset> train =
        LoadFashionMnist(kDefaultFashionMnistDir, Split::kTrain);
    ASSERT_TRUE(train.ok()) << train.status();
    train_ = new Dataset(std::move(*train));
  }
  static void TearDownTestSuite() {
    delete train_;
    train_ = nullptr;
  }
  void SetUp() override {
    if (train_ == nullptr) {
      GTEST_SKIP() << kDefaultFashionMnistDir << " not installed";
    }
  }

  static Dataset* train_;
};

Dataset* FashionMnistDatasetTest::train_ = nullptr;

TEST_F(FashionMnistDatasetTest, TrainShapeAndBalancedLabels) {
  const Dataset& d = *train_;
  EXPECT_EQ(d.num_samples, 60000);
  EXPECT_EQ(d.feature_dim, 784);
  EXPECT_EQ(d.num_classes, 10);
  ASSERT_EQ(d.features.size(), 60000u * 784u);
  ASSERT_EQ(d.labels.size(), 60000u);
  std::vector<int> histogram(10, 0);
  for (int32_t label : d.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++histogram[label];
  }
  EXPECT_EQ(histogram, std::vector<int>(10, 6000));
}

TEST_F(FashionMnistDatasetTest, TrainIsNormalised) {
  const Dataset& d = *train_;
  double sum = 0, sum_sq = 0;
  for (float x : d.features) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(d.features.size());
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 1.0, 0.02);
  const float lo = -kFashionMnistMean / kFashionMnistStd;
  const float hi = (1.0f - kFashionMnistMean) / kFashionMnistStd;
  for (float x : d.features) {
    ASSERT_GE(x, lo - 1e-5f);
    ASSERT_LE(x, hi + 1e-5f);
  }
}

TEST_F(FashionMnistDatasetTest, LoadsTestSplit) {
  absl::StatusOr<Dataset> test =
      LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->num_samples, 10000);
  EXPECT_EQ(test->feature_dim, 784);
  EXPECT_EQ(test->num_classes, 10);
  std::vector<int> histogram(10, 0);
  for (int32_t label : test->labels) ++histogram[label];
  EXPECT_EQ(histogram, std::vector<int>(10, 1000));
}

TEST_F(FashionMnistDatasetTest, GatherBatchCopiesRows) {
  const Dataset& d = *train_;
  const std::vector<int64_t> indices = {59999, 0, 12345, 0};
  std::vector<float> features(indices.size() * d.feature_dim + 3, -7.0f);
  std::vector<int32_t> labels(indices.size() + 1, -1);
  ASSERT_TRUE(
      GatherBatch(d, indices, absl::MakeSpan(features), absl::MakeSpan(labels))
          .ok());
  for (size_t i = 0; i < indices.size(); ++i) {
    EXPECT_EQ(labels[i], d.labels[indices[i]]);
    for (int j = 0; j < d.feature_dim; ++j) {
      ASSERT_EQ(features[i * d.feature_dim + j],
                d.features[indices[i] * d.feature_dim + j]);
    }
  }
  // Past the batch the buffers are untouched.
  EXPECT_EQ(features.back(), -7.0f);
  EXPECT_EQ(labels.back(), -1);
}

TEST(DatasetLoadTest, MissingDirIsNotFoundWithPathAndFix) {
  const std::string dir = "/nonexistent/ferry-no-such-dir";
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir, Split::kTrain);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kNotFound) << d.status();
  const std::string message(d.status().message());
  EXPECT_THAT(message, HasSubstr(dir + "/train-images-idx3-ubyte.gz"));
  EXPECT_THAT(message, HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(message, HasSubstr("--data-dir"));
  EXPECT_EQ(LoadFashionMnist(dir, Split::kTest).status().code(),
            absl::StatusCode::kNotFound);
}

// ---------------------------------------------------------------------------
// Small hand-written data sets in a temporary directory.

void AppendBigEndian32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<uint8_t>(v >> shift));
  }
}

Bytes ImagesFile(uint32_t n, uint32_t rows, uint32_t cols, const Bytes& px) {
  Bytes out;
  AppendBigEndian32(out, kIdxImagesMagic);
  AppendBigEndian32(out, n);
  AppendBigEndian32(out, rows);
  AppendBigEndian32(out, cols);
  out.insert(out.end(), px.begin(), px.end());
  return out;
}

Bytes LabelsFile(const Bytes& labels) {
  Bytes out;
  AppendBigEndian32(out, kIdxLabelsMagic);
  AppendBigEndian32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ("ferry_dataset_" + std::to_string(getpid()) + "_" + info->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WritePlain(const std::string& name, const Bytes& bytes) {
    FILE* f = fopen((dir_ + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    if (!bytes.empty()) fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
  }
  void WriteGz(const std::string& name, const Bytes& bytes) {
    gzFile f = gzopen((dir_ + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  }

  std::string dir_;
};

TEST_F(DatasetFilesTest, UncompressedNamesAndNormalisation) {
  // 3 images of 2 x 2.
  WritePlain("t10k-images-idx3-ubyte",
             ImagesFile(3, 2, 2, {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8}));
  WriteGz("t10k-labels-idx1-ubyte.gz", LabelsFile({9, 0, 4}));
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_, Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_samples, 3);
  EXPECT_EQ(d->feature_dim, 4);
  EXPECT_EQ(d->num_classes, 10);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{9, 0, 4}));
  ASSERT_EQ(d->features.size(), 12u);
  EXPECT_NEAR(d->features[0], (0.0f - 0.2860f) / 0.3530f, 1e-6);
  EXPECT_NEAR(d->features[1], (1.0f - 0.2860f) / 0.3530f, 1e-6);
  EXPECT_NEAR(d->features[2], (0.2f - 0.2860f) / 0.3530f, 1e-6);
  EXPECT_NEAR(d->features[3], (0.4f - 0.2860f) / 0.3530f, 1e-6);
  // The train split is not there.
  EXPECT_EQ(LoadFashionMnist(dir_, Split::kTrain).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DatasetFilesTest, PrefersGzOverPlain) {
  WriteGz("train-images-idx3-ubyte.gz", ImagesFile(1, 1, 1, {255}));
  WritePlain("train-images-idx3-ubyte", Bytes{1, 2, 3});  // corrupt, unused
  WriteGz("train-labels-idx1-ubyte.gz", LabelsFile({3}));
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_ + "/", Split::kTrain);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3}));
}

TEST_F(DatasetFilesTest, MissingLabelsIsNotFound) {
  WriteGz("train-images-idx3-ubyte.gz", ImagesFile(1, 1, 1, {255}));
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_, Split::kTrain);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr(dir_ + "/train-labels-idx1-ubyte.gz"));
}

TEST_F(DatasetFilesTest, CountMismatchIsDataLoss) {
  WriteGz("train-images-idx3-ubyte.gz", ImagesFile(2, 1, 2, {1, 2, 3, 4}));
  WriteGz("train-labels-idx1-ubyte.gz", LabelsFile({1, 2, 3}));
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_, Split::kTrain);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("2 images"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("3 labels"));
}

TEST_F(DatasetFilesTest, LabelOutOfRangeIsDataLoss) {
  WriteGz("train-images-idx3-ubyte.gz", ImagesFile(2, 1, 1, {1, 2}));
  WriteGz("train-labels-idx1-ubyte.gz", LabelsFile({1, 10}));
  EXPECT_EQ(LoadFashionMnist(dir_, Split::kTrain).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(DatasetFilesTest, CorruptFilesAreDataLoss) {
  WriteGz("train-labels-idx1-ubyte.gz", LabelsFile({1, 2}));
  // Bad magic.
  Bytes bad_magic = ImagesFile(2, 1, 1, {1, 2});
  bad_magic[3] = 0x01;
  WriteGz("train-images-idx3-ubyte.gz", bad_magic);
  EXPECT_EQ(LoadFashionMnist(dir_, Split::kTrain).status().code(),
            absl::StatusCode::kDataLoss);
  // Truncated data.
  WriteGz("train-images-idx3-ubyte.gz", ImagesFile(2, 1, 1, {1}));
  EXPECT_EQ(LoadFashionMnist(dir_, Split::kTrain).status().code(),
            absl::StatusCode::kDataLoss);
  // Gzip garbage.
  Bytes garbage = {0x1f, 0x8b, 0x08, 0x00, 0,    0,    0,   0,
                   0,    0x03, 0xff, 0xff, 0x00, 0x13, 0x37};
  WritePlain("train-images-idx3-ubyte.gz", garbage);
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_, Split::kTrain);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << d.status();
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr(dir_ + "/train-images-idx3-ubyte.gz"));
}

// ---------------------------------------------------------------------------
// Synthetic data.

TEST(SyntheticDatasetTest, ShapeAndLabelRange) {
  const Dataset d = MakeSyntheticDataset(1000, 16, 7, 1);
  EXPECT_EQ(d.num_samples, 1000);
  EXPECT_EQ(d.feature_dim, 16);
  EXPECT_EQ(d.num_classes, 7);
  EXPECT_EQ(d.features.size(), 16000u);
  ASSERT_EQ(d.labels.size(), 1000u);
  std::vector<int> histogram(7, 0);
  for (int32_t label : d.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 7);
    ++histogram[label];
  }
  for (int count : histogram) EXPECT_GT(count, 100);  // ~143 expected
  for (float x : d.features) {
    ASSERT_GE(x, -2.0f);
    ASSERT_LT(x, 2.0f);
  }
}

TEST(SyntheticDatasetTest, DeterministicBySeed) {
  const Dataset a = MakeSyntheticDataset(500, 32, 10, 42);
  const Dataset b = MakeSyntheticDataset(500, 32, 10, 42);
  const Dataset c = MakeSyntheticDataset(500, 32, 10, 43);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.features, c.features);
  EXPECT_NE(a.labels, c.labels);
  // A prefix of a larger data set is the smaller one.
  const Dataset longer = MakeSyntheticDataset(600, 32, 10, 42);
  EXPECT_TRUE(
      std::equal(a.labels.begin(), a.labels.end(), longer.labels.begin()));
}

TEST(SyntheticDatasetTest, PinnedValues) {
  // Every worker must generate the same data on any platform: the algorithm is
  // fixed (mt19937_64 + our own conversions), so these values never change.
  const Dataset d = MakeSyntheticDataset(4, 3, 5, 7);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 1, 0, 1}));
  const std::vector<float> expected = {
      0x1.c63bccp+0f,  0x1.145328p-2f, -0x1.40fb1p-3f, 0x1.066316p+0f,
      -0x1.22005cp+0f, -0x1.cda9cp+0f, -0x1.f370ep-3f, 0x1.e36e7p-3f,
      -0x1.07eceap+0f, 0x1.1e253ep+0f, -0x1.bb98p-2f,  -0x1.c78494p-1f};
  EXPECT_EQ(d.features, expected);
}

// Accuracy on `test` of a nearest-centroid classifier fit on `train`.
double NearestCentroidAccuracy(const Dataset& train, const Dataset& test) {
  const int dim = train.feature_dim, classes = train.num_classes;
  std::vector<double> centroid(classes * dim, 0.0);
  std::vector<int> count(classes, 0);
  for (int64_t i = 0; i < train.num_samples; ++i) {
    ++count[train.labels[i]];
    for (int j = 0; j < dim; ++j) {
      centroid[train.labels[i] * dim + j] += train.features[i * dim + j];
    }
  }
  for (int c = 0; c < classes; ++c) {
    for (int j = 0; j < dim; ++j) {
      centroid[c * dim + j] /= std::max(count[c], 1);
    }
  }
  int correct = 0;
  for (int64_t i = 0; i < test.num_samples; ++i) {
    int best = 0;
    double best_dist = 1e300;
    for (int c = 0; c < classes; ++c) {
      double dist = 0;
      for (int j = 0; j < dim; ++j) {
        const double diff = test.features[i * dim + j] - centroid[c * dim + j];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = c;
    }
    correct += best == test.labels[i];
  }
  return static_cast<double>(correct) / std::max<int64_t>(test.num_samples, 1);
}

TEST(SyntheticDatasetTest, IsLearnable) {
  // A nearest-centroid classifier fit on one half classifies the other half.
  const Dataset d = MakeSyntheticDataset(4000, 32, 10, 5);
  EXPECT_GT(NearestCentroidAccuracy(SliceDataset(d, 0, 2000),
                                    SliceDataset(d, 2000, 2000)),
            0.9);
}

TEST(SyntheticDatasetTest, TestSplitSharesTheTrainingClasses) {
  // synthetic:N's test set must be learnable from its training set (it was
  // drawn with other class prototypes once: chance accuracy forever).
  auto data = LoadTrainTest("synthetic:3000", "", 32, 10, 1);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_samples, 3000);
  EXPECT_EQ(data->test.num_samples, 500);
  EXPECT_GT(NearestCentroidAccuracy(data->train, data->test), 0.9);
  // The training set is the same draw as before the split.
  EXPECT_EQ(data->train.features,
            MakeSyntheticDataset(3000, 32, 10, 1).features);
  EXPECT_EQ(data->train.labels, MakeSyntheticDataset(3000, 32, 10, 1).labels);
}

TEST(SliceDataset, TakesTheRowsAsked) {
  const Dataset d = MakeSyntheticDataset(10, 3, 4, 9);
  const Dataset s = SliceDataset(d, 2, 5);
  EXPECT_EQ(s.num_samples, 5);
  EXPECT_EQ(s.feature_dim, 3);
  EXPECT_EQ(s.num_classes, 4);
  EXPECT_EQ(s.labels,
            std::vector<int32_t>(d.labels.begin() + 2, d.labels.begin() + 7));
  EXPECT_EQ(s.features, std::vector<float>(d.features.begin() + 6,
                                           d.features.begin() + 21));
  EXPECT_EQ(SliceDataset(d, 10, 0).num_samples, 0);
}

TEST(SyntheticDatasetTest, ClampsArguments) {
  const Dataset d = MakeSyntheticDataset(-3, 0, 0, 1);
  EXPECT_EQ(d.num_samples, 0);
  EXPECT_EQ(d.feature_dim, 1);
  EXPECT_EQ(d.num_classes, 1);
  EXPECT_TRUE(d.features.empty());
  EXPECT_TRUE(d.labels.empty());
}

// ---------------------------------------------------------------------------
// GatherBatch errors.

TEST(GatherBatchTest, RejectsBadArgumentsWithoutWriting) {
  const Dataset d = MakeSyntheticDataset(10, 4, 3, 9);
  std::vector<float> features(8, -1.0f);
  std::vector<int32_t> labels(2, -1);
  const std::vector<int64_t> ok_indices = {3, 9};
  const std::vector<int64_t> bad_indices = {3, 10};
  const std::vector<int64_t> negative = {-1};
  const std::vector<int64_t> three = {0, 1, 2};
  EXPECT_EQ(GatherBatch(d, bad_indices, absl::MakeSpan(features),
                        absl::MakeSpan(labels))
                .code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(
      GatherBatch(d, negative, absl::MakeSpan(features), absl::MakeSpan(labels))
          .code(),
      absl::StatusCode::kOutOfRange);
  EXPECT_EQ(features, std::vector<float>(8, -1.0f));
  EXPECT_EQ(labels, std::vector<int32_t>(2, -1));
  EXPECT_EQ(
      GatherBatch(d, three, absl::MakeSpan(features), absl::MakeSpan(labels))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherBatch(d, ok_indices, absl::MakeSpan(features).subspan(0, 7),
                        absl::MakeSpan(labels))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherBatch(d, ok_indices, absl::MakeSpan(features),
                        absl::MakeSpan(labels).subspan(0, 1))
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(GatherBatch(d, ok_indices, absl::MakeSpan(features),
                          absl::MakeSpan(labels))
                  .ok());
  EXPECT_EQ(labels[1], d.labels[9]);
  EXPECT_EQ(features[4], d.features[36]);
  // An empty batch is fine with empty buffers.
  EXPECT_TRUE(GatherBatch(d, {}, {}, {}).ok());
}

TEST(GatherBatchTest, InconsistentDatasetIsFailedPrecondition) {
  Dataset d = MakeSyntheticDataset(10, 4, 3, 9);
  d.features.resize(20);
  std::vector<float> features(4);
  std::vector<int32_t> labels(1);
  const std::vector<int64_t> indices = {0};
  EXPECT_EQ(
      GatherBatch(d, indices, absl::MakeSpan(features), absl::MakeSpan(labels))
          .code(),
      absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ferry
