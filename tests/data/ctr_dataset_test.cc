// CTR data in memory: generated files load to exactly what CriteoReader reads
// (plain and gzip), the dense transform, empty values, max_rows slices, batch
// assembly in the embedding-bag layout, malformed and missing files refused
// with the path or line named, and the documented bytes per example.
#include "data/ctr_dataset.h"

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/criteo_reader.h"
#include "data/ctr_generator.h"
#include "data/data_source.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/temp_dir_test.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Example `i` of a deterministic family: every value depends on i, some
// integers and ids empty.
CriteoExample Example(int64_t i) {
  CriteoExample x;
  x.label = static_cast<int>(i % 3 == 0);
  for (int j = 0; j < kCriteoDense; ++j) {
    x.dense[j] = (i + j) % 7 - 1;  // -1 .. 5
    if ((i + j) % 11 == 0) {
      x.dense[j] = 0;
      x.dense_missing |= 1u << j;
    }
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    x.ids[f] = (i + f) % 5 == 0
                   ? kCriteoMissingId
                   : (static_cast<uint64_t>(i) * 2654435761u + f) & 0xffffffffu;
  }
  return x;
}

class CtrDatasetTest : public TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text,
                    bool gzip = false) {
    const std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
                static_cast<int>(text.size()));
      gzclose(f);
    } else {
      FILE* f = fopen(path.c_str(), "wb");
      fwrite(text.data(), 1, text.size(), f);
      fclose(f);
    }
    return path.string();
  }

  // Lines Example(first) .. Example(first + n - 1).
  static std::string Lines(int64_t first, int64_t n) {
    std::string text;
    for (int64_t i = first; i < first + n; ++i) {
      text += FormatCriteoLine(Example(i)) + "\n";
    }
    return text;
  }
};

// Sample i of `data` equals `x` as the reader parsed it.
void ExpectSampleIs(const CtrDataset& data, int64_t i, const CriteoExample& x) {
  ASSERT_EQ(data.label(i), x.label) << "sample " << i;
  const absl::Span<const float> dense = data.dense(i);
  ASSERT_EQ(dense.size(), static_cast<size_t>(kCriteoDense));
  for (int j = 0; j < kCriteoDense; ++j) {
    ASSERT_EQ(dense[j], CtrDenseTransform(x.dense[j]))
        << "sample " << i << " I" << j + 1;
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ASSERT_EQ(data.id(i, f), x.ids[f]) << "sample " << i << " C" << f + 1;
    ASSERT_EQ(data.missing(i, f), x.ids[f] == kCriteoMissingId);
  }
}

// Every example of `path` as CriteoReader returns it.
std::vector<CriteoExample> ReadAll(const std::string& path) {
  std::vector<CriteoExample> all;
  auto reader = CriteoReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return all;
  CriteoExample x;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(x);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) return all;
    all.push_back(x);
  }
}

TEST_F(CtrDatasetTest, GeneratedFilesLoadAsTheReaderReadsThemPlainAndGzip) {
  CtrGeneratorOptions options;
  options.rows = 3000;
  options.test_rows = 700;
  options.seed = 5;
  std::vector<CtrTrainTest> loaded;
  for (bool gzip : {false, true}) {
    options.gzip = gzip;
    const std::string dir = (dir_ / (gzip ? "gz" : "plain")).string();
    ASSERT_TRUE(WriteCtrDataset(dir, options).ok());
    absl::StatusOr<CtrTrainTest> data = LoadCtrTrainTest(dir);
    ASSERT_TRUE(data.ok()) << data.status();
    const std::string suffix = gzip ? ".tsv.gz" : ".tsv";
    EXPECT_EQ(data->train.path(), dir + "/train" + suffix);
    EXPECT_EQ(data->test.path(), dir + "/test" + suffix);
    ASSERT_EQ(data->train.num_samples(), 3000);
    ASSERT_EQ(data->test.num_samples(), 700);
    EXPECT_EQ(data->train.read_stats().examples, 3000);
    EXPECT_EQ(data->train.read_stats().malformed, 0);
    EXPECT_THAT(data->train.load_summary(), HasSubstr("3000 examples"));
    EXPECT_EQ(data->train.MemoryBytes(), 3000 * kCtrBytesPerExample);

    const std::vector<CriteoExample> train = ReadAll(data->train.path());
    ASSERT_EQ(train.size(), 3000u);
    int64_t missing_ids = 0, clamped = 0, positives = 0;
    for (int64_t i = 0; i < 3000; ++i) {
      ExpectSampleIs(data->train, i, train[i]);
      for (int f = 0; f < kCriteoCategorical; ++f) {
        missing_ids += train[i].ids[f] == kCriteoMissingId;
      }
      for (int j = 0; j < kCriteoDense; ++j) clamped += train[i].dense[j] < 0;
      positives += train[i].label;
    }
    // The generated data exercises empty ids, negative counts and both
    // labels.
    EXPECT_GT(missing_ids, 0);
    EXPECT_GT(clamped, 0);
    EXPECT_GT(positives, 0);
    EXPECT_LT(positives, 3000);
    const std::vector<CriteoExample> test = ReadAll(data->test.path());
    ASSERT_EQ(test.size(), 700u);
    for (int64_t i = 0; i < 700; ++i) ExpectSampleIs(data->test, i, test[i]);
    loaded.push_back(*std::move(data));
  }
  // Same seed, same examples, whatever the compression.
  CtrBatch a, b;
  std::vector<int64_t> all(3000);
  for (int64_t i = 0; i < 3000; ++i) all[i] = i;
  ASSERT_TRUE(loaded[0].train.GatherBatch(all, a).ok());
  ASSERT_TRUE(loaded[1].train.GatherBatch(all, b).ok());
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.ids, b.ids);
}

TEST(CtrDenseTransformTest, IsLog1pOfTheClampedCount) {
  EXPECT_EQ(CtrDenseTransform(0), 0.0f);
  EXPECT_EQ(CtrDenseTransform(-1), 0.0f);
  EXPECT_EQ(CtrDenseTransform(-123456789), 0.0f);
  EXPECT_FLOAT_EQ(CtrDenseTransform(1), std::log(2.0f));
  EXPECT_FLOAT_EQ(CtrDenseTransform(1000), std::log(1001.0f));
  EXPECT_EQ(CtrDenseTransform(int64_t{1} << 40),
            static_cast<float>(std::log1p(std::ldexp(1.0, 40))));
}

TEST_F(CtrDatasetTest, EmptyValuesAndTheWholeIdRange) {
  // label, I1 = 7, I2 = empty, I3 = -3, I4..I13 = 0; C1 = ffffffff,
  // C2 = 00000000, C3 empty, C4 = 0000000A (upper case), the rest empty.
  std::string line = "1\t7\t\t-3";
  for (int j = 3; j < kCriteoDense; ++j) line += "\t0";
  line += "\tffffffff\t00000000\t\t0000000A";
  for (int f = 4; f < kCriteoCategorical; ++f) line += "\t";
  const std::string path = Write("t.tsv", line + "\r\n\n" + line + "\n");
  absl::StatusOr<CtrDataset> data = CtrDataset::LoadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->num_samples(), 2);  // the blank line is not an example
  EXPECT_EQ(data->label(1), 1);
  EXPECT_FLOAT_EQ(data->dense(1)[0], std::log(8.0f));
  EXPECT_EQ(data->dense(1)[1], 0.0f);
  EXPECT_EQ(data->dense(1)[2], 0.0f);
  EXPECT_EQ(data->id(1, 0), 0xffffffffu);
  EXPECT_EQ(data->id(1, 1), 0u);  // present, not missing
  EXPECT_FALSE(data->missing(1, 1));
  EXPECT_EQ(data->id(1, 2), kCriteoMissingId);
  EXPECT_TRUE(data->missing(1, 2));
  EXPECT_EQ(data->id(1, 3), 10u);
  EXPECT_EQ(data->id(1, kCriteoCategorical - 1), kCriteoMissingId);

  CtrBatch batch;
  const std::vector<int64_t> one = {1};
  ASSERT_TRUE(data->GatherBatch(one, batch).ok());
  EXPECT_EQ(batch.ids[0], 0xffffffffu);
  EXPECT_EQ(batch.ids[1], 0u);
  EXPECT_EQ(batch.ids[2], kCriteoMissingId);
  EXPECT_EQ(batch.ids[3], 10u);
}

TEST_F(CtrDatasetTest, MaxRowsLoadsTheFirstRowsOfEachFile) {
  Write("d/train.tsv", Lines(0, 100));
  Write("d/test.tsv.gz", Lines(1000, 30), /*gzip=*/true);
  CtrDatasetOptions options;
  options.max_rows = 10;
  absl::StatusOr<CtrTrainTest> data =
      LoadCtrTrainTest((dir_ / "d").string(), options);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train.num_samples(), 10);
  ASSERT_EQ(data->test.num_samples(), 10);
  for (int64_t i = 0; i < 10; ++i) {
    ExpectSampleIs(data->train, i, Example(i));
    ExpectSampleIs(data->test, i, Example(1000 + i));
  }
  EXPECT_THAT(data->train.load_summary(), HasSubstr("stopped at max_rows 10"));
  EXPECT_EQ(data->train.MemoryBytes(), 10 * kCtrBytesPerExample);

  options.max_rows = 1000;  // more than there is: all of it
  data = LoadCtrTrainTest((dir_ / "d").string(), options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_samples(), 100);
  EXPECT_EQ(data->test.num_samples(), 30);
  EXPECT_THAT(data->train.load_summary(), Not(HasSubstr("max_rows")));

  options.max_rows = -1;
  EXPECT_EQ(CtrDataset::LoadFile((dir_ / "d" / "train.tsv").string(), options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CtrDatasetTest, GatherBatchLaysOutOneIdPerFieldBag) {
  const std::string path = Write("t.tsv", Lines(0, 50));
  absl::StatusOr<CtrDataset> data = CtrDataset::LoadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::vector<int64_t> indices = {49, 3, 3, 0, 17, 3};  // duplicates
  CtrBatch batch;
  ASSERT_TRUE(data->GatherBatch(indices, batch).ok());
  ASSERT_EQ(batch.batch, 6);
  ASSERT_EQ(batch.num_fields, kCriteoCategorical);
  ASSERT_EQ(batch.dense.size(), 6u * kCriteoDense);
  ASSERT_EQ(batch.labels.size(), 6u);
  ASSERT_EQ(batch.offsets.size(), 6u * kCriteoCategorical + 1);
  ASSERT_EQ(batch.ids.size(), 6u * kCriteoCategorical);
  EXPECT_EQ(batch.offsets.front(), 0);
  EXPECT_EQ(batch.offsets.back(), static_cast<int32_t>(batch.ids.size()));
  for (size_t k = 0; k < indices.size(); ++k) {
    const CriteoExample x = Example(indices[k]);
    EXPECT_EQ(batch.labels[k], static_cast<float>(x.label));
    for (int j = 0; j < kCriteoDense; ++j) {
      EXPECT_EQ(batch.dense[k * kCriteoDense + j],
                CtrDenseTransform(x.dense[j]));
    }
    for (int f = 0; f < kCriteoCategorical; ++f) {
      const size_t bag = k * kCriteoCategorical + f;
      ASSERT_EQ(batch.offsets[bag + 1] - batch.offsets[bag], 1);
      EXPECT_EQ(batch.ids[batch.offsets[bag]], x.ids[f]);
    }
  }

  // A shorter batch into the same buffers: sizes follow it.
  const std::vector<int64_t> two = {1, 2};
  ASSERT_TRUE(data->GatherBatch(two, batch).ok());
  EXPECT_EQ(batch.batch, 2);
  EXPECT_EQ(batch.dense.size(), 2u * kCriteoDense);
  EXPECT_EQ(batch.offsets.size(), 2u * kCriteoCategorical + 1);
  EXPECT_EQ(batch.ids[kCriteoCategorical], Example(2).ids[0]);

  // Empty: no samples, one offset.
  ASSERT_TRUE(data->GatherBatch({}, batch).ok());
  EXPECT_EQ(batch.batch, 0);
  EXPECT_THAT(batch.offsets, ElementsAre(0));
  EXPECT_TRUE(batch.ids.empty());
  EXPECT_TRUE(batch.dense.empty());
  EXPECT_TRUE(batch.labels.empty());
}

TEST_F(CtrDatasetTest, GatherBatchRefusesIndicesOutOfRangeAndChangesNothing) {
  const std::string path = Write("t.tsv", Lines(0, 5));
  absl::StatusOr<CtrDataset> data = CtrDataset::LoadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  CtrBatch batch;
  const std::vector<int64_t> good = {4, 0};
  ASSERT_TRUE(data->GatherBatch(good, batch).ok());
  const CtrBatch before = batch;
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{0, 5}, std::vector<int64_t>{-1},
        std::vector<int64_t>{1, 2, int64_t{1} << 40}}) {
    absl::Status status = data->GatherBatch(bad, batch);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(status.message(), HasSubstr(std::to_string(bad.back())));
    EXPECT_THAT(status.message(), HasSubstr("[0, 5)"));
    EXPECT_EQ(batch.batch, before.batch);
    EXPECT_EQ(batch.dense, before.dense);
    EXPECT_EQ(batch.labels, before.labels);
    EXPECT_EQ(batch.offsets, before.offsets);
    EXPECT_EQ(batch.ids, before.ids);
  }
  const CtrDataset empty;
  EXPECT_EQ(empty.GatherBatch(good, batch).code(),
            absl::StatusCode::kOutOfRange);
}

TEST(CtrDatasetMemoryTest, ChunksHoldTheDocumentedBytesPerExample) {
  EXPECT_EQ(kCtrBytesPerExample, 13 * 4 + 26 * 4 + 4 + 1);
  CtrDataset data;
  EXPECT_EQ(data.MemoryBytes(), 0);
  // Two full chunks and a few more examples.
  const int64_t n = 2 * int64_t{kCtrChunkExamples} + 5;
  for (int64_t i = 0; i < n; ++i) data.Append(Example(i));
  data.ShrinkToFit();
  ASSERT_EQ(data.num_samples(), n);
  EXPECT_EQ(data.MemoryBytes(), n * kCtrBytesPerExample);
  for (int64_t i :
       {int64_t{0}, int64_t{kCtrChunkExamples} - 1, int64_t{kCtrChunkExamples},
        2 * int64_t{kCtrChunkExamples}, n - 1}) {
    ExpectSampleIs(data, i, Example(i));
  }
  // A batch across the chunks.
  const std::vector<int64_t> indices = {n - 1, kCtrChunkExamples - 1,
                                        kCtrChunkExamples, 0};
  CtrBatch batch;
  ASSERT_TRUE(data.GatherBatch(indices, batch).ok());
  for (size_t k = 0; k < indices.size(); ++k) {
    for (int f = 0; f < kCriteoCategorical; ++f) {
      EXPECT_EQ(batch.ids[k * kCriteoCategorical + f],
                Example(indices[k]).ids[f]);
    }
    EXPECT_EQ(batch.labels[k], static_cast<float>(Example(indices[k]).label));
  }
  // Copies are values.
  const CtrDataset copy = data;
  EXPECT_EQ(copy.num_samples(), n);
  ExpectSampleIs(copy, n - 1, Example(n - 1));
}

TEST_F(CtrDatasetTest, MalformedLinesAreReportedWithTheirNumbers) {
  std::string text = Lines(0, 3);
  text += "1\t2\t3\n";  // line 4: 3 columns
  text += Lines(3, 4);
  std::string bad_hex = FormatCriteoLine(Example(7));
  size_t pos = bad_hex.find('\t');  // the tab before I1
  // The tab before C2, column 15 (0-based; 0 is the label).
  for (int k = 0; k < kCriteoDense + 1; ++k) pos = bad_hex.find('\t', pos + 1);
  ASSERT_NE(pos, std::string::npos);
  bad_hex.replace(pos + 1, 8, "68FD1E6G");  // line 9: C2 is not hex
  text += bad_hex + "\n";
  text += Lines(8, 5);
  const std::string path = Write("t.tsv", text);
  absl::StatusOr<CtrDataset> data = CtrDataset::LoadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->num_samples(), 12);
  ExpectSampleIs(*data, 3, Example(3));  // the bad line is skipped
  ExpectSampleIs(*data, 7, Example(8));
  const CriteoReadStats& stats = data->read_stats();
  EXPECT_EQ(stats.lines, 14);
  EXPECT_EQ(stats.examples, 12);
  EXPECT_EQ(stats.malformed, 2);
  ASSERT_EQ(stats.first_errors.size(), 2u);
  EXPECT_THAT(stats.first_errors[0], StartsWith("line 4: "));
  EXPECT_THAT(stats.first_errors[1], StartsWith("line 9: "));
  EXPECT_THAT(stats.first_errors[1], HasSubstr("68FD1E6G"));
  EXPECT_THAT(data->load_summary(), HasSubstr("2 malformed"));
  EXPECT_THAT(data->load_summary(), HasSubstr("line 9: "));

  // Counting while streaming agrees with what loading keeps.
  absl::StatusOr<int64_t> count = CountCtrExamples(path);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 12);
  CtrDatasetOptions first5;
  first5.max_rows = 5;
  EXPECT_EQ(CountCtrExamples(path, first5).value_or(-1), 5);
}

TEST_F(CtrDatasetTest, MostlyMalformedAndForeignFilesAreRefused) {
  // Mostly malformed: the line numbers of the first bad lines are named.
  std::string text = Lines(0, 2);
  for (int i = 0; i < 5; ++i) text += "0\tnot\tcriteo\n";
  std::string path = Write("bad.tsv", text);
  absl::StatusOr<CtrDataset> data = CtrDataset::LoadFile(path);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr(path));
  EXPECT_THAT(data.status().message(), HasSubstr("line 3: "));
  EXPECT_EQ(CountCtrExamples(path).status().code(),
            absl::StatusCode::kDataLoss);

  // A file of another format (CSV) fails fast.
  std::string csv;
  for (int i = 0; i < 5000; ++i) csv += "1,2,3,abc\n";
  path = Write("csv.tsv", csv);
  data = CtrDataset::LoadFile(path);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr("not a Criteo TSV file"));
  EXPECT_THAT(data.status().message(), HasSubstr("line 1: "));

  // max_rows does not hide a bad start: judged on the lines read.
  text.clear();
  for (int i = 0; i < 3; ++i) text += "garbage\n";
  text += Lines(0, 10);
  path = Write("start.tsv", text);
  CtrDatasetOptions slice;
  slice.max_rows = 2;
  data = CtrDataset::LoadFile(path, slice);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr("3 of the first 5 lines"));
  EXPECT_THAT(data.status().message(), HasSubstr("line 2: "));
  slice.max_rows = 5;  // 3 of 8 lines: accepted
  data = CtrDataset::LoadFile(path, slice);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->read_stats().malformed, 3);

  // Truncated gzip.
  std::string gz_path = Write("t.tsv.gz", Lines(0, 400), /*gzip=*/true);
  std::filesystem::resize_file(gz_path,
                               std::filesystem::file_size(gz_path) - 10);
  data = CtrDataset::LoadFile(gz_path);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CtrDatasetTest, DirectoryErrorsNameThePath) {
  const std::string missing = (dir_ / "nope").string();
  absl::StatusOr<CtrTrainTest> data = LoadCtrTrainTest(missing);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr(missing));
  EXPECT_THAT(data.status().message(), HasSubstr("ferry data ctr"));

  const std::string file = Write("plain_file", "x");
  EXPECT_EQ(LoadCtrTrainTest(file).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // train.tsv there, test.tsv not.
  const std::string dir = (dir_ / "d").string();
  Write("d/train.tsv", Lines(0, 3));
  data = LoadCtrTrainTest(dir);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr(dir + "/test.tsv"));

  // An empty test file.
  Write("d/test.tsv", "");
  data = LoadCtrTrainTest(dir);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr(dir + "/test.tsv"));
  EXPECT_THAT(data.status().message(), HasSubstr("empty"));

  // Both train.tsv and train.tsv.gz: which one is meant is unclear.
  Write("d/test.tsv", Lines(0, 3));
  ASSERT_TRUE(LoadCtrTrainTest(dir).ok());
  Write("d/train.tsv.gz", Lines(0, 3), /*gzip=*/true);
  data = LoadCtrTrainTest(dir);
  ASSERT_EQ(data.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(data.status().message(), HasSubstr(dir + "/train.tsv.gz"));

  // Only the .gz: found by its name, read as gzip by its content.
  std::filesystem::remove(dir_ / "d" / "train.tsv");
  absl::StatusOr<std::string> found = FindCtrFile(dir, "train");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, dir + "/train.tsv.gz");
  data = LoadCtrTrainTest(dir);
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectSampleIs(data->train, 2, Example(2));
}

TEST(CtrDatasetSpecTest, ParsesCriteoDirAndTheDenseTrainersRefuseIt) {
  EXPECT_TRUE(IsCtrDatasetSpec("criteo:/data/ctr"));
  EXPECT_FALSE(IsCtrDatasetSpec("fashion-mnist"));
  absl::StatusOr<std::string> dir = ParseCtrDatasetSpec("criteo:/data/ctr");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, "/data/ctr");
  EXPECT_EQ(*ParseCtrDatasetSpec("criteo:rel/dir"), "rel/dir");
  EXPECT_EQ(ParseCtrDatasetSpec("criteo:").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCtrDatasetSpec("synthetic:10").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCtrDatasetSpec("criteo/x").status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<TrainTestData> dense =
      LoadTrainTest("criteo:/data/ctr", "", 13, 2, 1);
  ASSERT_EQ(dense.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dense.status().message(), HasSubstr("sparse models"));
  // The dense specs still load.
  EXPECT_TRUE(LoadTrainTest("synthetic:12", "", 13, 2, 1).ok());
}

}  // namespace
}  // namespace ferry
