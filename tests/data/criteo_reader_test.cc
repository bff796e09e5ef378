// Streaming Criteo files: plain and gzip, blank and malformed lines counted
// with their numbers, long lines skipped, mostly malformed and empty files
// refused, truncated gzip caught.
#include "data/criteo_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/temp_dir_test.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

std::string Line(int label, uint32_t id) {
  CriteoExample x;
  x.label = label;
  for (int j = 0; j < kCriteoDense; ++j) x.dense[j] = j;
  for (int j = 0; j < kCriteoCategorical; ++j) x.ids[j] = id + j;
  return FormatCriteoLine(x);
}

class CriteoReaderTest : public TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text,
                    bool gzip = false) {
    const std::string path = (dir_ / name).string();
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
    return path;
  }

  // Reads every example; the status of the first error, else OK.
  absl::Status ReadAll(const std::string& path, std::vector<CriteoExample>& out,
                       CriteoReaderOptions options = {},
                       CriteoReadStats* stats = nullptr) {
    auto reader = CriteoReader::Open(path, options);
    if (!reader.ok()) return reader.status();
    CriteoExample x;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(x);
      if (stats != nullptr) *stats = (*reader)->stats();
      if (!more.ok()) return more.status();
      if (!*more) return absl::OkStatus();
      out.push_back(x);
    }
  }
};

TEST_F(CriteoReaderTest, StreamsPlainAndGzipAlikeAcrossSmallBlocks) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += Line(i % 2, 1000 * i) + "\n";
  text += Line(1, 7);  // no final newline
  CriteoReaderOptions small;
  small.block_bytes = 64;  // lines span blocks
  small.max_line_bytes = 1024;
  for (bool gzip : {false, true}) {
    std::vector<CriteoExample> got;
    CriteoReadStats stats;
    ASSERT_TRUE(ReadAll(Write(gzip ? "t.tsv.gz" : "t.tsv", text, gzip), got,
                        small, &stats)
                    .ok());
    ASSERT_EQ(got.size(), 301u);
    EXPECT_EQ(got[299].ids[0], 299000u);
    EXPECT_EQ(got[300].ids[3], 10u);
    EXPECT_EQ(got[300].label, 1);
    EXPECT_EQ(stats.lines, 301);
    EXPECT_EQ(stats.malformed, 0);
  }
}

TEST_F(CriteoReaderTest, MalformedLinesAreSkippedAndCountedWithTheirNumbers) {
  std::string text = Line(0, 1) + "\n\n" + "garbage\n" + Line(1, 2) + "\n" +
                     std::string(3000, 'x') + "\n" + Line(0, 3) + "\n";
  CriteoReaderOptions options;
  options.max_line_bytes = 1024;
  options.block_bytes = 512;
  std::vector<CriteoExample> got;
  CriteoReadStats stats;
  ASSERT_TRUE(ReadAll(Write("m.tsv", text), got, options, &stats).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].ids[0], 3u);
  EXPECT_EQ(stats.lines, 5);  // blank line 2 is not counted
  EXPECT_EQ(stats.malformed, 2);
  ASSERT_EQ(stats.first_errors.size(), 2u);
  EXPECT_THAT(stats.first_errors[0], HasSubstr("line 3: column 1 (label)"));
  EXPECT_THAT(stats.first_errors[1], HasSubstr("line 5: longer than 1024"));
}

TEST_F(CriteoReaderTest, MostlyMalformedFilesAreRefusedEarly) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "a,b,c\n";
  std::vector<CriteoExample> got;
  CriteoReadStats stats;
  const std::string path = Write("csv.tsv", text);
  absl::Status s = ReadAll(path, got, {}, &stats);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 1: "));
  EXPECT_EQ(stats.lines, kCriteoEarlyCheckLines);  // it did not read on

  // Small files are judged at their end.
  s = ReadAll(Write("half.tsv", Line(0, 1) + "\nx\ny\n"), got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("2 of 3 lines malformed"));
}

TEST_F(CriteoReaderTest, EmptyMissingAndTruncatedFilesAreErrors) {
  std::vector<CriteoExample> got;
  absl::Status s = ReadAll(Write("empty.tsv", ""), got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the file is empty"));
  EXPECT_EQ(ReadAll((dir_ / "none.tsv").string(), got).code(),
            absl::StatusCode::kNotFound);

  std::string text;
  for (int i = 0; i < 2000; ++i) text += Line(i % 2, i) + "\n";
  const std::string path = Write("cut.tsv.gz", text, true);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  s = ReadAll(path, got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("truncated gzip"));
}

}  // namespace
}  // namespace ferry
